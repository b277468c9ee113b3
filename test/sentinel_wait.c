/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel_wait.c - replica acknowledgement (replica_acks: WAIT after every
 * write), against a real master with two replicas (and its sentinels):
 *
 *   enough           replica_acks 2: every lock is on both replicas by the time
 *                    rlock_lock returns; one WAIT per write, in the same
 *                    round trip
 *   replica stopped  one replica SIGSTOPped, replica_acks 2: RLOCK_ENOREPL
 *                    after replica_ack_timeout_ms and the acquisition rolled
 *                    back; replica_acks 1 still works; an unlock that only the
 *                    master applied is RLOCK_ENOREPL and the hold is gone
 *   min-replicas     min-replicas-to-write above the replicas: RLOCK_ENOREPL,
 *                    nothing written
 *   renewals         a renewal not acknowledged does not extend the lease by
 *                    the client's clock: RENEWAL_FAILED (ENOREPL), then the
 *                    loss told at the lease end; the holds left on the master
 *                    are given back when the thread locks again
 *   min-replicas     (also) an unlock refused with NOREPLICAS changes nothing
 *   sentinel         the same through a redis-sentinel:// url
 *
 * One set-up per test; durations scaled by TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

typedef struct seen {
    atomic_int renewal_failed;
    atomic_int renewal_failed_enorepl;
    atomic_int lost;
    atomic_llong lost_ms;
} seen;

static void on_event(const rlock_event *ev, void *arg) {
    seen *s = arg;
    if (ev->kind == RLOCK_EVENT_RENEWAL_FAILED) {
        atomic_fetch_add(&s->renewal_failed, 1);
        if (ev->status == RLOCK_ENOREPL)
            atomic_fetch_add(&s->renewal_failed_enorepl, 1);
    } else if (ev->kind == RLOCK_EVENT_LOCK_LOST) {
        atomic_store(&s->lost_ms, h_now_ms());
        atomic_fetch_add(&s->lost, 1);
    }
}

static rlock_client *open_acks(const char *url, int acks, int ack_timeout_ms, long long wd,
                               seen *s) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    cfg.replica_acks = acks;
    cfg.replica_ack_timeout_ms = ack_timeout_ms;
    cfg.watchdog_timeout_ms = wd;
    cfg.on_event = on_event;
    cfg.callback_arg = s;
    return h_open_config(&cfg);
}

static int exists_on(const h_server *d, const char *name) {
    redisContext *c = h_server_redis(d);
    int yes = h_exists(c, name, strlen(name));
    redisFree(c);
    return yes;
}

static long long calls_on(const h_server *d, const char *cmd) {
    redisContext *c = h_server_redis(d);
    long long n = h_commandstat_calls(c, cmd);
    redisFree(c);
    return n;
}

static void reset_stats(const h_server *d) {
    redisContext *c = h_server_redis(d);
    h_cmd_ok(c, "CONFIG RESETSTAT");
    redisFree(c);
}

static void test_enough_replicas(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    rlock_client *c = open_acks(h_server_url(hs->data[0]), 2, H_MS(1000), H_MS(30000), &s);
    const char *name = h_unique_name("wait-enough");
    rlock *lock = h_get(c, name);
    reset_stats(hs->data[0]);
    for (int i = 0; i < 20; i++) {
        H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
        /* Acknowledged: both replicas have it now, not "soon". */
        assert_true(exists_on(hs->data[1], name) && exists_on(hs->data[2], name));
        H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    }
    long long waits = calls_on(hs->data[0], "wait"), scripts = calls_on(hs->data[0], "evalsha");
    printf("      20 lock/unlock cycles: %lld scripts, %lld WAITs\n", scripts, waits);
    assert_int_equal(waits, scripts); /* one WAIT behind each write */
    rlock_free(lock);
    rlock_client_close(c);
}

static void test_replica_stopped(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    rlock_error_info info;
    const char *url = h_server_url(hs->data[0]);
    rlock_client *two = open_acks(url, 2, H_MS(300), H_MS(30000), &s);
    rlock_client *one = open_acks(url, 1, H_MS(300), H_MS(30000), &s);
    const char *name = h_unique_name("wait-stopped");
    rlock *l2 = h_get(two, name), *l1 = h_get(one, name);
    h_server_pause(hs->data[2]);
    long long t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(l2, 0, RLOCK_LEASE_WATCHDOG), RLOCK_ENOREPL);
    long long took = h_now_ms() - t0;
    rlock_last_error_info(&info);
    printf("      replica_acks 2, one replica stopped: RLOCK_ENOREPL after %lld ms: %s\n", took,
           info.message);
    assert_true(took >= H_MS(300) - 50 && took < H_MS(3000));
    assert_non_null(strstr(info.message, "1 of 2"));
    assert_int_equal(exists_on(hs->data[0], name), 0); /* rolled back */
    assert_int_equal(rlock_is_held_by_current_thread(l2), 0);
    /* One acknowledgement is enough for the other client. */
    H_ASSERT_RC(rlock_lock(l1), RLOCK_OK);
    assert_true(exists_on(hs->data[1], name));
    /* Both replicas stopped: the unlock applies on the master only. */
    h_server_pause(hs->data[1]);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_ENOREPL);
    assert_int_equal(exists_on(hs->data[0], name), 0);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_ENOTOWNER); /* the thread holds nothing now */
    h_server_resume(hs->data[1]);
    h_server_resume(hs->data[2]);
    rlock_free(l1);
    rlock_free(l2);
    rlock_client_close(one);
    rlock_client_close(two);
}

