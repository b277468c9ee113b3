/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_observe.c - seeing a client from Redis and from its log (issue 14):
 * every connection it opens carries its name in CLIENT LIST; the
 * registration hash exists with its fields and TTL, is rewritten past its
 * TTL and disappears at close, and register_client = 0 writes nothing; an
 * ACL user that may not name connections or write rlock:client:* still
 * locks, with one log line for each refusal; the log callback filters by
 * level, runs on the event thread, and tells reconnects (connections
 * killed with CLIENT KILL), resubscriptions, renewal failures and losses
 * in one escaped line each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "net/net.h" /* rlock__url_redacted */

#define WD H_MS(1000)

/* ---- helpers ------------------------------------------------------------------ */

/* The wall clock in ms (the registration's started_ms is one). */
static long long wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *registration_key(rlock_client *c) {
    static char key[128];
    snprintf(key, sizeof key, "rlock:client:%s", rlock_client_id(c));
    return key;
}

/* HGET of the registration (malloc'd); NULL if absent. */
static char *field(redisContext *r, rlock_client *c, const char *name) {
    return h_cmd_str(r, "HGET %s %s", registration_key(c), name);
}

static void assert_field(redisContext *r, rlock_client *c, const char *name, const char *want) {
    char *got = field(r, c, name);
    if (got == NULL || strcmp(got, want) != 0)
        fail_msg("registration field %s = %s, expected %s", name, got ? got : "(none)", want);
    free(got);
}

/* A client with its log recorded at level (and watchdog WD unless wd > 0). */
static rlock_client *open_logged(const char *url, struct h_loglines *log, int level,
                                 long long wd, int command_timeout_ms) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = wd > 0 ? wd : WD;
    if (command_timeout_ms > 0)
        cfg.command_timeout_ms = command_timeout_ms;
    cfg.log = h_loglines_cb;
    cfg.log_arg = log;
    cfg.log_level = level;
    return h_open_config(&cfg);
}

/* Every line: "rlock <id8> <WORD>...", printable, and delivered on the event thread. */
static void assert_lines_well_formed(struct h_loglines *log, rlock_client *c) {
    char head[16];
    snprintf(head, sizeof head, "rlock %.8s ", rlock_client_id(c));
    for (int i = 0; i < h_loglines_n(log); i++) {
        struct h_logline l = h_loglines_get(log, i);
        if (strncmp(l.text, head, strlen(head)) != 0 || !l.on_event_thread ||
            l.level < RLOCK_LOG_ERROR || l.level > RLOCK_LOG_DEBUG) {
            h_loglines_dump(log);
            fail_msg("log line %d is not well formed: %s", i, l.text);
        }
        for (const char *p = l.text; *p != '\0'; p++)
            if ((unsigned char)*p < 0x20)
                fail_msg("log line %d holds a control character: %s", i, l.text);
    }
}

/* ---- connection names ------------------------------------------------------------- */

/* Every connection a client opens -- pooled, subscriber -- is named; none is left unnamed. */
static void test_connection_names(void **state) {
    redisContext *r = h_redis();
    const char *name = h_unique_name("names");
    (void)state;
    int unnamed_before = h_client_list(r, "-").unnamed;
    rlock_client *holder = h_open(WD, 0), *c = h_open(WD, 0);
    rlock *lh = h_get(holder, name), *lc = h_get(c, name), *other = h_get(c, h_unique_name("n2"));
    h_actor *waiter = h_actor_start(), *second = h_actor_start();
    struct h_try t = {lc, H_MS(10000), 10000};

    H_ASSERT_RC(rlock_lock(lh), RLOCK_OK);
    h_actor_post(waiter, h_op_try_lock, &t); /* c subscribes: its subscriber connection */
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 5000);
    h_cmd_ok(r, "CLIENT PAUSE %lld WRITE", H_MS(300));
    h_actor_post(second, h_op_lock, other); /* a second pooled connection while one is busy */
    H_ASSERT_RC(rlock_lock(lh), RLOCK_OK);  /* re-entry, paused with it */
    H_ASSERT_RC((int)h_actor_wait(second, 5000), RLOCK_OK);
    h_conns n = h_client_list(r, rlock_client_id(c));
    printf("      client %.8s: %d named connections (%d subscribed), unnamed %d -> %d\n",
           rlock_client_id(c), n.named, n.named_sub, unnamed_before, n.unnamed);
    assert_true(n.named >= 2);
    assert_int_equal(n.named_sub, 1);
    assert_int_equal(n.unnamed, unnamed_before); /* nothing of ours is unnamed */
    assert_true(h_client_list(r, rlock_client_id(holder)).named >= 1);

    H_ASSERT_RC(rlock_unlock(lh), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(lh), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 10000), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, lc), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(second, h_op_unlock, other), RLOCK_OK);
    h_actor_stop(waiter);
    h_actor_stop(second);
    rlock_free(lh);
    rlock_free(lc);
    rlock_free(other);
    char id[40];
    snprintf(id, sizeof id, "%s", rlock_client_id(c)); /* c is freed at close */
    rlock_client_close(holder);
    rlock_client_close(c);
    /* close closed them all; the server notices a closed socket in its own time */
    H_WAIT_FOR(h_client_list(r, id).named == 0, 2000);
    redisFree(r);
}

