/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_server_recovery.c - the link to Redis lost and recovered.
 *
 *   scenario 4   Redis restarted (no persistence) while locks are held and waiters
 *                wait: the clients reconnect, the scripts are reloaded (NOSCRIPT ->
 *                EVAL), the holders are told at their next renewal, the waiters
 *                acquire, the same clients keep working (F12).
 *   scenario 7   watchdog outage: every connection of the holder's client is refused
 *                (test proxy) for two renewal intervals and a quarter - less than the
 *                lease - starting right after a renewal, so that two rounds in a row
 *                fail; then the link recovers: the same locks and new ones keep being
 *                renewed, nothing is reported lost (F22).
 *
 * One redis-server per test (started and stopped by the test); durations derive
 * from the watchdog timeout and are scaled by TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "proxy.h"

/* ---- scenario 4: restart without persistence --------------------------- */

struct waiter {
    rlock *lock;
    long long wait_ms;
    long long hold_ms;
    long long acquired_ms; /* h_now_ms() when acquired */
};

/* try_lock, hold a little, unlock; returns the try_lock status (or the
 * unlock's if that failed). */
static long long op_wait_hold_release(void *p) {
    struct waiter *w = p;
    int rc = rlock_try_lock(w->lock, w->wait_ms, RLOCK_LEASE_WATCHDOG);
    if (rc != RLOCK_OK)
        return rc;
    w->acquired_ms = h_now_ms();
    h_sleep_ms(w->hold_ms);
    rc = rlock_unlock(w->lock);
    return rc == RLOCK_OK ? RLOCK_OK : 100 + rc;
}

static void test_redis_restart(void **state) {
    const long long wd = H_MS(2000), interval = wd / 3;
    const char *n1 = h_unique_name("restart1"), *n2 = h_unique_name("restart2");
    const char *n3 = h_unique_name("restart3");
    redisContext *r = h_server_redis(h_srv);
    struct h_lost lost;
    /* The waiters' client retries long enough to ride out a restart. */
    rlock_client *a = h_open_retries(h_server_url(h_srv), wd, 0, -1, -1, &lost);
    rlock_client *b = h_open_retries(h_server_url(h_srv), wd, 0, 10, 500, NULL);
    rlock *a1 = h_get(a, n1), *a2 = h_get(a, n2), *a3 = h_get(a, n3);
    rlock *b1 = h_get(b, n1), *b2 = h_get(b, n2);
    struct waiter w[3] = {{b1, 20000, 100, 0}, {b1, 20000, 100, 0}, {b2, 20000, 100, 0}};
    h_actor *act[3];
    long long t_kill, t_up, evals, first = -1, last = -1;
    int i;
    (void)state;

    H_ASSERT_RC(rlock_lock(a1), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(a2), RLOCK_OK);
    for (i = 0; i < 3; i++) {
        act[i] = h_actor_start();
        h_actor_post(act[i], op_wait_hold_release, &w[i]);
    }
    H_WAIT_FOR(h_numsub(r, n1, strlen(n1)) == 1 && h_numsub(r, n2, strlen(n2)) == 1, 3000);
    h_sleep_ms(50); /* let all three threads reach their sleep */
    redisFree(r);

    t_kill = h_now_ms();
    h_server_restart(h_srv);
    t_up = h_now_ms();
    r = h_server_redis(h_srv);

    for (i = 0; i < 3; i++) {
        long long rc = h_actor_wait(act[i], 25000);
        if (rc != RLOCK_OK)
            H_FAIL("waiter %d: %s", i, rc >= 100 ? "unlock failed" : rlock_status_name((int)rc));
        if (first < 0 || w[i].acquired_ms < first)
            first = w[i].acquired_ms;
        if (w[i].acquired_ms > last)
            last = w[i].acquired_ms;
    }
    H_WAIT_FOR(h_lost_count(&lost) == 2, interval + 3000);
    evals = h_commandstat_calls(r, "eval");
    printf("scenario 4 (WD %lld ms): Redis down and back in %lld ms; 3 waiters acquired "
           "%lld..%lld ms after it was back; holder told of both losses (last %lld ms after); "
           "EVAL calls on the new server: %lld (NOSCRIPT fallback)\n",
           wd, t_up - t_kill, first - t_up, last - t_up, lost.last_ms - t_up, evals);
    assert_true(evals >= 1);
    h_sleep_ms(interval + 100);
    assert_int_equal(h_lost_count(&lost), 2);
    H_ASSERT_RC(rlock_is_held_by_current_thread(a1), 0);
    H_ASSERT_RC(rlock_unlock(a1), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_unlock(a2), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, n1, strlen(n1)), 0);
    assert_int_equal(h_exists(r, n2, strlen(n2)), 0);

    /* The same clients work without reopening; renewal too. */
    H_ASSERT_RC(rlock_lock(a3), RLOCK_OK);
    h_sleep_ms(wd + interval);
    H_ASSERT_LOCK_IS(r, n3, rlock_client_id(a), 1);
    H_ASSERT_RC(rlock_unlock(a3), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(b1, 0, 1000), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(b1), RLOCK_OK);
    H_WAIT_FOR(h_numsub(r, n1, strlen(n1)) == 0 && h_numsub(r, n2, strlen(n2)) == 0, 3000);

    for (i = 0; i < 3; i++)
        h_actor_stop(act[i]);
    rlock_free(a1);
    rlock_free(a2);
    rlock_free(a3);
    rlock_free(b1);
    rlock_free(b2);
    rlock_client_close(a);
    rlock_client_close(b);
    redisFree(r);
}

