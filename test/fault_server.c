/*
 * fault_server.c - faults of the Redis server and of the link to it.
 *
 *   scenario 3a  Redis SIGSTOPped for less than the lease (1.5 renewal intervals),
 *                then resumed: no lost callback, renewal goes on, the waiter never
 *                gets the lock (user-needs F3).
 *   scenario 3b  Redis SIGSTOPped for 1.5 x the lease: calls made meanwhile return
 *                RLOCK_EIO within their documented bounds; after the resume exactly
 *                one owner exists and the old holder learns of the loss, once (F4).
 *   scenario 4   Redis restarted (no persistence) while locks are held and waiters
 *                wait: the clients reconnect, the scripts are reloaded (NOSCRIPT ->
 *                EVAL), the holders are told at their next renewal, the waiters
 *                acquire, the same clients keep working (F12).
 *   scenario 7   watchdog outage: every connection of the holder's client is refused
 *                (test proxy) for two renewal intervals and a quarter - less than the
 *                lease - starting right after a renewal, so that two rounds in a row
 *                fail; then the link recovers: the same locks and new ones keep being
 *                renewed, nothing is reported lost (F22).
 *   reconnect    Redis down: calls return RLOCK_EIO within connect/command timeouts
 *                plus retries; after Redis comes back the same client works.
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

static rlock_client *open_client(const char *url, long long wd, long long cmd, int retries,
                                 int retry_interval, struct h_lost *lost) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = wd;
    if (cmd > 0)
        cfg.command_timeout_ms = (int)cmd;
    if (retries >= 0)
        cfg.retry_attempts = retries;
    if (retry_interval >= 0)
        cfg.retry_interval_ms = retry_interval;
    if (lost) {
        h_lost_init(lost);
        cfg.on_lock_lost = h_lost_cb;
        cfg.callback_arg = lost;
    }
    return h_open_config(&cfg);
}

/* Times one call: stores the result and returns the elapsed ms. */
#define TIMED(rc_var, call)                                                    \
    __extension__({                                                            \
        long long t_0_ = h_now_ms();                                           \
        (rc_var) = (call);                                                     \
        h_now_ms() - t_0_;                                                     \
    })

/* ---- scenario 3a: short stall ------------------------------------------ */

static void test_redis_stall_short(void **state) {
    const long long wd = H_MS(2000), interval = wd / 3, pause = interval + interval / 2;
    const char *name = h_unique_name("stall-short");
    redisContext *r = h_server_redis(h_srv);
    struct h_lost lost;
    rlock_client *a = open_client(h_server_url(h_srv), wd, H_MS(2000), -1, -1, &lost);
    rlock_client *b = open_client(h_server_url(h_srv), wd, H_MS(2000), -1, -1, NULL);
    rlock *al = h_get(a, name), *bl = h_get(b, name);
    h_actor *waiter = h_actor_start();
    struct h_try t = {bl, 3 * wd, 30000};
    long long t_p, t_r, min_pttl = wd, end;
    int checks = 0, rc;
    (void)state;

    H_ASSERT_RC(rlock_lock(al), RLOCK_OK);
    h_actor_post(waiter, h_op_try_lock, &t);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 2000);

    h_server_pause(h_srv);
    t_p = h_now_ms();
    h_sleep_ms(pause);
    h_server_resume(h_srv);
    t_r = h_now_ms();

    /* Held and renewed for 3 x WD after the resume. */
    end = t_r + 3 * wd;
    while (h_now_ms() < end) {
        long long pttl;
        H_ASSERT_LOCK_IS(r, name, rlock_client_id(a), 1);
        pttl = h_pttl(r, name, strlen(name));
        if (h_now_ms() > t_r + interval && pttl < min_pttl)
            min_pttl = pttl;
        checks++;
        h_sleep_ms(50);
    }
    rc = (int)h_actor_wait(waiter, 3 * wd + 5000);
    printf("scenario 3a (WD %lld ms): Redis stopped %lld ms; lock held through %lld ms after "
           "the resume (%d checks), lowest PTTL after one interval %lld ms; on_lock_lost %d; "
           "waiter's try_lock(wait %lld) = %s\n",
           wd, t_r - t_p, 3 * wd, checks, min_pttl, h_lost_count(&lost), t.wait_ms,
           rlock_status_name(rc));
    H_ASSERT_RC(rc, RLOCK_BUSY);
    assert_int_equal(h_lost_count(&lost), 0);
    H_ASSERT_BETWEEN(min_pttl, wd - interval - H_MS(300), wd);
    H_ASSERT_RC(rlock_is_held_by_current_thread(al), 1);
    H_ASSERT_RC(rlock_unlock(al), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    h_actor_stop(waiter);
    rlock_free(al);
    rlock_free(bl);
    rlock_client_close(a);
    rlock_client_close(b);
    redisFree(r);
}

/* ---- scenario 3b: stall longer than the lease -------------------------- */