/* ---- registration ------------------------------------------------------------------ */

/* The hash: its fields, its TTL, rewritten past its TTL, gone at close. */
static void test_registration(void **state) {
    redisContext *r = h_redis();
    char pid[32], wd[32], host[256];
    long long wall0 = wall_ms();
    (void)state;
    rlock_client *c = h_open(WD, 0);
    const char *key = registration_key(c);
    long long ttl = WD > 1000 ? WD : 1000;

    snprintf(pid, sizeof pid, "%d", (int)getpid());
    snprintf(wd, sizeof wd, "%lld", (long long)WD);
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
    assert_int_equal(h_cmd_int(r, "HLEN %s", key), 8);
    assert_field(r, c, "id", rlock_client_id(c));
    assert_field(r, c, "host", host);
    assert_field(r, c, "pid", pid);
    assert_field(r, c, "program", program_invocation_short_name);
    assert_field(r, c, "version", rlock_version());
    assert_field(r, c, "url", h_url());
    assert_field(r, c, "watchdog_timeout_ms", wd);
    char *started = field(r, c, "started_ms");
    assert_non_null(started);
    H_ASSERT_BETWEEN(atoll(started), wall0 - 1000, wall_ms() + 1000);
    H_ASSERT_BETWEEN(h_pttl(r, key, strlen(key)), 1, ttl);

    /* Past two TTLs: still there (the watchdog rewrites it every third of one). */
    long long until = h_now_ms() + 2 * ttl + ttl / 2;
    while (h_now_ms() < until) {
        if (h_pttl(r, key, strlen(key)) <= 0)
            fail_msg("the registration expired: it was not rewritten");
        h_sleep_ms(50);
    }
    char *started_again = field(r, c, "started_ms");
    assert_string_equal(started_again, started); /* the same client, rewritten */
    assert_int_equal(h_stats(c).registration_failures, 0);
    rlock_client_close(c);
    assert_int_equal(h_exists(r, key, strlen(key)), 0);
    free(started);
    free(started_again);
    redisFree(r);
}

/* register_client = 0: no hash, now or after the watchdog's rounds. */
static void test_registration_off(void **state) {
    redisContext *r = h_redis();
    rlock_config cfg;
    (void)state;
    h_config(&cfg);
    cfg.watchdog_timeout_ms = H_MS(300);
    cfg.register_client = 0;
    rlock_client *c = h_open_config(&cfg);
    rlock *l = h_get(c, h_unique_name("unregistered"));
    const char *key = registration_key(c);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, key, strlen(key)), 0);
    H_WAIT_FOR(h_stats(c).renewals >= 3, 3000); /* the watchdog ran, and wrote only renewals */
    assert_int_equal(h_exists(r, key, strlen(key)), 0);
    assert_true(h_client_list(r, rlock_client_id(c)).named >= 1); /* still named */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * A forked child that closes the client it inherited deletes nothing: the
 * registration is the parent's, which keeps it and deletes it at its close.
 */
static void test_registration_fork(void **state) {
    redisContext *r = h_redis();
    (void)state;
    rlock_client *c = h_open(WD, 0);
    const char *key = registration_key(c);
    assert_int_equal(h_cmd_int(r, "HLEN %s", key), 8);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        rlock_client_close(c);
        h_child_exit(0);
    }
    assert_int_equal(h_child_code(h_wait_child(pid, 20000)), 0);
    assert_int_equal(h_cmd_int(r, "HLEN %s", key), 8);
    char pid_text[24];
    snprintf(pid_text, sizeof pid_text, "%d", (int)getpid());
    assert_field(r, c, "pid", pid_text);
    char saved[128];
    snprintf(saved, sizeof saved, "%s", key);
    rlock_client_close(c);
    assert_int_equal(h_exists(r, saved, strlen(saved)), 0);
    redisFree(r);
}

