/*
 * sentinel_switch.c - what a client may and may not do with the old master
 * around a failover (issue 22), against real redis-server and
 * redis-sentinel processes of the test's own (harness/sentinel.c):
 *
 *   open during failover  an open whose ROLE check waits on a paused master
 *                         while the sentinels promote a replica does not
 *                         return connected to that master when it resumes
 *                         (a zombie that still says ROLE master): a lock held
 *                         on the new master is busy for the new client
 *   unlock around switch  an unlock in flight to a paused master when the
 *                         client switches is settled on the new master, not
 *                         answered by the resumed old one (with and without
 *                         replica_acks)
 *   queued command        a command queued for the old master's only
 *                         connection goes to the new master after the switch
 *   unnamed master        the sentinels name a master the client cannot
 *                         confirm: the resumed old master is not used
 *   status mid-failover   an open that reaches only a sentinel in the middle
 *                         of a failover says RLOCK_EIO (try again), not
 *                         RLOCK_EREDIS (no such master)
 *   silent sentinel       the polls, which ask every sentinel, leave one that
 *                         timed out alone for a while
 *
 * One set-up per test. Durations are scaled by TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

typedef struct seen {
    atomic_int switched;
} seen;

static void on_event(const rlock_event *ev, void *arg) {
    seen *s = arg;
    if (ev->kind == RLOCK_EVENT_MASTER_SWITCHED) {
        atomic_fetch_add(&s->switched, 1);
        printf("      MASTER_SWITCHED %s\n", ev->detail);
    }
}

static void sentinel_config(const h_sentinels *hs, rlock_config *cfg, seen *s) {
    h_config(cfg);
    cfg->url = hs->url;
    cfg->watchdog_timeout_ms = H_MS(10000);
    cfg->retry_attempts = 20;
    cfg->retry_interval_ms = 250;
    cfg->on_event = on_event;
    cfg->callback_arg = s;
}

static int has_key(const h_server *d, const char *name) {
    redisContext *c = h_server_redis(d);
    int yes = h_exists(c, name, strlen(name));
    redisFree(c);
    return yes;
}

/* Whether every sentinel names a master other than old. */
static int all_moved_from(h_sentinels *hs, const h_server *old) {
    for (int i = 0; i < 3; i++) {
        h_server *named = h_sentinels_named_master(hs, i);
        if (named == NULL || named == old)
            return 0;
    }
    return 1;
}

/* ---- an open during a failover ---------------------------------------------------- */

typedef struct opener {
    rlock_config cfg;
    rlock_client *client;
    int rc;
} opener;

static void *open_main(void *arg) {
    opener *o = arg;
    rlock_error_info info;
    o->rc = rlock_client_open(&o->cfg, &o->client);
    rlock_last_error_info(&info);
    if (o->rc != RLOCK_OK)
        printf("      open: %s\n", info.message);
    return NULL;
}

/*
 * The master is paused, then a client opens: a sentinel names the paused
 * master and the open's ROLE check waits there. The sentinels promote a
 * replica, an older client takes L on it, and the old master resumes still
 * saying ROLE master: the waiting open must not come back with it.
 */
static void test_open_during_failover(void **state) {
    h_sentinels *hs = *state;
    seen sa = {0}, sb = {0};
    rlock_config cfg;
    opener o = {0};
    pthread_t th;
    h_server *old = hs->data[0];
    const char *name = h_unique_name("sentinel-open-failover");
    sentinel_config(hs, &cfg, &sa);
    rlock_client *a = h_open_config(&cfg);
    rlock *la = h_get(a, name);
    sentinel_config(hs, &o.cfg, &sb);
    o.cfg.connect_timeout_ms = H_MS(20000); /* the ROLE check outlasts the failover */
    h_server_pause(old);
    assert_int_equal(pthread_create(&th, NULL, open_main, &o), 0);
    H_WAIT_FOR(all_moved_from(hs, old) && atomic_load(&sa.switched) >= 1, 20000);
    h_server *now = h_sentinels_named_master(hs, 0);
    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    assert_true(has_key(now, name));
    h_server_resume(old);
    pthread_join(th, NULL);
    printf("      the open during the failover returned %d\n", o.rc);
    if (o.rc == RLOCK_OK) {
        rlock *lb = h_get(o.client, name);
        int rc = rlock_try_lock(lb, 0, RLOCK_LEASE_WATCHDOG);
        printf("      its try_lock of the lock held on the new master: %d\n", rc);
        if (rc == RLOCK_OK)
            rlock_unlock(lb);
        H_ASSERT_RC(rc, RLOCK_BUSY);
        rlock_free(lb);
        rlock_client_close(o.client);
    } else {
        H_ASSERT_RC(o.rc, RLOCK_EIO); /* it may also give up: never with the old master */
    }
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    rlock_free(la);
    rlock_client_close(a);
}