/* ---- scenario 7: watchdog outage, then recovery ------------------------ */

static void test_watchdog_outage(void **state) {
    const long long wd = H_MS(3000), interval = wd / 3;
    const long long outage = 2 * interval + interval / 4; /* < wd */
    const char *n1 = h_unique_name("outage1"), *n2 = h_unique_name("outage2");
    const char *n3 = h_unique_name("outage3");
    h_proxy *px = h_proxy_start(h_server_port(h_srv));
    redisContext *r = h_server_redis(h_srv);
    struct h_lost lost;
    rlock_client *a = h_open_retries(h_proxy_url(px), wd, H_MS(300), -1, -1, &lost);
    rlock *l1 = h_get(a, n1), *l2 = h_get(a, n2), *l3 = h_get(a, n3);
    struct h_proxy_stats st0, st1;
    long long t_off, t_on, min1 = wd, min2 = wd, min3 = wd, end, recovered = -1;
    (void)state;

    H_ASSERT_RC(rlock_lock(l1), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l2), RLOCK_OK);
    /* Start the outage right after a renewal: the next two rounds fail. */
    h_wait_renewal(r, n1, 50, h_scaled(interval + 1000));
    h_proxy_stats(px, &st0);
    h_proxy_set_refuse(px, 1);
    t_off = h_now_ms();
    h_sleep_ms(outage);
    h_proxy_set_refuse(px, 0);
    t_on = h_now_ms();
    h_proxy_stats(px, &st1);

    /* The same locks: held all along, and renewed again after the outage. */
    end = t_on + interval + H_MS(500);
    while (h_now_ms() < end) {
        long long p1, p2;
        if (h_lock_fields(r, n1, strlen(n1), NULL, NULL) == 0 ||
            h_lock_fields(r, n2, strlen(n2), NULL, NULL) == 0) {
            long long gone = h_now_ms() - t_on;
            H_POLL_UNTIL(h_lost_count(&lost) >= 1, interval + 1000);
            rlock_unlock(l1);
            rlock_unlock(l2);
            rlock_free(l1);
            rlock_free(l2);
            rlock_free(l3);
            rlock_client_close(a);
            h_proxy_stop(px);
            redisFree(r);
            H_FAIL("scenario 7: a watchdog lock expired %lld ms after an outage of %lld ms "
                   "that began right after a renewal and was shorter than the lease (%lld ms); "
                   "on_lock_lost %d. Two renewal rounds failed and the next one was scheduled "
                   "a full interval later, at the very moment the lease ran out",
                   gone, t_on - t_off, wd, h_lost_count(&lost));
        }
        H_ASSERT_LOCK_IS(r, n1, rlock_client_id(a), 1);
        H_ASSERT_LOCK_IS(r, n2, rlock_client_id(a), 1);
        p1 = h_pttl(r, n1, strlen(n1));
        p2 = h_pttl(r, n2, strlen(n2));
        if (recovered < 0 && p1 > wd - H_MS(200) && p2 > wd - H_MS(200))
            recovered = h_now_ms() - t_on;
        h_sleep_ms(10);
    }
    /* New locks too; then 2 leases of normal operation. */
    H_ASSERT_RC(rlock_lock(l3), RLOCK_OK);
    end = h_now_ms() + 2 * wd;
    while (h_now_ms() < end) {
        long long p;
        H_ASSERT_LOCK_IS(r, n1, rlock_client_id(a), 1);
        H_ASSERT_LOCK_IS(r, n3, rlock_client_id(a), 1);
        p = h_pttl(r, n1, strlen(n1));
        min1 = p < min1 ? p : min1;
        p = h_pttl(r, n2, strlen(n2));
        min2 = p < min2 ? p : min2;
        p = h_pttl(r, n3, strlen(n3));
        min3 = p < min3 ? p : min3;
        h_sleep_ms(50);
    }
    printf("scenario 7 (WD %lld ms, interval %lld ms): outage of %lld ms right after a "
           "renewal (%ld connections refused/cut); renewed again %lld ms after it ended; "
           "lowest PTTL afterwards %lld/%lld ms, new lock %lld ms; on_lock_lost %d\n",
           wd, interval, t_on - t_off, (st1.refused + st1.cuts) - (st0.refused + st0.cuts),
           recovered, min1, min2, min3, h_lost_count(&lost));
    assert_int_equal(h_lost_count(&lost), 0);
    assert_true(recovered >= 0);
    H_ASSERT_BETWEEN(min1, wd - interval - H_MS(300), wd);
    H_ASSERT_BETWEEN(min2, wd - interval - H_MS(300), wd);
    H_ASSERT_BETWEEN(min3, wd - interval - H_MS(300), wd);

    H_ASSERT_RC(rlock_unlock(l1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l3), RLOCK_OK);
    rlock_free(l1);
    rlock_free(l2);
    rlock_free(l3);
    rlock_client_close(a);
    h_proxy_stop(px);
    redisFree(r);
}