static void test_redis_stall_long(void **state) {
    const long long wd = H_MS(2000), interval = wd / 3, cmd = H_MS(300);
    const int retries = 1, retry_ms = 100;
    /* Bound of a call without deadline: every attempt times out, plus the pauses. */
    const long long call_bound = (retries + 1) * cmd + retries * retry_ms + H_MS(300);
    const long long wait_ms = 500;
    const char *name = h_unique_name("stall-long"), *other = h_unique_name("stall-long2");
    redisContext *r = h_server_redis(h_srv);
    struct h_lost lost;
    rlock_client *a = open_client(h_server_url(h_srv), wd, cmd, retries, retry_ms, &lost);
    rlock_client *b = open_client(h_server_url(h_srv), wd, cmd, retries, retry_ms, NULL);
    rlock *al = h_get(a, name), *bl = h_get(b, name), *bo = h_get(b, other);
    h_actor *bact = h_actor_start();
    struct h_try t = {bl, wait_ms, RLOCK_LEASE_WATCHDOG};
    long long t_p, t_r, dt_is, dt_try, dt_lock, dt_ttl, dt_acq, ttl = 0;
    int rc_is, rc_try, rc_lock, rc_ttl;
    (void)state;

    H_ASSERT_RC(rlock_lock(al), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(a), 1);

    h_server_pause(h_srv);
    t_p = h_now_ms();
    /* Calls made meanwhile fail within their bounds. */
    dt_is = TIMED(rc_is, rlock_is_locked(al));
    h_actor_post(bact, h_op_try_lock, &t);
    dt_try = h_now_ms();
    rc_try = (int)h_actor_wait(bact, 10000);
    dt_try = h_actor_finished_ms(bact) - dt_try;
    dt_lock = TIMED(rc_lock, rlock_lock(bo));
    dt_ttl = TIMED(rc_ttl, rlock_remain_ttl(al, &ttl));
    /* Stay stopped for 1.5 x the lease in all. */
    h_sleep_ms(t_p + wd + wd / 2 - h_now_ms());
    h_server_resume(h_srv);
    t_r = h_now_ms();

    /* The old holder learns of the loss at its next renewal. */
    H_WAIT_FOR(h_lost_count(&lost) >= 1, interval + 2 * cmd + 1000);
    /* The waiter's thread gets it (adopting its own acquisition if one that
     * timed out ran after the resume). */
    t.wait_ms = 2 * wd;
    dt_acq = h_now_ms();
    H_ASSERT_RC((int)h_actor_call(bact, h_op_try_lock, &t), RLOCK_OK);
    dt_acq = h_actor_finished_ms(bact) - dt_acq;
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(b), 1);

    printf("scenario 3b (WD %lld ms, command timeout %lld ms, %d retry): Redis stopped "
           "%lld ms; meanwhile is_locked = %s in %lld ms, try_lock(wait %lld) = %s in %lld ms, "
           "lock = %s in %lld ms, remain_ttl = %s in %lld ms (bound %lld ms); old holder "
           "told %lld ms after the resume; the other client acquired in %lld ms\n",
           wd, cmd, retries, t_r - t_p, rlock_status_name(rc_is), dt_is, wait_ms,
           rlock_status_name(rc_try), dt_try, rlock_status_name(rc_lock), dt_lock,
           rlock_status_name(rc_ttl), dt_ttl, call_bound, lost.last_ms - t_r, dt_acq);
    H_ASSERT_RC(rc_is, RLOCK_EIO);
    H_ASSERT_RC(rc_try, RLOCK_EIO);
    H_ASSERT_RC(rc_lock, RLOCK_EIO);
    H_ASSERT_RC(rc_ttl, RLOCK_EIO);
    H_ASSERT_BETWEEN(dt_is, cmd, call_bound);
    H_ASSERT_BETWEEN(dt_try, 0, wait_ms + cmd + H_MS(300));
    H_ASSERT_BETWEEN(dt_lock, cmd, call_bound);
    H_ASSERT_BETWEEN(dt_ttl, cmd, call_bound);

    /* Exactly one owner, and it stays so: told once, nothing re-created. */
    h_sleep_ms(2 * interval + 100);
    assert_int_equal(h_lost_count(&lost), 1);
    assert_string_equal(lost.last_name, name);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(b), 1);
    H_ASSERT_RC(rlock_is_held_by_current_thread(al), 0);
    H_ASSERT_RC(rlock_unlock(al), RLOCK_ENOTOWNER);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(b), 1);
    H_ASSERT_RC(h_actor_call(bact, h_op_unlock, bl), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* The lock() that failed during the stall: its acquisition may have run
     * after the resume; calling again from the same thread adopts it once. */
    H_ASSERT_RC(rlock_lock(bo), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, other, rlock_client_id(b), 1);
    H_ASSERT_RC(rlock_unlock(bo), RLOCK_OK);
    assert_int_equal(h_exists(r, other, strlen(other)), 0);

    h_actor_stop(bact);
    rlock_free(al);
    rlock_free(bl);
    rlock_free(bo);
    rlock_client_close(a);
    rlock_client_close(b);
    redisFree(r);
}

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
    rlock_client *a = open_client(h_server_url(h_srv), wd, 0, -1, -1, &lost);
    rlock_client *b = open_client(h_server_url(h_srv), wd, 0, 10, 500, NULL);
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
    rlock_client *a = open_client(h_proxy_url(px), wd, H_MS(300), -1, -1, &lost);
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
    rlock_client *a = open_client(h_proxy_url(px), wd, H_MS(300), -1, -1, &lost);
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

