/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_close.c - rlock_client_close() under load and while Redis misbehaves.
 *
 *   scenario 10  a client with 3 locks held by 3 of its threads and 10 threads
 *                waiting (rlock_lock and try_lock, on locks held by another client
 *                and on one of its own): close returns within 1 s, every waiter gets
 *                RLOCK_ECLOSED, the held locks are left to expire (not renewed, not
 *                released), the client's connections and subscriptions are gone,
 *                later calls return RLOCK_ECLOSED (user-needs F19, F21).
 *   10b          close while Redis is SIGSTOPped and 6 calls plus a renewal round are
 *                blocked on replies: close returns within 1 s, the calls return
 *                RLOCK_ECLOSED.
 *   10c          close while calls sleep between retries (Redis killed, retry interval
 *                3 s): close returns within 1 s, the calls return RLOCK_ECLOSED.
 *
 * Leaks: run this binary under valgrind or build it with SAN=address (see
 * docs/failure-modes.md); every client and handle is closed and freed.
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

/* Number of client connections the server has (CLIENT LIST lines). */
static int client_count(redisContext *r) {
    char *list = h_cmd_str(r, "CLIENT LIST");
    int n = 0;
    const char *p;
    for (p = list; p && *p; p++)
        n += *p == '\n';
    free(list);
    return n;
}


static long long op_is_locked(void *lock) {
    return rlock_is_locked(lock);
}

#define NHELD 3
#define NWAIT 10

