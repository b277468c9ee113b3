/*
 * test_ownership.c - ownership truth (issue 8, classes 1-4 and 14) and errors a
 * person can act on. Each test says what the library did before.
 *
 *   two owners      one client, two threads: A loses X, B acquires X; A's loss
 *                   is reported once, A's unlock is RLOCK_ENOTOWNER, B is
 *                   renewed untouched.
 *   reentrant loss  a thread two levels deep whose field vanished: lock says
 *                   RLOCK_ELOST and re-creates nothing; the next lock starts at
 *                   count 1; an unlock two levels deep says RLOCK_ELOST too.
 *   ACL release     an unlock refused by the ACL (no channel) leaves the lock
 *                   held and renewed: RLOCK_ENOPERM, never "released but error".
 *   not a lock      somebody's hash under the name: RLOCK_ENOTLOCK from
 *                   acquire (at once), unlock and force_unlock; untouched.
 *   least privilege the ACL docs/failure-modes.md documents is enough.
 *   config ranges   every documented range accepted at its bounds, refused
 *                   one past them.
 *   errors          wrong password, unknown host, refused port and an ACL
 *                   refusal are told apart by status and detail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define WD H_MS(900) /* renewal every WD/3 */

/* ---- event recorder -------------------------------------------------- */

#define MAX_EVENTS 256

struct events {
    pthread_mutex_t mu;
    int n;
    int kinds[MAX_EVENTS];
    char names[MAX_EVENTS][128];
    int lost;                   /* on_lock_lost calls */
};

static void events_init(struct events *e)
{
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->mu, NULL);
}

static void on_event(const rlock_event *ev, void *arg)
{
    struct events *e = arg;
    pthread_mutex_lock(&e->mu);
    if (e->n < MAX_EVENTS) {
        e->kinds[e->n] = ev->kind;
        snprintf(e->names[e->n], sizeof e->names[0], "%s", ev->name ? ev->name : "");
        e->n++;
    }
    pthread_mutex_unlock(&e->mu);
}

static void on_lost(const char *name, void *arg)
{
    struct events *e = arg;
    (void)name;
    pthread_mutex_lock(&e->mu);
    e->lost++;
    pthread_mutex_unlock(&e->mu);
}

/* LOCK_LOST events for name. */
static int lost_events(struct events *e, const char *name)
{
    int n = 0;
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->n; i++)
        n += e->kinds[i] == RLOCK_EVENT_LOCK_LOST && strcmp(e->names[i], name) == 0;
    pthread_mutex_unlock(&e->mu);
    return n;
}

static int lost_calls(struct events *e)
{
    pthread_mutex_lock(&e->mu);
    int n = e->lost;
    pthread_mutex_unlock(&e->mu);
    return n;
}

static rlock_client *open_recording(const char *url, struct events *e)
{
    rlock_config cfg;
    h_config(&cfg);
    if (url != NULL)
        cfg.url = url;
    cfg.watchdog_timeout_ms = WD;
    cfg.on_lock_lost = on_lost;
    cfg.on_event = on_event;
    cfg.callback_arg = e;
    return h_open_config(&cfg);
}

/* An ACL user name of this run (h_unique_name has ':', which a url's userinfo cannot). */
static const char *unique_user(const char *prefix)
{
    static char names[4][64];
    static int next;
    char *name = names[next++ % 4];
    snprintf(name, sizeof names[0], "%s%d_%d", prefix, (int)getpid(), next);
    return name;
}

/* h_url() with user:password@ inserted. */
static const char *url_as(const char *user, const char *password)
{
    static char url[256];
    const char *rest = h_url() + strlen("redis://");
    snprintf(url, sizeof url, "redis://%s:%s@%s", user, password, rest);
    return url;
}

/* ---- class 1: one client, two owners ---------------------------------- */