/* ---- an unlock around the switch -------------------------------------------------- */

typedef struct holder {
    rlock *lock;
    atomic_int locked, go;
    int lock_rc, unlock_rc;
} holder;

/* Locks, waits for the go, unlocks (ownership is the thread's). */
static void *hold_main(void *arg) {
    holder *h = arg;
    h->lock_rc = rlock_lock(h->lock);
    atomic_store(&h->locked, 1);
    while (!atomic_load(&h->go))
        h_sleep_ms(5);
    h->unlock_rc = rlock_unlock(h->lock);
    return NULL;
}

/*
 * An unlock sent to a paused master stays in flight while the client
 * switches to the promoted replica, which has the lock (replicated); then
 * the old master resumes and answers it. The unlock must take the lock away
 * where it is held: the new master.
 */
static void unlock_around_switch(h_sentinels *hs, int replica_acks) {
    seen s = {0};
    rlock_config cfg;
    pthread_t th;
    h_server *old = hs->data[0];
    const char *name = h_unique_name("sentinel-unlock-switch");
    sentinel_config(hs, &cfg, &s);
    cfg.command_timeout_ms = H_MS(20000); /* the unlock outlasts the failover */
    cfg.replica_acks = replica_acks;
    rlock_client *c = h_open_config(&cfg);
    holder h = {.lock = h_get(c, name)};
    assert_int_equal(pthread_create(&th, NULL, hold_main, &h), 0);
    H_WAIT_FOR(atomic_load(&h.locked), 5000);
    H_ASSERT_RC(h.lock_rc, RLOCK_OK);
    redisContext *m = h_server_redis(old);
    assert_int_equal(h_cmd_int(m, "WAIT 2 %d", 2000), 2);
    redisFree(m);
    h_server_pause(old);
    atomic_store(&h.go, 1);
    H_WAIT_FOR(all_moved_from(hs, old) && atomic_load(&s.switched) >= 1, 20000);
    h_server *now = h_sentinels_named_master(hs, 0);
    h_sleep_ms(200);
    h_server_resume(old);
    pthread_join(th, NULL);
    int on_new = has_key(now, name);
    printf("      unlock: %d; the lock is %s on the new master\n", h.unlock_rc,
           on_new ? "still" : "not");
    /* replica_acks: applied on the new master, which has one replica left. */
    if (replica_acks > 0 && h.unlock_rc == RLOCK_ENOREPL)
        h.unlock_rc = RLOCK_OK;
    H_ASSERT_RC(h.unlock_rc, RLOCK_OK);
    assert_false(on_new);
    rlock_free(h.lock);
    rlock_client_close(c);
}

static void test_unlock_around_switch(void **state) {
    unlock_around_switch(*state, 0);
}

static void test_unlock_around_switch_acks(void **state) {
    unlock_around_switch(*state, 2);
}

/* A try_lock of its own lock, on a thread of its own. */
typedef struct trier {
    rlock *lock;
    int rc;
} trier;

static void *trier_main(void *arg) {
    trier *t = arg;
    t->rc = rlock_try_lock(t->lock, 0, RLOCK_LEASE_WATCHDOG);
    if (t->rc == RLOCK_OK)
        rlock_unlock(t->lock);
    return NULL;
}

/* The number of scripts the data server d ran (EVALSHA, EVAL). */
static long long scripts_on(const h_server *d) {
    redisContext *c = h_server_redis(d);
    long long n = h_script_calls(c);
    redisFree(c);
    return n;
}

/*
 * One pooled connection, busy with an unlock on the paused master; a
 * try_lock queues for it. The client switches, the old master resumes and
 * answers the unlock, the connection comes back: the queued try_lock must
 * go to the new master, not connect to the old one afresh.
 */
static void test_queued_command_after_switch(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    rlock_config cfg;
    pthread_t th, tt;
    h_server *old = hs->data[0];
    sentinel_config(hs, &cfg, &s);
    cfg.pool_size = 1;
    cfg.command_timeout_ms = H_MS(20000);
    rlock_client *c = h_open_config(&cfg);
    holder h = {.lock = h_get(c, h_unique_name("sentinel-queued-holder"))};
    trier t = {.lock = h_get(c, h_unique_name("sentinel-queued"))};
    assert_int_equal(pthread_create(&th, NULL, hold_main, &h), 0);
    H_WAIT_FOR(atomic_load(&h.locked), 5000);
    H_ASSERT_RC(h.lock_rc, RLOCK_OK);
    redisContext *m = h_server_redis(old);
    assert_int_equal(h_cmd_int(m, "WAIT 2 %d", 2000), 2);
    h_cmd_ok(m, "CONFIG RESETSTAT");
    redisFree(m);
    h_server_pause(old);
    atomic_store(&h.go, 1);
    h_sleep_ms(200); /* the unlock holds the only connection */
    assert_int_equal(pthread_create(&tt, NULL, trier_main, &t), 0);
    H_WAIT_FOR(all_moved_from(hs, old) && atomic_load(&s.switched) >= 1, 20000);
    h_sleep_ms(200);
    h_server_resume(old);
    pthread_join(th, NULL);
    pthread_join(tt, NULL);
    long long on_old = scripts_on(old);
    printf("      unlock %d, queued try_lock %d; scripts run on the old master after its "
           "pause: %lld\n", h.unlock_rc, t.rc, on_old);
    H_ASSERT_RC(t.rc, RLOCK_OK);
    /* The unlock sent before the switch runs there when it resumes; nothing else may. */
    assert_true(on_old <= 1);
    rlock_free(h.lock);
    rlock_free(t.lock);
    rlock_client_close(c);
}