static void test_close_under_load(void **state) {
    const long long wd = H_MS(2000);
    const char *held_names[NHELD], *w1 = h_unique_name("close-w1"), *w2 = h_unique_name("close-w2");
    redisContext *r = h_server_redis(h_srv);
    rlock_client *other = h_open_url(h_server_url(h_srv), 0, 0), *c;
    rlock *ow1 = h_get(other, w1), *ow2 = h_get(other, w2);
    rlock *held[NHELD], *wl1, *wl2, *own;
    h_actor *holders[NHELD], *waiters[NWAIT];
    struct h_try tries[NWAIT];
    char id[64];
    int baseline, i, before, waiting_rc[NWAIT];
    long long dt, pttl[NHELD], t_close, expired_after = 0;
    (void)state;

    baseline = client_count(r);
    c = h_open_url(h_server_url(h_srv), wd, 0);
    snprintf(id, sizeof id, "%s", rlock_client_id(c));
    H_ASSERT_RC(rlock_lock_lease(ow1, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(ow2, 60000), RLOCK_OK);

    for (i = 0; i < NHELD; i++) {
        held_names[i] = h_unique_name("close-held");
        held[i] = h_get(c, held_names[i]);
        holders[i] = h_actor_start();
        H_ASSERT_RC(h_actor_call(holders[i], h_op_lock, held[i]), RLOCK_OK);
    }
    wl1 = h_get(c, w1);
    wl2 = h_get(c, w2);
    own = h_get(c, held_names[0]);
    for (i = 0; i < NWAIT; i++) {
        waiters[i] = h_actor_start();
        if (i < 4) {
            h_actor_post(waiters[i], h_op_lock, wl1);
        } else if (i < 8) {
            tries[i].lock = wl2;
            tries[i].wait_ms = 60000;
            tries[i].lease_ms = i % 2 ? RLOCK_LEASE_WATCHDOG : 30000;
            h_actor_post(waiters[i], h_op_try_lock, &tries[i]);
        } else {
            h_actor_post(waiters[i], h_op_lock, own); /* its own client holds it */
        }
    }
    H_WAIT_FOR(h_numsub(r, w1, strlen(w1)) == 1 && h_numsub(r, w2, strlen(w2)) == 1 &&
                   h_numsub(r, held_names[0], strlen(held_names[0])) == 1,
               3000);
    h_sleep_ms(300); /* all ten asleep */
    for (i = 0; i < NWAIT; i++)
        assert_false(h_actor_done(waiters[i]));
    before = client_count(r);

    t_close = h_now_ms();
    dt = h_timed_close(c, 10000);
    for (i = 0; i < NWAIT; i++) {
        waiting_rc[i] = (int)h_actor_wait(waiters[i], 2000);
        H_ASSERT_RC(waiting_rc[i], RLOCK_ECLOSED);
    }
    /* Held locks are not released by close: still ours, no longer renewed. */
    for (i = 0; i < NHELD; i++) {
        H_ASSERT_LOCK_IS(r, held_names[i], id, 1);
        pttl[i] = h_pttl(r, held_names[i], strlen(held_names[i]));
        H_ASSERT_RC(h_actor_call(holders[i], h_op_unlock, held[i]), RLOCK_ECLOSED);
    }
    H_WAIT_FOR(h_numsub(r, w1, strlen(w1)) == 0 && h_numsub(r, w2, strlen(w2)) == 0 &&
                   h_numsub(r, held_names[0], strlen(held_names[0])) == 0,
               2000);
    H_WAIT_FOR(client_count(r) == baseline, 2000);
    for (i = 0; i < NHELD; i++) {
        long long prev = pttl[i];
        while (h_exists(r, held_names[i], strlen(held_names[i]))) {
            long long p = h_pttl(r, held_names[i], strlen(held_names[i]));
            if (p > prev + 5)
                H_FAIL("lock %d renewed after close (PTTL %lld -> %lld)", i, prev, p);
            prev = p >= 0 ? p : prev;
            if (h_now_ms() - t_close > wd + H_MS(1000))
                H_FAIL("lock %d still there %lld ms after close", i, h_now_ms() - t_close);
            h_sleep_ms(20);
        }
    }
    expired_after = h_now_ms() - t_close;
    printf("scenario 10: close with %d held locks and %d waiters took %lld ms; all waiters "
           "got RLOCK_ECLOSED; held locks kept (PTTL %lld/%lld/%lld ms at close), not renewed, "
           "all expired %lld ms after close (WD %lld); server connections %d -> %d\n",
           NHELD, NWAIT, dt, pttl[0], pttl[1], pttl[2], expired_after, wd, before,
           client_count(r));
    H_ASSERT_BETWEEN(dt, 0, H_MS(1000));

    /* Calls after close. */
    H_ASSERT_RC(rlock_lock(wl1), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_try_lock(wl1, 100, 100), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_is_locked(wl1), RLOCK_ECLOSED);
    {
        rlock *x = NULL;
        H_ASSERT_RC(rlock_get(c, "after-close", &x), RLOCK_ECLOSED);
        assert_null(x);
    }
    assert_string_equal(rlock_client_id(c), id);

    for (i = 0; i < NWAIT; i++)
        h_actor_stop(waiters[i]);
    for (i = 0; i < NHELD; i++) {
        h_actor_stop(holders[i]);
        rlock_free(held[i]);
    }
    rlock_free(wl1);
    rlock_free(wl2);
    rlock_free(own); /* the last handle: the client's memory goes now */
    H_ASSERT_RC(rlock_unlock(ow1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(ow2), RLOCK_OK);
    rlock_free(ow1);
    rlock_free(ow2);
    rlock_client_close(other);
    redisFree(r);
}

#define NCALLS 6

static void test_close_redis_stopped(void **state) {
    const char *name = h_unique_name("close-stopped"), *wname = h_unique_name("close-wd");
    rlock_config cfg;
    rlock_client *c;
    rlock *l, *wl;
    h_actor *calls[NCALLS];
    long long dt;
    int i;
    (void)state;

    h_config(&cfg);
    cfg.url = h_server_url(h_srv);
    cfg.command_timeout_ms = (int)H_MS(20000); /* the calls would block 20 s */
    cfg.watchdog_timeout_ms = 300;             /* a renewal round every 100 ms */
    c = h_open_config(&cfg);
    l = h_get(c, name);
    wl = h_get(c, wname);
    H_ASSERT_RC(rlock_lock(wl), RLOCK_OK);

    h_server_pause(h_srv);
    for (i = 0; i < NCALLS; i++) {
        calls[i] = h_actor_start();
        h_actor_post(calls[i], i == 0 ? h_op_lock : op_is_locked, l);
    }
    h_sleep_ms(300); /* the calls and a renewal round are waiting for replies */
    for (i = 0; i < NCALLS; i++)
        assert_false(h_actor_done(calls[i]));
    dt = h_timed_close(c, 10000);
    for (i = 0; i < NCALLS; i++)
        H_ASSERT_RC((int)h_actor_wait(calls[i], 2000), RLOCK_ECLOSED);
    h_server_resume(h_srv);
    printf("scenario 10b: close with Redis stopped, %d calls and a renewal round in flight "
           "(command timeout %lld ms): %lld ms; the calls returned RLOCK_ECLOSED\n",
           NCALLS, H_MS(20000), dt);
    H_ASSERT_BETWEEN(dt, 0, H_MS(1000));
    for (i = 0; i < NCALLS; i++)
        h_actor_stop(calls[i]);
    rlock_free(l);
    rlock_free(wl);
}

static void test_close_during_retries(void **state) {
    const char *name = h_unique_name("close-retry");
    rlock_config cfg;
    rlock_client *c;
    rlock *l;
    h_actor *calls[NCALLS];
    long long dt;
    int i;
    (void)state;

    h_config(&cfg);
    cfg.url = h_server_url(h_srv);
    cfg.retry_attempts = 10;
    cfg.retry_interval_ms = 3000;
    c = h_open_config(&cfg);
    l = h_get(c, name);
    h_server_kill(h_srv);
    for (i = 0; i < NCALLS; i++) {
        calls[i] = h_actor_start();
        h_actor_post(calls[i], i == 0 ? h_op_lock : op_is_locked, l);
    }
    h_sleep_ms(500); /* connection refused, now sleeping before a re-send */
    for (i = 0; i < NCALLS; i++)
        assert_false(h_actor_done(calls[i]));
    dt = h_timed_close(c, 10000);
    for (i = 0; i < NCALLS; i++)
        H_ASSERT_RC((int)h_actor_wait(calls[i], 2000), RLOCK_ECLOSED);
    printf("scenario 10c: close with Redis down and %d calls between re-sends (retry "
           "interval 3 s): %lld ms; the calls returned RLOCK_ECLOSED\n", NCALLS, dt);
    H_ASSERT_BETWEEN(dt, 0, H_MS(1000));
    for (i = 0; i < NCALLS; i++)
        h_actor_stop(calls[i]);
    rlock_free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SERVER_TEST(test_close_under_load),
        H_SERVER_TEST(test_close_redis_stopped),
        H_SERVER_TEST(test_close_during_retries),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER"))
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
