/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel_failover.c - rlock through Redis Sentinel, against real
 * redis-server and redis-sentinel processes of the test's own (a master, two
 * replicas, three sentinels on 127.0.0.1; harness/sentinel.c), with real
 * failovers, kills and pauses:
 *
 *   discovery        the master is found through any live sentinel while the
 *                    others are down; a wrong master name says so
 *   learned          a url naming one sentinel: after it dies, a failover is
 *                    still followed through the peers SENTINEL SENTINELS gave
 *   leader alone     the sentinel leading a failover, the only one reached,
 *                    names the old master under the new epoch until the
 *                    failover ends: the client never goes back to it
 *   password         sentinels with requirepass: sentinel_password opens;
 *                    a wrong or missing one is RLOCK_EAUTH, saying so
 *   waiter           a blocked waiter acquires promptly after the holder
 *                    unlocks across a SENTINEL FAILOVER
 *   survives         a killed master's replicated watchdog lock lives on at
 *                    the new master: renewed there, never reported lost
 *   lost once        a killed master's lock that no replica received is
 *                    reported lost exactly once, and the holder stops
 *                    believing it holds it
 *   zombie           a master paused through its failover and resumed (it
 *                    still says master for seconds) receives no command
 *   scripts          the new master gets the scripts before any command
 *                    (no NOSCRIPT round trip)
 *
 * One set-up per test (about a second to start). Durations are scaled by
 * TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Events a client saw (its on_event; the event thread writes, the test reads). */
typedef struct seen {
    atomic_int switched;
    atomic_int lost;
    atomic_llong switched_ms;
} seen;

static void on_event(const rlock_event *ev, void *arg) {
    seen *s = arg;
    if (ev->kind == RLOCK_EVENT_MASTER_SWITCHED) {
        atomic_store(&s->switched_ms, h_now_ms());
        atomic_fetch_add(&s->switched, 1);
        printf("      MASTER_SWITCHED %s\n", ev->detail);
    } else if (ev->kind == RLOCK_EVENT_LOCK_LOST) {
        atomic_fetch_add(&s->lost, 1);
        printf("      LOCK_LOST %s: %s\n", ev->name, ev->detail);
    }
}

static rlock_client *open_sentinel(const h_sentinels *hs, long long watchdog_ms, seen *s) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = hs->url;
    cfg.watchdog_timeout_ms = watchdog_ms;
    cfg.retry_attempts = 20;
    cfg.retry_interval_ms = 250;
    cfg.on_event = on_event;
    cfg.callback_arg = s;
    return h_open_config(&cfg);
}

/* Whether data server d has the lock key. */
static int has_key(const h_server *d, const char *name) {
    redisContext *c = h_server_redis(d);
    int yes = h_exists(c, name, strlen(name));
    redisFree(c);
    return yes;
}

/* Waits until both replicas have everything the master has (WAIT 2). */
static void replicated(const h_server *master) {
    redisContext *c = h_server_redis(master);
    assert_int_equal(h_cmd_int(c, "WAIT 2 %d", 2000), 2);
    redisFree(c);
}

static void test_discovery(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    rlock_error_info info;
    char bad[300];
    /* The first two sentinels of the url are down: the third answers. */
    h_server_kill(hs->sentinel[0]);
    h_server_kill(hs->sentinel[1]);
    long long t0 = h_now_ms();
    rlock_client *c = open_sentinel(hs, H_MS(3000), &s);
    printf("      opened through the third sentinel in %lld ms\n", h_now_ms() - t0);
    const char *name = h_unique_name("sentinel-discovery");
    rlock *lock = h_get(c, name);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    assert_true(has_key(hs->data[0], name)); /* on the master, not a replica */
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    rlock_free(lock);
    rlock_client_close(c);
    /* A name the sentinels do not monitor: refused at open, with the story. */
    snprintf(bad, sizeof bad, "%s", hs->url);
    strcpy(strrchr(bad, '/') + 1, "no-such-master");
    int rc = h_open_status(bad, H_MS(2000), &info);
    assert_int_not_equal(rc, RLOCK_OK);
    assert_non_null(strstr(info.message, "no-such-master"));
}