/* ---- a master the sentinels no longer name ---------------------------------------- */

/* Lets the default user run ROLE on data server d, or not (allow 0). */
static void role_allowed(const h_server *d, int allow) {
    redisContext *c = h_server_redis(d);
    h_cmd_ok(c, "ACL SETUSER default %s", allow ? "+role" : "-role");
    redisFree(c);
}

/*
 * The sentinels promote a replica the client cannot confirm (ROLE refused
 * there) while the master is paused; it then resumes, still saying master.
 * The client must not go on with it: the sentinels name another master under
 * a newer config epoch. Once the new master can be confirmed, it is adopted.
 */
static void test_unnamed_master_left(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    rlock_config cfg;
    h_server *old = hs->data[0];
    const char *name = h_unique_name("sentinel-unnamed");
    sentinel_config(hs, &cfg, &s);
    rlock_client *c = h_open_config(&cfg);
    rlock *lock = h_get(c, name);
    role_allowed(hs->data[1], 0);
    role_allowed(hs->data[2], 0);
    h_server_pause(old);
    H_WAIT_FOR(all_moved_from(hs, old), 20000);
    h_server *now = h_sentinels_named_master(hs, 0);
    h_sleep_ms(H_MS(2500)); /* polls that find the new master, and cannot adopt it */
    h_server_resume(old);
    int rc = rlock_try_lock(lock, 0, RLOCK_LEASE_WATCHDOG);
    int on_old = has_key(old, name);
    printf("      try_lock with the old master resumed: %d (%s on it)\n", rc,
           on_old ? "the lock is" : "nothing");
    if (rc == RLOCK_OK)
        rlock_unlock(lock);
    assert_int_not_equal(rc, RLOCK_OK);
    assert_false(on_old);
    assert_int_equal(atomic_load(&s.switched), 0);
    role_allowed(now, 1);
    H_WAIT_FOR(atomic_load(&s.switched) >= 1, 10000);
    H_ASSERT_RC(rlock_try_lock(lock, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    assert_true(has_key(now, name));
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    rlock_free(lock);
    rlock_client_close(c);
}

/* ---- the status of an open mid-failover ------------------------------------------- */

/* Whether sentinel i is in the middle of a failover (SENTINEL MASTER's flags). */
static int failing_over(const h_sentinels *hs, int i) {
    redisContext *c = h_server_redis(hs->sentinel[i]);
    redisReply *r = h_cmd(c, "SENTINEL MASTER %s", H_SENTINEL_MASTER_NAME);
    int yes = 0;
    for (size_t k = 0; r->type == REDIS_REPLY_ARRAY && k + 1 < r->elements; k += 2)
        if (strcmp(r->element[k]->str, "flags") == 0)
            yes = strstr(r->element[k + 1]->str, "failover_in_progress") != NULL;
    freeReplyObject(r);
    redisFree(c);
    return yes;
}

static void test_open_mid_failover_is_eio(void **state) {
    h_sentinels *hs = *state;
    rlock_error_info info;
    char one[128];
    snprintf(one, sizeof one, "redis-sentinel://127.0.0.1:%d/%s", h_server_port(hs->sentinel[0]),
             H_SENTINEL_MASTER_NAME);
    redisContext *s0 = h_server_redis(hs->sentinel[0]);
    h_cmd_ok(s0, "SENTINEL FAILOVER %s", H_SENTINEL_MASTER_NAME);
    redisFree(s0);
    H_WAIT_FOR(failing_over(hs, 0), 5000);
    int rc = h_open_status(one, H_MS(2000), &info);
    int still = failing_over(hs, 0);
    printf("      opened through the failing-over sentinel alone: %d (%s)\n", rc, info.message);
    if (rc != RLOCK_OK || still) /* an answer only if the failover ended meanwhile */
        H_ASSERT_RC(rc, RLOCK_EIO);
    /* A name no sentinel knows stays RLOCK_EREDIS. */
    strcpy(strrchr(one, '/') + 1, "no-such-master");
    H_ASSERT_RC(h_open_status(one, H_MS(2000), &info), RLOCK_EREDIS);
}

/* ---- a sentinel that never answers --------------------------------------------- */

/* A listening socket nobody serves: the kernel accepts, nothing answers (a paused
 * sentinel, of this test's alone). Its port in *port. */
static int silent_listener(int *port) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(fd, 128), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    *port = ntohs(addr.sin_port);
    return fd;
}

/* The connections waiting on fd (accepted and closed here). */
static int connections_waiting(int fd) {
    int n = 0;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (int c; (c = accept(fd, NULL, NULL)) >= 0; n++)
        close(c);
    return n;
}

/*
 * Every poll asks every sentinel; one that never answers costs the monitor
 * its 1 s time bound each time it is asked (and each time the monitor tries
 * to subscribe to it), delaying what the monitor watches meanwhile. After it
 * timed out it is left alone for a while: counted by its connections.
 */
static void test_silent_sentinel_left_out(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    rlock_config cfg;
    char url[320];
    int port;
    int fd = silent_listener(&port);
    snprintf(url, sizeof url, "%s", hs->url);
    snprintf(strrchr(url, '/'), sizeof url - (size_t)(strrchr(url, '/') - url),
             ",127.0.0.1:%d/%s", port, H_SENTINEL_MASTER_NAME);
    sentinel_config(hs, &cfg, &s);
    cfg.url = url;
    rlock_client *c = h_open_config(&cfg);
    h_sleep_ms(8000);
    int n = connections_waiting(fd);
    printf("      connections to the silent sentinel in 8 s after the open: %d\n", n);
    assert_true(n <= 3); /* asked at every poll and subscription attempt: 9 */
    rlock_client_close(c);
    close(fd);
}

/* The connections sentinel s accepted so far (INFO stats, on the kept connection c). */
static long long connections_received(redisContext *c) {
    redisReply *reply = h_cmd(c, "INFO stats");
    assert_non_null(reply);
    assert_int_equal(reply->type, REDIS_REPLY_STRING);
    const char *at = strstr(reply->str, "total_connections_received:");
    assert_non_null(at);
    long long n = atoll(at + strlen("total_connections_received:"));
    freeReplyObject(reply);
    return n;
}

/*
 * In steady state (no failover, the master in use named by every sentinel)
 * the monitor's 1 s poll asks one sentinel, the next in turn each time, not
 * every one: counted by the connections each sentinel accepts over 6 s of
 * it (the subscriptions are kept, and so are this test's connections).
 */
static void test_poll_asks_one_sentinel(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    rlock_config cfg;
    redisContext *kept[3];
    long long before[3], total = 0;
    sentinel_config(hs, &cfg, &s);
    rlock_client *c = h_open_config(&cfg);
    for (int i = 0; i < 3; i++)
        kept[i] = h_server_redis(hs->sentinel[i]);
    h_sleep_ms(1500); /* the subscriptions made, the first polls done */
    for (int i = 0; i < 3; i++)
        before[i] = connections_received(kept[i]);
    h_sleep_ms(6000);
    for (int i = 0; i < 3; i++) {
        long long n = connections_received(kept[i]) - before[i];
        printf("      connections to sentinel %d in 6 s of steady state: %lld\n", i, n);
        assert_true(n >= 1); /* rotating: each is asked in turn */
        assert_true(n <= 3); /* asked by every poll: 6 */
        total += n;
        redisFree(kept[i]);
    }
    assert_true(total >= 4 && total <= 8); /* one a poll: 6 (every one at each: 18) */
    assert_int_equal(atomic_load(&s.switched), 0);
    rlock_client_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SENTINEL_TEST(test_open_during_failover),
        H_SENTINEL_TEST(test_unlock_around_switch),
        H_SENTINEL_TEST(test_unlock_around_switch_acks),
        H_SENTINEL_TEST(test_queued_command_after_switch),
        H_SENTINEL_TEST(test_unnamed_master_left),
        H_SENTINEL_TEST(test_open_mid_failover_is_eio),
        H_SENTINEL_TEST(test_silent_sentinel_left_out),
        H_SENTINEL_TEST(test_poll_asks_one_sentinel),
    };
    /* SENTINEL_SWITCH_ONLY=<name>: that test alone (each costs a set-up and a failover). */
    const char *only = getenv("SENTINEL_SWITCH_ONLY");
    for (size_t i = 0; only != NULL && i < sizeof(tests) / sizeof(tests[0]); i++)
        if (strcmp(tests[i].name, only) == 0)
            return _cmocka_run_group_tests("sentinel_switch", &tests[i], 1, NULL, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