static void test_two_owners_one_client(void **state)
{
    struct events ev;
    const char *name = h_unique_name("two-owners");
    redisContext *r = h_redis();
    rlock_client *c, *other;
    rlock *l, *ol;
    h_actor *a = h_actor_start(), *b = h_actor_start();
    struct h_try bt;
    char *b_field = NULL;
    long long count;
    (void)state;

    events_init(&ev);
    c = open_recording(NULL, &ev);
    other = h_open(30000, 0);
    l = h_get(c, name);
    ol = h_get(other, name);
    bt = (struct h_try){l, H_MS(10000), RLOCK_LEASE_WATCHDOG};

    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
    h_actor_post(b, h_op_try_lock, &bt);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 2000);
    /* Another client forces X open; B (same client as A) takes it. */
    H_ASSERT_RC(rlock_force_unlock(ol), 1);
    H_ASSERT_RC((int)h_actor_wait(b, 5000), RLOCK_OK);

    /* Before: one hold entry per name, A's entry became B's; A never told. */
    H_WAIT_FOR(lost_calls(&ev) >= 1, WD + 1000);
    h_sleep_ms(2 * WD / 3); /* two more renewal rounds: still once */
    assert_int_equal(lost_calls(&ev), 1);
    assert_int_equal(lost_events(&ev, name), 1);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ENOTOWNER);

    /* B's hold: there, renewed past the watchdog timeout, untouched by A. */
    h_sleep_ms(WD + WD / 2);
    assert_true(h_lock_fields(r, name, strlen(name), &b_field, &count) == 1);
    assert_int_equal(count, 1);
    free(b_field);
    assert_true(h_pttl(r, name, strlen(name)) > 0);
    H_ASSERT_RC((int)h_actor_call(b, h_op_is_held, l), 1);
    H_ASSERT_RC((int)h_actor_call(b, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(lost_calls(&ev), 1);

    h_actor_stop(a);
    h_actor_stop(b);
    rlock_free(l);
    rlock_free(ol);
    rlock_client_close(c);
    rlock_client_close(other);
    redisFree(r);
}

/* ---- class 2: reentrant acquire after a loss -------------------------- */

static void test_reentrant_lock_after_loss(void **state)
{
    struct events ev;
    const char *name = h_unique_name("reenter-lost");
    redisContext *r = h_redis();
    rlock_client *c;
    rlock *l;
    (void)state;

    events_init(&ev);
    c = open_recording(NULL, &ev);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    h_cmd_ok(r, "DEL %s", name);

    /* Before: re-created at count 1 while the caller believed 3. */
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_ELOST);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_WAIT_FOR(lost_events(&ev, name) == 1, 2000);
    assert_int_equal(lost_calls(&ev), 1);

    /* The next call starts afresh. */
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(lost_calls(&ev), 1);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

static void test_unlock_after_loss(void **state)
{
    struct events ev;
    const char *name = h_unique_name("unlock-lost");
    redisContext *r = h_redis();
    rlock_client *c;
    rlock *l;
    (void)state;

    events_init(&ev);
    c = open_recording(NULL, &ev);
    l = h_get(c, name);
    /* Two levels deep: the unlock would leave it believing it still held. */
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    h_cmd_ok(r, "DEL %s", name);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ELOST); /* before: RLOCK_ENOTOWNER, nothing reported */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    H_WAIT_FOR(lost_events(&ev, name) == 1, 2000);

    /* One level: the last unlock finds nothing held (reported once). */
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    h_cmd_ok(r, "DEL %s", name);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    H_WAIT_FOR(lost_events(&ev, name) == 2, 2000);
    assert_int_equal(lost_calls(&ev), 2);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

static void test_reentrant_lock_after_reported_loss(void **state)
{
    struct events ev;
    const char *name = h_unique_name("reenter-reported");
    redisContext *r = h_redis();
    rlock_client *c;
    rlock *l;
    (void)state;

    events_init(&ev);
    c = open_recording(NULL, &ev);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_cmd_ok(r, "DEL %s", name);
    H_WAIT_FOR(lost_calls(&ev) == 1, WD + 1000); /* the watchdog found it */
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    /* Reported already, yet the re-acquire must not pretend continuity. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_ELOST);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(lost_calls(&ev), 1);
    assert_int_equal(lost_events(&ev, name), 1);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/* ---- class 3: an unlock that errs has not released -------------------- */

static void test_acl_refused_unlock_keeps_lock(void **state)
{
    struct events ev;
    const char *name = h_unique_name("acl-release");
    const char *user = unique_user("nochan");
    redisContext *r = h_redis();
    rlock_client *c;
    rlock *l;
    rlock_error_info info;
    (void)state;

    /* Every key and command, no channel. */
    h_cmd_ok(r, "ACL SETUSER %s on >pw ~* resetchannels +@all", user);
    events_init(&ev);
    c = open_recording(url_as(user, "pw"), &ev);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);

    /* Before: RELEASE deleted the key, then PUBLISH failed: RLOCK_EREDIS, lock gone. */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOPERM);
    rlock_last_error_info(&info);
    assert_int_equal(info.status, RLOCK_ENOPERM);
    assert_non_null(strstr(info.redis_error, "NOPERM"));
    printf("      unlock refused: %s\n", info.message);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ENOPERM);
    h_sleep_ms(2 * WD); /* still held and renewed, never reported lost */
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);
    assert_int_equal(lost_calls(&ev), 0);

    rlock_free(l);
    rlock_client_close(c);
    h_cmd_ok(r, "DEL %s", name);
    h_cmd_ok(r, "ACL DELUSER %s", user);
    redisFree(r);
}

