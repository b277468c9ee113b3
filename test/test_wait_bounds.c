/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_wait_bounds.c - how long a wait lasts: try_lock's wait bound (0 and
 * bounded), a held lock taken when its TTL runs out, waits without a limit
 * however "no limit" is spelled, and an unreachable Redis (killed or
 * paused): RLOCK_EIO within the wait plus the command timeout.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

/* ---- wait bounds ----------------------------------------------------- */

static void test_wait_zero_and_bounded(void **state) {
    rlock_client *c = h_open(30000, 0), *c2 = h_open(30000, 0);
    const char *name = h_unique_name("bound");
    rlock *l = h_get(c, name), *l2 = h_get(c2, name);
    h_actor *holder = h_actor_start();
    long long t0, dt;
    static const long long waits[] = {300, 700};
    size_t i;
    (void)state;

    H_ASSERT_RC((int)h_actor_call(holder, h_op_lock, l), RLOCK_OK);

    t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock(l2, 0, 10000), RLOCK_BUSY);
    dt = h_now_ms() - t0;
    H_ASSERT_BETWEEN(dt, 0, H_MS(200));

    for (i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        long long w = H_MS(waits[i]);
        t0 = h_now_ms();
        H_ASSERT_RC(rlock_try_lock(l, w, -1), RLOCK_BUSY);
        dt = h_now_ms() - t0;
        print_message("      wait %lld ms on a held lock: BUSY after %lld ms\n", w, dt);
        H_ASSERT_BETWEEN(dt, w - 2, w + H_MS(250));
        t0 = h_now_ms();
        H_ASSERT_RC(rlock_try_lock(l2, w, 5000), RLOCK_BUSY);
        dt = h_now_ms() - t0;
        H_ASSERT_BETWEEN(dt, w - 2, w + H_MS(250));
    }
    /* A thread that already holds it does not wait. */
    H_ASSERT_RC((int)h_actor_call(holder, h_op_hold_count, l), 1);
    {
        struct h_try t = {l, H_MS(5000), -1};
        t0 = h_now_ms();
        H_ASSERT_RC((int)h_actor_call(holder, h_op_try_lock, &t), RLOCK_OK);
        H_ASSERT_BETWEEN(h_now_ms() - t0, 0, H_MS(200));
    }
    H_ASSERT_RC((int)h_actor_call(holder, h_op_unlock, l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(holder, h_op_unlock, l), RLOCK_OK);

    /* Nothing left behind by the failed waits: no subscription, no key. */
    {
        redisContext *r = h_redis();
        H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 0, 2000);
        assert_int_equal(h_exists(r, name, strlen(name)), 0);
        redisFree(r);
    }
    h_actor_stop(holder);
    rlock_free(l);
    rlock_free(l2);
    rlock_client_close(c);
    rlock_client_close(c2);
}

/* A lock that expires (no unlock, so no message) is taken once its TTL
 * runs out, not at the end of the wait. */
static void test_wake_on_expiry(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("expiry");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    long long ttl = H_MS(400), t0, dt;
    (void)state;

    h_foreign_lock(r, name, ttl);
    t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(l, H_MS(5000), -1), RLOCK_OK);
    dt = h_now_ms() - t0;
    print_message("      foreign lock with a %lld ms TTL: acquired after %lld ms\n", ttl, dt);
    H_ASSERT_BETWEEN(dt, ttl - 20, ttl + H_MS(300));
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    /* The same with rlock_lock(). */
    h_foreign_lock(r, name, ttl);
    t0 = h_now_ms();
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    dt = h_now_ms() - t0;
    H_ASSERT_BETWEEN(dt, ttl - 20, ttl + H_MS(300));
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* Waits without a limit, however the "no limit" is spelled. */
static void test_unbounded_waits(void **state) {
    static const long long waits[] = {-1, -2, LLONG_MIN, LLONG_MAX, LLONG_MAX - 1};
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("unbounded");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *waiter = h_actor_start();
    size_t i;
    (void)state;

    for (i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        static struct h_try t; /* may outlive a failed test */
        t.lock = l;
        t.wait_ms = waits[i];
        t.lease_ms = 10000;
        h_foreign_lock(r, name, 30000);
        h_actor_post(waiter, h_op_try_lock, &t);
        H_WAIT_FOR(h_numsub(r, name, strlen(name)) >= 1, 2000);
        h_sleep_ms(H_MS(200));
        if (h_actor_done(waiter))
            fail_msg("try_lock(wait %lld) returned %s while the lock was held", waits[i],
                     rlock_status_name((int)h_actor_wait(waiter, 0)));
        h_foreign_unlock(r, name);
        H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
        H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);
    }
    h_actor_stop(waiter);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- Redis unreachable ----------------------------------------------- */