/* ---- reconnect ------------------------------------------------------------ */

static void test_reconnect(void **state) {
    const long long cmd = H_MS(500), conn = H_MS(500);
    const int retries = 2, retry_ms = 100;
    const long long bound = (retries + 1) * (conn + cmd) + retries * retry_ms + H_MS(300);
    const char *name = h_unique_name("reconnect"), *n2 = h_unique_name("reconnect2");
    rlock_config cfg;
    rlock_client *c, *c2 = NULL;
    rlock *l, *l2, *l3 = NULL;
    redisContext *r;
    long long dt_is, dt_unlock, dt_lock, dt_try, dt_open, dt_back, ttl;
    int rc_is, rc_unlock, rc_lock, rc_try, rc_open, rc;
    (void)state;

    h_config(&cfg);
    cfg.url = h_server_url(h_srv);
    cfg.command_timeout_ms = (int)cmd;
    cfg.connect_timeout_ms = (int)conn;
    cfg.retry_attempts = retries;
    cfg.retry_interval_ms = retry_ms;
    c = h_open_config(&cfg);
    l = h_get(c, name);
    l2 = h_get(c, n2);
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);

    h_server_kill(h_srv);
    dt_is = TIMED(rc_is, rlock_is_locked(l));
    dt_unlock = TIMED(rc_unlock, rlock_unlock(l));
    dt_lock = TIMED(rc_lock, rlock_lock(l2));
    dt_try = TIMED(rc_try, rlock_try_lock(l2, 300, 1000));
    H_ASSERT_RC(rlock_get(c, "no traffic", &l3), RLOCK_OK);
    dt_open = TIMED(rc_open, rlock_client_open(&cfg, &c2));
    if (rc_open == RLOCK_OK)
        rlock_client_close(c2);

    h_server_restart(h_srv);
    r = h_server_redis(h_srv);
    /* The same client, not reopened: the first call after the restart works. */
    dt_back = TIMED(rc, rlock_lock(l2));
    H_ASSERT_RC(rc, RLOCK_OK);
    H_ASSERT_LOCK_IS(r, n2, rlock_client_id(c), 1);
    printf("reconnect (connect/command timeout %lld/%lld ms, %d retries): Redis down: "
           "is_locked = %s in %lld ms, unlock = %s in %lld ms, lock = %s in %lld ms, "
           "try_lock(300) = %s in %lld ms, client_open = %s in %lld ms (bound %lld ms); "
           "after the restart the same client locked in %lld ms\n",
           conn, cmd, retries, rlock_status_name(rc_is), dt_is, rlock_status_name(rc_unlock),
           dt_unlock, rlock_status_name(rc_lock), dt_lock, rlock_status_name(rc_try), dt_try,
           rlock_status_name(rc_open), dt_open, bound, dt_back);
    H_ASSERT_RC(rc_is, RLOCK_EIO);
    H_ASSERT_RC(rc_unlock, RLOCK_EIO);
    H_ASSERT_RC(rc_lock, RLOCK_EIO);
    H_ASSERT_RC(rc_try, RLOCK_EIO);
    H_ASSERT_RC(rc_open, RLOCK_EIO);
    H_ASSERT_BETWEEN(dt_is, 0, bound);
    H_ASSERT_BETWEEN(dt_unlock, 0, bound);
    H_ASSERT_BETWEEN(dt_lock, 0, bound);
    H_ASSERT_BETWEEN(dt_try, 0, 300 + cmd + H_MS(300));
    H_ASSERT_BETWEEN(dt_open, 0, conn + cmd + H_MS(300));

    /* The restart lost the held lock; the client says so, touching nothing. */
    H_ASSERT_RC(rlock_is_locked(l), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_remain_ttl(l2, &ttl), RLOCK_OK);
    H_ASSERT_BETWEEN(ttl, 1, 30000);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    assert_int_equal(h_exists(r, n2, strlen(n2)), 0);

    rlock_free(l);
    rlock_free(l2);
    rlock_free(l3);
    rlock_client_close(c);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SERVER_TEST(test_redis_stall_short),
        H_SERVER_TEST(test_redis_stall_long),
        H_SERVER_TEST(test_redis_restart),
        H_SERVER_TEST(test_watchdog_outage_one_round),
        H_SERVER_TEST(test_watchdog_outage),
        H_SERVER_TEST(test_reconnect),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER")) /* e.g. FAULT_FILTER='test_kill9*' */
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