/* The same with an outage that swallows one round only (1.25 intervals). */
static void test_watchdog_outage_one_round(void **state) {
    const long long wd = H_MS(3000), interval = wd / 3;
    const long long outage = interval + interval / 4;
    const char *n1 = h_unique_name("outage-one");
    h_proxy *px = h_proxy_start(h_server_port(h_srv));
    redisContext *r = h_server_redis(h_srv);
    struct h_lost lost;
    rlock_client *a = h_open_retries(h_proxy_url(px), wd, H_MS(300), -1, -1, &lost);
    rlock *l1 = h_get(a, n1);
    long long t_off, t_on, min1 = wd, end;
    (void)state;

    H_ASSERT_RC(rlock_lock(l1), RLOCK_OK);
    h_wait_renewal(r, n1, 50, h_scaled(interval + 1000));
    h_proxy_set_refuse(px, 1);
    t_off = h_now_ms();
    h_sleep_ms(outage);
    h_proxy_set_refuse(px, 0);
    t_on = h_now_ms();
    end = h_now_ms() + 2 * wd;
    while (h_now_ms() < end) {
        long long p;
        H_ASSERT_LOCK_IS(r, n1, rlock_client_id(a), 1);
        p = h_pttl(r, n1, strlen(n1));
        if (h_now_ms() > t_on + interval)
            min1 = p < min1 ? p : min1;
        h_sleep_ms(50);
    }
    printf("scenario 7 (one round): outage of %lld ms; lowest PTTL once recovered %lld ms; "
           "on_lock_lost %d\n", t_on - t_off, min1, h_lost_count(&lost));
    assert_int_equal(h_lost_count(&lost), 0);
    H_ASSERT_BETWEEN(min1, wd - interval - H_MS(300), wd);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_OK);
    rlock_free(l1);
    rlock_client_close(a);
    h_proxy_stop(px);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SERVER_TEST(test_redis_restart),
        H_SERVER_TEST(test_watchdog_outage_one_round),
        H_SERVER_TEST(test_watchdog_outage),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER")) /* e.g. FAULT_FILTER='test_watchdog_outage*' */
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