/*
 * A user that may HSET the registration but not PEXPIRE it: the hash is
 * deleted again after each write (never left without a TTL), and the
 * refusal is counted and logged once, naming PEXPIRE.
 */
static void test_registration_without_ttl_refused(void **state) {
    redisContext *r = h_redis();
    const char *user = "obsnottl";
    char url[256];
    struct h_loglines log;
    (void)state;
    h_loglines_init(&log);
    h_cmd_ok(r, "ACL SETUSER %s reset on >secret ~* &* +@all -pexpire", user);
    rlock_client *c =
        open_logged(h_url_auth(url, sizeof url, h_url(), user, "secret"), &log, RLOCK_LOG_WARN,
                    H_MS(1000), 0);
    const char *key = registration_key(c);
    H_WAIT_FOR(h_stats(c).registration_failures >= 2, H_MS(3000)); /* rewritten, refused again */
    assert_int_equal(h_exists(r, key, strlen(key)), 0);
    assert_int_equal(h_loglines_count(&log, "REGISTER_FAILED"), 1);
    assert_non_null(strstr(h_loglines_find(&log, "REGISTER_FAILED").text, "PEXPIRE"));
    rlock_client_close(c);
    h_cmd_ok(r, "ACL DELUSER %s", user);
    h_loglines_destroy(&log);
    redisFree(r);
}

/* The url the hash shows has no credentials. */
static void test_url_without_credentials(void **state) {
    static const struct {
        const char *url, *shown;
    } cases[] = {
        {"redis://127.0.0.1:6379", "redis://127.0.0.1:6379"},
        {"redis://alice:s3cret@db.example:6380/2", "redis://db.example:6380/2"},
        {"redis://:p%40ss@[::1]:6379", "redis://[::1]:6379"},
        {"unix:///run/redis.sock?db=3", "unix:///run/redis.sock?db=3"},
        {"redis-sentinel://u:pw@s1:26379,s2/mymaster?db=1&sentinel_user=su&sentinel_password=sp",
         "redis-sentinel://s1:26379,s2/mymaster?db=1"},
        {"redis-sentinel://s1/m?sentinel_password=sp&db=2", "redis-sentinel://s1/m?db=2"},
        {"redis-cluster://u:p@a:7000,b:7001", "redis-cluster://a:7000,b:7001"},
    };
    char buf[256];
    const char *user = "obsuser";
    redisContext *r = h_redis();
    char url[256];
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_string_equal(rlock__url_redacted(cases[i].url, buf, sizeof buf), cases[i].shown);
    /* And the hash of a client that logged in with a password. */
    h_cmd_ok(r, "ACL SETUSER %s on >obs-secret ~* &* +@all", user);
    rlock_client *c = h_open_url(h_url_auth(url, sizeof url, h_url(), user, "obs-secret"), WD, 0);
    assert_field(r, c, "url", h_url());
    rlock_client_close(c);
    h_cmd_ok(r, "ACL DELUSER %s", user);
    redisFree(r);
}

/* ---- ACL refusals -------------------------------------------------------------------- */

/* The least-privilege user of docs/failure-modes.md without the two rules operations.md adds. */
static void set_user(redisContext *r, const char *user) {
    h_cmd_ok(r, "ACL SETUSER %s reset on >secret ~locks:* resetchannels &redisson_lock__channel:* +evalsha "
                "+eval +script|load +hget +hexists +hlen +pttl +select +ping +subscribe "
                "+unsubscribe +publish +hincrby +hset +pexpire +del +exists +type +hkeys",
             user);
}

/*
 * A user without CLIENT SETNAME nor the key rlock:client:*: locks, waits and
 * unlocks as well; one NAME_REFUSED and one REGISTER_FAILED line for all
 * the refusals; with both granted, named and registered, no such line.
 */