static void test_learned_sentinels(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    rlock_config cfg;
    char one[128];
    /* The url names one sentinel; the client learns the other two from it. */
    snprintf(one, sizeof one, "redis-sentinel://127.0.0.1:%d/%s", h_server_port(hs->sentinel[0]),
             H_SENTINEL_MASTER_NAME);
    h_config(&cfg);
    cfg.url = one;
    cfg.on_event = on_event;
    cfg.callback_arg = &s;
    rlock_client *c = h_open_config(&cfg);
    const char *name = h_unique_name("sentinel-learned");
    rlock *lock = h_get(c, name);
    h_server_kill(hs->sentinel[0]);
    h_server *now = h_sentinels_failover(hs); /* through a sentinel the url did not name */
    H_WAIT_FOR(atomic_load(&s.switched) >= 1, 10000);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    assert_true(has_key(now, name));
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    rlock_free(lock);
    rlock_client_close(c);
}

/* Whether sentinel i names the master, out of any failover (SENTINEL MASTER's flags). */
static int settled(const h_sentinels *hs, int i) {
    redisContext *c = h_server_redis(hs->sentinel[i]);
    redisReply *r = h_cmd(c, "SENTINEL MASTER %s", H_SENTINEL_MASTER_NAME);
    int yes = 0;
    for (size_t k = 0; r->type == REDIS_REPLY_ARRAY && k + 1 < r->elements; k += 2)
        if (strcmp(r->element[k]->str, "flags") == 0)
            yes = strstr(r->element[k + 1]->str, "failover_in_progress") == NULL;
    freeReplyObject(r);
    redisFree(c);
    return yes;
}

/*
 * The only sentinel the client reaches leads the failover. From the
 * promotion to the end of the failover its SENTINEL MASTER pairs the new
 * config epoch with the old master's address, and the old master still says
 * ROLE master: a client taking that pair goes back to the old master and
 * loses the lock it renewed on the new one.
 */
static void test_leader_alone(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    long long wd = H_MS(3000);
    rlock_client *c = open_sentinel(hs, wd, &s);
    const char *name = h_unique_name("sentinel-leader-alone");
    rlock *lock = h_get(c, name);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    replicated(hs->data[0]);
    h_server_kill(hs->sentinel[1]);
    h_server_kill(hs->sentinel[2]);
    h_server *now = h_sentinels_failover(hs); /* led by sentinel 0, the one left */
    H_WAIT_FOR(settled(hs, 0), 15000);
    h_sleep_ms(wd); /* polls and renewals after the failover ended */
    printf("      switches seen: %d, LOCK_LOST x%d\n", atomic_load(&s.switched),
           atomic_load(&s.lost));
    assert_int_equal(atomic_load(&s.switched), 1); /* to the new master, never back */
    assert_int_equal(atomic_load(&s.lost), 0);
    assert_true(has_key(now, name));
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    rlock_free(lock);
    rlock_client_close(c);
}

static void test_sentinel_password(void **state) {
    (void)state;
    h_sentinels *hs = h_sentinels_start_password("s3nt1nel");
    seen s = {0};
    rlock_error_info info;
    char wrong[300];
    rlock_client *c = open_sentinel(hs, H_MS(3000), &s); /* url with the right password */
    rlock *lock = h_get(c, h_unique_name("sentinel-password"));
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    rlock_free(lock);
    rlock_client_close(c);
    snprintf(wrong, sizeof wrong, "%s", hs->url);
    strcpy(strstr(wrong, "sentinel_password=") + 18, "wrong");
    assert_int_equal(h_open_status(wrong, H_MS(2000), &info), RLOCK_EAUTH);
    assert_non_null(strstr(info.message, "WRONGPASS"));
    *strchr(wrong, '?') = '\0'; /* no password at all */
    assert_int_equal(h_open_status(wrong, H_MS(2000), &info), RLOCK_EAUTH);
    h_sentinels_stop(hs);
}

