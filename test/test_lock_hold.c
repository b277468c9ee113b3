/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_lock_hold.c - what one hold is: reentrancy and hold counts in the
 * exact Redis layout, the TTL each acquisition sets, leases that expire (and
 * the late unlocks of their old holder), is_locked and remain_ttl.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define SLACK_MS H_MS(1500)

static void test_reentrancy_layout(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("reent");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    const char *id = rlock_client_id(c);
    long long ttl;
    int i;
    (void)state;

    H_ASSERT_RC(rlock_hold_count(l), 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    for (i = 1; i <= 3; i++) {
        H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
        H_ASSERT_LOCK_IS(r, name, id, i);
        H_ASSERT_RC(rlock_hold_count(l), i);
        H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 30000 - SLACK_MS, 30000);
    }
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    H_ASSERT_BETWEEN(ttl, 30000 - SLACK_MS, 30000);
    for (i = 2; i >= 0; i--) {
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
        H_ASSERT_RC(rlock_hold_count(l), i);
        if (i > 0) {
            H_ASSERT_LOCK_IS(r, name, id, i);
            /* A partial release keeps the key's TTL (it does not PERSIST it). */
            H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 30000 - SLACK_MS, 30000);
        }
    }
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_RC(rlock_is_locked(l), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    /* Many holds. */
    for (i = 0; i < 100; i++)
        H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, id, 100);
    for (i = 0; i < 99; i++)
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, id, 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

static void test_ttl_per_acquisition(void **state) {
    rlock_client *c = h_open(H_MS(10000), 0);
    const char *name = h_unique_name("ttl");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    size_t n = strlen(name);
    long long wd = H_MS(10000);
    (void)state;

    /* Watchdog lock: PTTL = watchdog timeout. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), wd - SLACK_MS, wd);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), wd - SLACK_MS, wd);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), wd - SLACK_MS, wd);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    /* Each acquisition sets the TTL to its own lease (not additive). */
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), 60000 - SLACK_MS, 60000);
    H_ASSERT_RC(rlock_lock_lease(l, 5000), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), 5000 - SLACK_MS, 5000);
    H_ASSERT_RC(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), 20000 - SLACK_MS, 20000);
    H_ASSERT_RC(rlock_try_lock(l, 1000, 40000), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), 40000 - SLACK_MS, 40000);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 4);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    assert_true(h_pttl(r, name, n) > 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- leases ---------------------------------------------------------- */

static void test_lease_expiry(void **state) {
    /* A short watchdog timeout, so the watchdog runs often: it must leave
     * a lease lock alone. */
    rlock_client *c = h_open(H_MS(300), 0);
    const char *name = h_unique_name("lease");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    size_t n = strlen(name);
    long long lease = H_MS(500), t0, gone;
    h_actor *b = h_actor_start();
    (void)state;

    t0 = h_now_ms();
    H_ASSERT_RC(rlock_lock_lease(l, lease), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), 1, lease);
    H_WAIT_FOR(h_exists(r, name, n) == 0, lease + 2000);
    gone = h_now_ms() - t0;
    /* Not early (lease counts from the acquisition, which was after t0). */
    assert_true(gone >= lease - 5);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_RC(rlock_hold_count(l), 0);
    H_ASSERT_RC(rlock_is_locked(l), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, n), 0);

    /* Reentrant lease holds expire too, and another thread can then lock. */
    H_ASSERT_RC(rlock_lock_lease(l, lease), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(l, 0, lease), RLOCK_OK);
    H_WAIT_FOR(h_exists(r, name, n) == 0, lease + 2000);
    {
        struct h_try t = {l, 0, 20000}; /* a lease: no renewal moves the TTL */
        H_ASSERT_RC((int)h_actor_call(b, h_op_lock_lease, &t), RLOCK_OK);
    }
    {
        /* The old holder's late unlocks: refused, nothing changed or published. */
        long long pub0 = h_commandstat_calls(r, "publish");
        long long pttl0 = h_pttl(r, name, n);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
        assert_int_equal(h_commandstat_calls(r, "publish"), pub0);
        assert_true(h_pttl(r, name, n) <= pttl0);
    }
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC((int)h_actor_call(b, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);

    h_actor_stop(b);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- is_locked, remain_ttl ------------------------------------------ */

static void test_is_locked_remain_ttl(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("ttlq");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    long long ttl = 0;
    static const char foreign[] = "0d8c7e1a-1111-4222-8333-444455556666:42";
    (void)state;

    H_ASSERT_RC(rlock_is_locked(l), 0);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    assert_int_equal(ttl, -2);

    H_ASSERT_RC(rlock_lock_lease(l, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    H_ASSERT_BETWEEN(ttl, 5000 - SLACK_MS, 5000);
    h_cmd_ok(r, "PERSIST %s", name);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    assert_int_equal(ttl, -1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    assert_int_equal(ttl, -2);

    /* A foreign holder (another Redisson client). */
    h_cmd_ok(r, "HSET %s %s 1", name, foreign);
    h_cmd_ok(r, "PEXPIRE %s 30000", name);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_RC(rlock_hold_count(l), 0);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    H_ASSERT_BETWEEN(ttl, 30000 - SLACK_MS, 30000);
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    /* Untouched. */
    {
        char *field = NULL;
        long long v = 0;
        assert_int_equal(h_lock_fields(r, name, strlen(name), &field, &v), 1);
        assert_string_equal(field, foreign);
        assert_int_equal(v, 1);
        free(field);
        assert_true(h_pttl(r, name, strlen(name)) <= 30000);
    }
    h_cmd_ok(r, "DEL %s", name);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reentrancy_layout),
        cmocka_unit_test(test_ttl_per_acquisition),
        cmocka_unit_test(test_lease_expiry),
        cmocka_unit_test(test_is_locked_remain_ttl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