static void test_acl_refusals(void **state) {
    redisContext *r = h_redis();
    const char *user = "obslocker";
    char url[256], name[128];
    struct h_loglines log, log2;
    (void)state;
    h_loglines_init(&log);
    h_loglines_init(&log2);
    snprintf(name, sizeof name, "locks:%s:%d", user, (int)getpid());
    h_url_auth(url, sizeof url, h_url(), user, "secret");

    set_user(r, user);
    rlock_client *a = open_logged(url, &log, RLOCK_LOG_WARN, 0, 0);
    rlock_client *b = h_open_url(url, WD, 0);
    rlock *la = h_get(a, name), *lb = h_get(b, name);
    h_actor *waiter = h_actor_start();
    struct h_try t = {la, H_MS(10000), 10000};
    H_ASSERT_RC(rlock_lock(lb), RLOCK_OK);
    h_actor_post(waiter, h_op_try_lock, &t); /* a's subscriber connects: refused again */
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 5000);
    H_ASSERT_RC(rlock_unlock(lb), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 10000), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, la), RLOCK_OK);
    H_WAIT_FOR(h_stats(a).registration_failures >= 2, 3 * WD); /* the watchdog tried again */
    rlock_stats st = h_stats(a);
    printf("      refused: %llu names, %llu registration writes\n", st.name_refusals,
           st.registration_failures);
    assert_true(st.name_refusals >= 2);
    assert_int_equal(h_client_list(r, rlock_client_id(a)).named, 0);
    assert_int_equal(h_exists(r, registration_key(a), strlen(registration_key(a))), 0);
    assert_int_equal(h_loglines_count(&log, "NAME_REFUSED"), 1);
    assert_int_equal(h_loglines_count(&log, "REGISTER_FAILED"), 1);
    assert_non_null(strstr(h_loglines_find(&log, "NAME_REFUSED").text, "NOPERM"));
    assert_non_null(strstr(h_loglines_find(&log, "REGISTER_FAILED").text, "RLOCK_ENOPERM"));
    assert_lines_well_formed(&log, a);
    h_actor_stop(waiter);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);

    /* The same user with the two rules operations.md adds: named and registered. */
    h_cmd_ok(r, "ACL SETUSER %s ~rlock:client:* +client|setname", user);
    a = open_logged(url, &log2, RLOCK_LOG_WARN, 0, 0);
    la = h_get(a, name);
    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    assert_true(h_client_list(r, rlock_client_id(a)).named >= 1);
    assert_field(r, a, "id", rlock_client_id(a));
    st = h_stats(a);
    assert_int_equal(st.name_refusals, 0);
    assert_int_equal(st.registration_failures, 0);
    assert_int_equal(h_loglines_n(&log2), 0); /* nothing worth a warning happened */
    rlock_free(la);
    const char *key = registration_key(a); /* static storage: a is freed at close */
    rlock_client_close(a);
    assert_int_equal(h_exists(r, key, strlen(key)), 0);

    h_cmd_ok(r, "ACL DELUSER %s", user);
    h_loglines_destroy(&log);
    h_loglines_destroy(&log2);
    redisFree(r);
}

/* ---- the log ---------------------------------------------------------------------------- */

/* Levels filter; open, connections and close are told at INFO and DEBUG only. */
static void test_log_levels(void **state) {
    struct h_loglines quiet, debug;
    (void)state;
    h_loglines_init(&quiet);
    h_loglines_init(&debug);
    rlock_client *q = open_logged(h_url(), &quiet, RLOCK_LOG_WARN, 0, 0);
    rlock_client *d = open_logged(h_url(), &debug, RLOCK_LOG_DEBUG, 0, 0);
    rlock *lq = h_get(q, h_unique_name("quiet")), *ld = h_get(d, h_unique_name("debug"));
    char id[40];
    snprintf(id, sizeof id, "%s", rlock_client_id(d)); /* d is freed at close */
    H_ASSERT_RC(rlock_lock(lq), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(lq), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(ld), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(ld), RLOCK_OK);
    rlock_free(lq);
    rlock_free(ld);
    rlock_client_close(q);
    rlock_client_close(d);
    assert_int_equal(h_loglines_n(&quiet), 0);
    struct h_logline open = h_loglines_find(&debug, "CLIENT_OPEN");
    assert_int_equal(open.level, RLOCK_LOG_INFO);
    assert_non_null(strstr(open.text, id));
    assert_int_equal(h_loglines_find(&debug, "CONNECTED").level, RLOCK_LOG_DEBUG);
    assert_int_equal(h_loglines_find(&debug, "REGISTERED").level, RLOCK_LOG_INFO);
    assert_int_equal(h_loglines_find(&debug, "CLIENT_CLOSE").level, RLOCK_LOG_INFO);
    assert_int_equal(h_loglines_count(&debug, "CLIENT_OPEN"), 1);
    h_loglines_destroy(&quiet);
    h_loglines_destroy(&debug);
}

/*
 * Every connection of a client killed (CLIENT KILL) while a thread waits:
 * CONNECTION_LOST, RECONNECTED and RESUBSCRIBED lines, the counters, and the
 * waiter still gets the lock.
 */