static void test_min_replicas(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    rlock_error_info info;
    redisContext *m = h_server_redis(hs->data[0]);
    rlock_client *c = open_acks(h_server_url(hs->data[0]), 0, H_MS(1000), H_MS(30000), &s);
    const char *name = h_unique_name("wait-min-replicas");
    rlock *lock = h_get(c, name);
    h_cmd_ok(m, "CONFIG SET min-replicas-to-write 3");
    H_ASSERT_RC(rlock_try_lock(lock, 0, RLOCK_LEASE_WATCHDOG), RLOCK_ENOREPL);
    rlock_last_error_info(&info);
    printf("      min-replicas-to-write 3 of 2: %s\n", info.message);
    assert_non_null(strstr(info.redis_error, "NOREPLICAS"));
    assert_int_equal(h_exists(m, name, strlen(name)), 0);
    h_cmd_ok(m, "CONFIG SET min-replicas-to-write 0");
    /* An unlock refused by NOREPLICAS changes nothing, even for a lock held twice. */
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    h_cmd_ok(m, "CONFIG SET min-replicas-to-write 3");
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_ENOREPL);
    h_cmd_ok(m, "CONFIG SET min-replicas-to-write 0");
    assert_int_equal(rlock_hold_count(lock), 2);
    assert_int_equal(rlock_is_held_by_current_thread(lock), 1);
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    assert_int_equal(h_exists(m, name, strlen(name)), 0);
    redisFree(m);
    rlock_free(lock);
    rlock_client_close(c);
}

static void test_renewal_not_acknowledged(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    long long wd = H_MS(3000);
    rlock_client *c = open_acks(h_server_url(hs->data[0]), 2, H_MS(500), wd, &s);
    const char *name = h_unique_name("wait-renewal");
    rlock *lock = h_get(c, name);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK); /* held twice */
    long long t_locked = h_now_ms();
    h_server_pause(hs->data[2]);
    H_WAIT_FOR(atomic_load(&s.lost) >= 1, 3 * wd);
    long long lost_after = atomic_load(&s.lost_ms) - t_locked;
    redisContext *m = h_server_redis(hs->data[0]);
    long long pttl = h_pttl(m, name, strlen(name));
    printf("      one replica stopped after the lock: RENEWAL_FAILED x%d (ENOREPL x%d), lost "
           "%lld ms after the lock; the master's PTTL %lld (renewed there, unacknowledged)\n",
           atomic_load(&s.renewal_failed), atomic_load(&s.renewal_failed_enorepl), lost_after,
           pttl);
    assert_true(atomic_load(&s.renewal_failed_enorepl) >= 1);
    assert_true(lost_after >= wd - 100 && lost_after < wd + H_MS(1500));
    assert_int_equal(atomic_load(&s.lost), 1);
    h_server_resume(hs->data[2]);
    /* The master still has the two holds, renewed but unacknowledged. The loss was
     * told: the next lock starts afresh at one hold, and one unlock frees the lock. */
    H_ASSERT_RC(rlock_lock(lock), RLOCK_ELOST); /* the tombstone, told to the thread */
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    assert_int_equal(rlock_hold_count(lock), 1);
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    assert_int_equal(h_exists(m, name, strlen(name)), 0);
    redisFree(m);
    rlock_free(lock);
    rlock_client_close(c);
}

static void test_through_sentinel(void **state) {
    h_sentinels *hs = *state;
    seen s = {0};
    long long wd = H_MS(1500);
    rlock_client *c = open_acks(hs->url, 1, H_MS(1000), wd, &s);
    const char *name = h_unique_name("wait-sentinel");
    rlock *lock = h_get(c, name);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    h_sleep_ms(3 * wd); /* renewed, acknowledged, never warned */
    assert_int_equal(atomic_load(&s.renewal_failed), 0);
    assert_int_equal(atomic_load(&s.lost), 0);
    assert_true(exists_on(hs->data[1], name) || exists_on(hs->data[2], name));
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    rlock_free(lock);
    rlock_client_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SENTINEL_TEST(test_enough_replicas),
        H_SENTINEL_TEST(test_replica_stopped),
        H_SENTINEL_TEST(test_min_replicas),
        H_SENTINEL_TEST(test_renewal_not_acknowledged),
        H_SENTINEL_TEST(test_through_sentinel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
