/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_server_down.c - Redis stopped or down.
 *
 *   scenario 3a  Redis SIGSTOPped for less than the lease (1.5 renewal intervals),
 *                then resumed: no lost callback, renewal goes on, the waiter never
 *                gets the lock (user-needs F3).
 *   scenario 3b  Redis SIGSTOPped for 1.5 x the lease: calls made meanwhile return
 *                RLOCK_EIO within their documented bounds; after the resume exactly
 *                one owner exists and the old holder learns of the loss, once (F4).
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
    rlock_client *a = h_open_retries(h_server_url(h_srv), wd, H_MS(2000), -1, -1, &lost);
    rlock_client *b = h_open_retries(h_server_url(h_srv), wd, H_MS(2000), -1, -1, NULL);
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
    rlock_client *a = h_open_retries(h_server_url(h_srv), wd, cmd, retries, retry_ms, &lost);
    rlock_client *b = h_open_retries(h_server_url(h_srv), wd, cmd, retries, retry_ms, NULL);
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
        H_SERVER_TEST(test_reconnect),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER")) /* e.g. FAULT_FILTER='test_redis_stall*' */
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