/*
 * The least-privilege ACL of docs/failure-modes.md is enough: lock, wait on
 * the channel, unlock, force_unlock, with key access to the lock names only
 * (the channel is a script argument, not a key).
 */
static void test_least_privilege_acl(void **state)
{
    const char *user = unique_user("locker");
    char name[128];
    redisContext *r = h_redis();
    rlock_client *a, *b;
    rlock *la, *lb;
    h_actor *waiter = h_actor_start();
    struct h_try t;
    (void)state;

    h_cmd_ok(r, "ACL SETUSER %s on >secret ~locks:* &redisson_lock__channel:* +evalsha +eval "
                "+script|load +hget +hexists +hlen +pttl +select +ping +subscribe +unsubscribe "
                "+publish +hincrby +hset +pexpire +del +exists +type +hkeys", user);
    snprintf(name, sizeof name, "locks:%s", user);
    a = h_open_url(url_as(user, "secret"), 0, 0);
    b = h_open_url(url_as(user, "secret"), 0, 0);
    la = h_get(a, name);
    lb = h_get(b, name);
    t = (struct h_try){lb, H_MS(5000), 10000};
    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    h_actor_post(waiter, h_op_try_lock, &t);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 2000);
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_force_unlock(la), 1);
    H_ASSERT_RC(rlock_is_locked(la), 0);

    h_actor_stop(waiter);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
    h_cmd_ok(r, "ACL DELUSER %s", user);
    redisFree(r);
}

/* ---- class 4: somebody's data is not a lock --------------------------- */

static void check_untouched(redisContext *r, const char *name, long long ttl_before)
{
    char *v = h_cmd_str(r, "HGET %s name", name);
    assert_string_equal(v, "bob");
    free(v);
    assert_int_equal(h_cmd_int(r, "HLEN %s", name), 1);
    if (ttl_before < 0)
        assert_int_equal(h_pttl(r, name, strlen(name)), -1);
    else
        assert_true(h_pttl(r, name, strlen(name)) > 0);
}

static void test_not_a_lock(void **state)
{
    const char *name = h_unique_name("user");
    redisContext *r = h_redis();
    rlock_client *c = h_open(30000, 0);
    rlock *l = h_get(c, name);
    long long t0;
    (void)state;

    /* Before: BUSY for ever, lock() blocked, force_unlock deleted the data. */
    h_cmd_ok(r, "HSET %s name bob", name);
    H_ASSERT_RC(rlock_try_lock(l, 0, 10000), RLOCK_ENOTLOCK);
    t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(l, H_MS(2000), 10000), RLOCK_ENOTLOCK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_ENOTLOCK);
    H_ASSERT_BETWEEN(h_now_ms() - t0, 0, H_MS(500));
    assert_non_null(strstr(rlock_last_error(), "NOTALOCK"));
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTLOCK);
    H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ENOTLOCK);
    check_untouched(r, name, -1);

    /* With a TTL but a field that is not "<owner>:<thread>". */
    h_cmd_ok(r, "PEXPIRE %s 60000", name);
    H_ASSERT_RC(rlock_try_lock(l, 0, 10000), RLOCK_ENOTLOCK);
    H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ENOTLOCK);
    check_untouched(r, name, 60000);

    /* A Redisson-shaped lock of someone else is a lock. */
    h_cmd_ok(r, "DEL %s", name);
    h_cmd_ok(r, "HSET %s 0b8f3c1e-5a4d-4c1b-9f7e-2d6a8b9c0e1f:57 1", name);
    h_cmd_ok(r, "PEXPIRE %s 10000", name);
    H_ASSERT_RC(rlock_try_lock(l, 0, 10000), RLOCK_BUSY);
    H_ASSERT_RC(rlock_force_unlock(l), 1);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/* ---- class 14: config ranges ------------------------------------------ */

enum { F_WD, F_CONNECT, F_COMMAND, F_POOL, F_RETRIES, F_INTERVAL, F_HANDOFFS };

static int open_with(int field, long long v)
{
    rlock_config cfg;
    rlock_client *c = NULL;
    h_config(&cfg);
    switch (field) {
    case F_WD: cfg.watchdog_timeout_ms = v; break;
    case F_CONNECT: cfg.connect_timeout_ms = (int)v; break;
    case F_COMMAND: cfg.command_timeout_ms = (int)v; break;
    case F_POOL: cfg.pool_size = (int)v; break;
    case F_RETRIES: cfg.retry_attempts = (int)v; break;
    case F_INTERVAL: cfg.retry_interval_ms = (int)v; break;
    default: cfg.local_handoffs = (int)v; break;
    }
    int rc = rlock_client_open(&cfg, &c);
    rlock_client_close(c);
    return rc;
}