static void test_log_reconnect(void **state) {
    redisContext *r = h_redis();
    struct h_loglines log;
    const char *name = h_unique_name("reconnect");
    (void)state;
    h_loglines_init(&log);
    rlock_client *holder = h_open(WD, 0);
    rlock_client *c = open_logged(h_url(), &log, RLOCK_LOG_INFO, 0, 0);
    rlock *lh = h_get(holder, name), *lc = h_get(c, name);
    h_actor *waiter = h_actor_start();
    struct h_try t = {lc, H_MS(20000), 10000};

    H_ASSERT_RC(rlock_lock(lh), RLOCK_OK);
    h_actor_post(waiter, h_op_try_lock, &t);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 5000);
    assert_true(h_kill_named(r, rlock_client_id(c)) >= 2); /* pool and subscriber */
    H_WAIT_FOR(h_loglines_count(&log, "RESUBSCRIBED") >= 1, 5000);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 5000);
    H_ASSERT_RC(rlock_unlock(lh), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(waiter, 20000), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, lc), RLOCK_OK);
    H_WAIT_FOR(h_loglines_count(&log, "RECONNECTED") >= 1, 5000);

    struct h_logline lost = h_loglines_find(&log, "CONNECTION_LOST");
    assert_int_equal(lost.level, RLOCK_LOG_WARN);
    assert_non_null(strstr(lost.text, "status=RLOCK_EIO"));
    assert_int_equal(h_loglines_find(&log, "RECONNECTED").level, RLOCK_LOG_INFO);
    assert_non_null(strstr(h_loglines_find(&log, "RESUBSCRIBED").text, "channels=1"));
    rlock_stats st = h_stats(c);
    assert_true(st.connection_failures >= 1);
    assert_true(st.reconnects >= 1);
    assert_true(st.resubscriptions >= 1);
    assert_int_equal(st.acquired_after_wait, 1);
    assert_lines_well_formed(&log, c);

    h_actor_stop(waiter);
    rlock_free(lh);
    rlock_free(lc);
    rlock_client_close(holder);
    rlock_client_close(c);
    h_loglines_destroy(&log);
    redisFree(r);
}

/*
 * A renewal Redis cannot answer in time (CLIENT PAUSE WRITE) is a
 * RENEWAL_FAILED line; a lock deleted behind the holder's back a LOCK_LOST
 * line at ERROR; the name is quoted with its control characters escaped.
 */
static void test_log_renewal_failure_and_loss(void **state) {
    redisContext *r = h_redis();
    struct h_loglines log;
    long long wd = H_MS(1500);
    char name[160];
    (void)state;
    snprintf(name, sizeof name, "%s\n\"quoted\"", h_unique_name("lossy"));
    h_loglines_init(&log);
    rlock_client *c = open_logged(h_url(), &log, RLOCK_LOG_WARN, wd, (int)H_MS(150));
    rlock *l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_cmd_ok(r, "CLIENT PAUSE %lld WRITE", wd / 2);
    H_WAIT_FOR(h_loglines_count(&log, "RENEWAL_FAILED") >= 1, 2 * wd);
    struct h_logline failed = h_loglines_find(&log, "RENEWAL_FAILED");
    assert_int_equal(failed.level, RLOCK_LOG_WARN);
    assert_non_null(strstr(failed.text, "lease_left_ms="));
    assert_non_null(strstr(failed.text, "\\x0a\\\"quoted\\\"\""));
    h_sleep_ms(wd / 2); /* the pause is over */
    redisReply *del = redisCommand(r, "DEL %b", name, strlen(name));
    assert_int_equal(del->integer, 1);
    freeReplyObject(del);
    H_WAIT_FOR(h_loglines_count(&log, "LOCK_LOST") == 1, 2 * wd);
    struct h_logline lost = h_loglines_find(&log, "LOCK_LOST");
    assert_int_equal(lost.level, RLOCK_LOG_ERROR);
    assert_non_null(strstr(lost.text, "status=RLOCK_ELOST"));
    assert_non_null(strstr(lost.text, "lock=\""));
    assert_lines_well_formed(&log, c);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
    rlock_client_close(c);
    h_loglines_destroy(&log);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connection_names),
        cmocka_unit_test(test_registration),
        cmocka_unit_test(test_registration_off),
        cmocka_unit_test(test_registration_fork),
        cmocka_unit_test(test_registration_without_ttl_refused),
        cmocka_unit_test(test_url_without_credentials),
        cmocka_unit_test(test_acl_refusals),
        cmocka_unit_test(test_log_levels),
        cmocka_unit_test(test_log_reconnect),
        cmocka_unit_test(test_log_renewal_failure_and_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