/* A thread blocked in rlock_lock; records when it returned. */
typedef struct blocked {
    rlock *lock;
    int rc, unlock_rc;
    atomic_llong done_ms;
} blocked;

/* Waits for the lock, then unlocks it (ownership is per thread). */
static void *lock_main(void *arg) {
    blocked *b = arg;
    b->rc = rlock_try_lock(b->lock, H_MS(30000), RLOCK_LEASE_WATCHDOG);
    atomic_store(&b->done_ms, h_now_ms());
    if (b->rc == RLOCK_OK)
        b->unlock_rc = rlock_unlock(b->lock);
    return NULL;
}

static void test_waiter_across_failover(void **state) {
    h_sentinels *hs = *state;
    seen sa = {0}, sb = {0};
    pthread_t th;
    rlock_client *a = open_sentinel(hs, H_MS(3000), &sa);
    rlock_client *b = open_sentinel(hs, H_MS(3000), &sb);
    const char *name = h_unique_name("sentinel-waiter");
    rlock *la = h_get(a, name), *lb = h_get(b, name);
    blocked w = {.lock = lb};
    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    assert_int_equal(pthread_create(&th, NULL, lock_main, &w), 0);
    h_sleep_ms(200);
    h_server *before = h_sentinels_named_master(hs, 0);
    h_server *after = h_sentinels_failover(hs);
    assert_ptr_not_equal(before, after);
    H_WAIT_FOR(atomic_load(&sa.switched) >= 1 && atomic_load(&sb.switched) >= 1, 10000);
    assert_int_equal(atomic_load(&w.done_ms), 0); /* still waiting: the holder holds */
    long long t_unlock = h_now_ms();
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    H_WAIT_FOR(atomic_load(&w.done_ms) != 0, 10000);
    pthread_join(th, NULL);
    long long took = atomic_load(&w.done_ms) - t_unlock;
    printf("      waiter acquired %lld ms after the unlock on the new master\n", took);
    H_ASSERT_RC(w.rc, RLOCK_OK);
    assert_true(took < H_MS(1000)); /* woken by the unlock, not by the 3 s TTL */
    assert_int_equal(atomic_load(&sa.switched), 1); /* never back to the old master */
    assert_int_equal(atomic_load(&sb.switched), 1);
    H_ASSERT_RC(w.unlock_rc, RLOCK_OK);
    assert_int_equal(atomic_load(&sa.lost) + atomic_load(&sb.lost), 0);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
}

static void test_killed_master_lock_survives(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    /* Longer than the failover: down-after 1 s, a promotion, sentinels told. */
    long long wd = H_MS(10000);
    rlock_client *c = open_sentinel(hs, wd, &s);
    const char *name = h_unique_name("sentinel-survives");
    rlock *lock = h_get(c, name);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    replicated(hs->data[0]);
    h_server_kill(hs->data[0]);
    H_WAIT_FOR(atomic_load(&s.switched) >= 1, 15000);
    /* Renewed there (at the switch, then every third of the timeout), never reported lost. */
    h_sleep_ms(wd);
    /* The master is the one the sentinels name: after a kill, a first promotion can be
     * given up and a second replica promoted under a newer epoch (the client follows:
     * two switches), while the first still says ROLE master for a while. */
    h_server *now = NULL;
    H_WAIT_FOR((now = h_sentinels_named_master(hs, 0)) != NULL && now != hs->data[0], 15000);
    printf("      switches seen: %d\n", atomic_load(&s.switched));
    redisContext *r = h_server_redis(now);
    long long pttl = h_pttl(r, name, strlen(name));
    redisFree(r);
    printf("      lock on the new master, PTTL %lld of %lld ms, LOCK_LOST x%d\n", pttl, wd,
           atomic_load(&s.lost));
    assert_true(pttl > wd / 2);
    assert_int_equal(atomic_load(&s.lost), 0);
    assert_int_equal(rlock_is_held_by_current_thread(lock), 1);
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    rlock_free(lock);
    rlock_client_close(c);
}