static void test_config_ranges(void **state)
{
    static const struct {
        int field;
        const char *name;
        long long lo, hi;
    } ranges[] = {
        {F_WD, "watchdog_timeout_ms", 30, RLOCK_MAX_LEASE_MS},
        {F_CONNECT, "connect_timeout_ms", 1, 3600000},
        {F_COMMAND, "command_timeout_ms", 1, 3600000},
        {F_POOL, "pool_size", 1, 1024},
        {F_RETRIES, "retry_attempts", 0, 100},
        {F_INTERVAL, "retry_interval_ms", 0, 3600000},
        {F_HANDOFFS, "local_handoffs", 0, 1000},
    };
    (void)state;
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        H_ASSERT_RC(open_with(ranges[i].field, ranges[i].lo), RLOCK_OK);
        H_ASSERT_RC(open_with(ranges[i].field, ranges[i].hi), RLOCK_OK);
        H_ASSERT_RC(open_with(ranges[i].field, ranges[i].lo - 1), RLOCK_EINVAL);
        assert_non_null(strstr(rlock_last_error(), ranges[i].name));
        H_ASSERT_RC(open_with(ranges[i].field, ranges[i].hi + 1), RLOCK_EINVAL);
    }
}

/* ---- errors a person (and a program) can act on ------------------------ */

/* A 127.0.0.1 port nothing listens on. */
static int closed_port(void)
{
    struct sockaddr_in addr = {.sin_family = AF_INET};
    socklen_t len = sizeof addr;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    getsockname(fd, (struct sockaddr *)&addr, &len);
    port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

static int open_url(const char *url, rlock_error_info *info)
{
    rlock_config cfg;
    rlock_client *c = NULL;
    h_config(&cfg);
    cfg.url = url;
    int rc = rlock_client_open(&cfg, &c);
    rlock_last_error_info(info);
    printf("      %-45s -> %s: %s\n", url, rlock_status_name(rc), info->message);
    rlock_client_close(c);
    return rc;
}

static void test_errors_told_apart(void **state)
{
    const char *user = unique_user("errs");
    redisContext *r = h_redis();
    rlock_error_info info;
    char url[256];
    int port = closed_port();
    (void)state;

    h_cmd_ok(r, "ACL SETUSER %s on >right ~* &* +@all -evalsha -eval", user);
    H_ASSERT_RC(open_url(url_as(user, "wrong"), &info), RLOCK_EAUTH);
    assert_int_equal(strncmp(info.redis_error, "WRONGPASS", 9), 0);

    H_ASSERT_RC(open_url("redis://no-such-host.invalid:6379", &info), RLOCK_EIO);
    assert_int_equal(info.host_not_found, 1);
    assert_non_null(strstr(info.message, "no-such-host.invalid"));

    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    H_ASSERT_RC(open_url(url, &info), RLOCK_EIO);
    assert_int_equal(info.sys_errno, ECONNREFUSED);
    assert_int_equal(info.host_not_found, 0);
    snprintf(url, sizeof url, "127.0.0.1:%d", port);
    assert_non_null(strstr(info.message, url));

    /* Allowed in, but not to run scripts: refused by the ACL at the first lock. */
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock *l;
    h_config(&cfg);
    cfg.url = url_as(user, "right");
    H_ASSERT_RC(rlock_client_open(&cfg, &c), RLOCK_OK);
    l = h_get(c, h_unique_name("acl"));
    H_ASSERT_RC(rlock_try_lock(l, 0, 10000), RLOCK_ENOPERM);
    rlock_last_error_info(&info);
    printf("      try_lock as a user without EVALSHA -> %s: %s\n", rlock_status_name(info.status),
           info.message);
    assert_int_equal(strncmp(info.redis_error, "NOPERM", 6), 0);
    rlock_free(l);
    rlock_client_close(c);

    /* Bad arguments say which. */
    H_ASSERT_RC(rlock_unlock(NULL), RLOCK_EINVAL);
    rlock_last_error_info(&info);
    assert_int_equal(info.status, RLOCK_EINVAL);
    assert_true(strlen(info.message) > 0);

    h_cmd_ok(r, "ACL DELUSER %s", user);
    redisFree(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_owners_one_client),
        cmocka_unit_test(test_reentrant_lock_after_loss),
        cmocka_unit_test(test_unlock_after_loss),
        cmocka_unit_test(test_reentrant_lock_after_reported_loss),
        cmocka_unit_test(test_acl_refused_unlock_keeps_lock),
        cmocka_unit_test(test_least_privilege_acl),
        cmocka_unit_test(test_not_a_lock),
        cmocka_unit_test(test_config_ranges),
        cmocka_unit_test(test_errors_told_apart),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