static rlock_client *open_on(h_server *s, int retry_attempts, int retry_interval_ms) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = h_server_url(s);
    cfg.connect_timeout_ms = (int)H_MS(500);
    cfg.command_timeout_ms = (int)H_MS(500);
    cfg.retry_attempts = retry_attempts;
    cfg.retry_interval_ms = retry_interval_ms;
    return h_open_config(&cfg);
}

/* try_lock returns EIO within wait + command timeout (+ slack). */
static void expect_eio_within(rlock *l, long long wait_ms, const char *what) {
    long long t0 = h_now_ms(), dt, bound = wait_ms + H_MS(500) + H_MS(500);
    int rc = rlock_try_lock(l, wait_ms, -1);
    dt = h_now_ms() - t0;
    print_message("      %s, try_lock(wait %lld): %s after %lld ms (bound %lld)\n", what,
                  wait_ms, rlock_status_name(rc), dt, bound);
    H_ASSERT_RC(rc, RLOCK_EIO);
    H_ASSERT_BETWEEN(dt, 0, bound);
}

static void test_redis_killed(void **state) {
    h_server *s = h_server_start();
    rlock_client *c = open_on(s, 3, 1000); /* the default retries */
    const char *name = h_unique_name("killed");
    rlock *l = h_get(c, name);
    redisContext *sr;
    long long t0;
    int rc;
    (void)state;

    H_ASSERT_RC(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    h_server_kill(s);
    expect_eio_within(l, 0, "server killed");
    expect_eio_within(l, H_MS(300), "server killed");
    H_ASSERT_RC(rlock_is_locked(l), RLOCK_EIO);
    /* rlock_lock(): EIO after the retries. */
    t0 = h_now_ms();
    rc = rlock_lock(l);
    H_ASSERT_RC(rc, RLOCK_EIO);
    H_ASSERT_BETWEEN(h_now_ms() - t0, 0, 4 * (H_MS(500) + 1000) + H_MS(1000));

    /* Back on the same port (empty): the same client recovers. */
    h_server_restart(s);
    H_ASSERT_RC(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    sr = h_server_redis(s);
    H_ASSERT_LOCK_IS(sr, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(sr, name, strlen(name)), 0);
    redisFree(sr);

    rlock_free(l);
    rlock_client_close(c);
    h_server_stop(s);
}

static void test_redis_paused(void **state) {
    h_server *s = h_server_start();
    rlock_client *c = open_on(s, 3, 1000);
    const char *name = h_unique_name("paused"), *other = h_unique_name("paused2");
    rlock *l = h_get(c, name), *lo = h_get(c, other);
    redisContext *sr = h_server_redis(s);
    char *field = NULL;
    long long v = 0;
    (void)state;

    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);

    h_server_pause(s);
    expect_eio_within(lo, 0, "server paused");
    expect_eio_within(lo, H_MS(300), "server paused");
    h_server_resume(s);

    /* The timed-out acquisitions may have run once Redis woke up; trying
     * again from the same thread adopts such a hold exactly once. */
    H_ASSERT_RC(rlock_try_lock(lo, 0, 10000), RLOCK_OK);
    assert_int_equal(h_lock_fields(sr, other, strlen(other), &field, &v), 1);
    free(field);
    assert_int_equal(v, 1);
    H_ASSERT_RC(rlock_hold_count(lo), 1);
    H_ASSERT_RC(rlock_unlock(lo), RLOCK_OK);
    assert_int_equal(h_exists(sr, other, strlen(other)), 0);

    /* Replies are not mixed up: the first lock is exactly as before. */
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_LOCK_IS(sr, name, rlock_client_id(c), 2);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(sr, name, strlen(name)), 0);

    redisFree(sr);
    rlock_free(l);
    rlock_free(lo);
    rlock_client_close(c);
    h_server_stop(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_zero_and_bounded),
        cmocka_unit_test(test_wake_on_expiry),
        cmocka_unit_test(test_unbounded_waits),
        cmocka_unit_test(test_redis_killed),
        cmocka_unit_test(test_redis_paused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