static void test_killed_master_lock_lost_once(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    /* Longer than the failover: the loss is found on the new master, not by the clock. */
    long long wd = H_MS(10000);
    rlock_client *c = open_sentinel(hs, wd, &s);
    const char *name = h_unique_name("sentinel-lost");
    rlock *lock = h_get(c, name);
    /* Keep both replicas from receiving the lock (topology.md, lost-lock recipe). */
    h_replica_cut(hs->data[1]);
    h_replica_cut(hs->data[2]);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    h_server_kill(hs->data[0]);
    H_WAIT_FOR(atomic_load(&s.switched) >= 1, 15000);
    long long t_switch = atomic_load(&s.switched_ms);
    H_WAIT_FOR(atomic_load(&s.lost) >= 1, 2 * wd);
    long long after_switch = h_now_ms() - t_switch;
    printf("      reported lost %lld ms after the switch\n", after_switch);
    assert_true(after_switch < H_MS(1000)); /* the renewal at the switch found it gone */
    h_sleep_ms(wd / 2); /* and never again */
    assert_int_equal(atomic_load(&s.lost), 1);
    assert_int_equal(rlock_is_held_by_current_thread(lock), 0);
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK); /* starts afresh on the new master */
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    rlock_free(lock);
    rlock_client_close(c);
}

static long long evalsha_calls(const h_server *d) {
    redisContext *c = h_server_redis(d);
    long long n = h_commandstat_calls(c, "evalsha") + h_commandstat_calls(c, "eval");
    redisFree(c);
    return n;
}

static void test_zombie_never_used(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    rlock_client *c = open_sentinel(hs, H_MS(3000), &s);
    h_server *old = hs->data[0];
    const char *name = h_unique_name("sentinel-zombie");
    rlock *lock = h_get(c, name);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    /* Paused through its failover: it will wake up still saying master. */
    h_server_pause(old);
    H_WAIT_FOR(atomic_load(&s.switched) >= 1, 15000);
    h_server_resume(old);
    redisContext *z = h_server_redis(old);
    redisReply *role = h_cmd(z, "ROLE");
    printf("      the old master says ROLE %s after the resume\n", role->element[0]->str);
    freeReplyObject(role);
    h_cmd_ok(z, "CONFIG RESETSTAT");
    redisFree(z);
    for (int i = 0; i < 50; i++) {
        H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
        H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    }
    long long on_zombie = evalsha_calls(old);
    printf("      50 lock/unlock cycles: %lld scripts ran on the old master\n", on_zombie);
    assert_int_equal(on_zombie, 0);
    assert_int_equal(has_key(old, name), 0);
    rlock_free(lock);
    rlock_client_close(c);
}

static void test_scripts_on_new_master(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    rlock_client *c = open_sentinel(hs, H_MS(3000), &s);
    const char *name = h_unique_name("sentinel-scripts");
    rlock *lock = h_get(c, name);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    h_server *now = h_sentinels_failover(hs);
    H_WAIT_FOR(atomic_load(&s.switched) >= 1, 10000);
    redisContext *r = h_server_redis(now);
    h_cmd_ok(r, "CONFIG RESETSTAT");
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    long long eval = h_commandstat_calls(r, "eval"), evalsha = h_commandstat_calls(r, "evalsha");
    printf("      on the new master: EVALSHA x%lld, EVAL (after NOSCRIPT) x%lld\n", evalsha, eval);
    assert_int_equal(eval, 0);
    assert_true(evalsha >= 2);
    redisFree(r);
    rlock_free(lock);
    rlock_client_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SENTINEL_TEST(test_discovery),
        H_SENTINEL_TEST(test_learned_sentinels),
        H_SENTINEL_TEST(test_leader_alone),
        cmocka_unit_test(test_sentinel_password),
        H_SENTINEL_TEST(test_waiter_across_failover),
        H_SENTINEL_TEST(test_killed_master_lock_survives),
        H_SENTINEL_TEST(test_killed_master_lock_lost_once),
        H_SENTINEL_TEST(test_zombie_never_used),
        H_SENTINEL_TEST(test_scripts_on_new_master),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
