/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cancel.c - pthread_cancel() and rlock (the header: "the wait is a
 * cancellation point ... a cancelled waiter leaves no subscription, waiter
 * entry, memory or lock behind"; every other part of every call runs with
 * cancellation disabled).
 *
 * test_wait_waiters.c already cancels one waiter in rlock_lock and in rlock_try_lock.
 * This file covers what is around it:
 *   - the race between a cancel and the lock being released: 40 rounds with the
 *     cancel sent a little before, at, or after the release. Each waiter ends
 *     either cancelled (holding nothing) or with the lock acquired and released
 *     normally; no subscription, hold or waiter is left; the client keeps working
 *     and closes at once;
 *   - cancelling some of the waiters of a channel: the others still get the
 *     unlock messages (the cancelled ones take no permit with them) and acquire
 *     in turn, far sooner than the holder's TTL;
 *   - cancelling a thread that is inside a call which is not a wait (a query
 *     blocked on a stalled Redis): the call runs to its end and returns, and the
 *     thread is cancelled at its own next cancellation point; the connection is
 *     given back (close does not hang).
 * Leaks are for `make valgrind` to find. The first two unwind through
 * pthread_cleanup_push frames of the library and are skipped under ASan, as in
 * test_wait_waiters.c (google/sanitizers#1399: a false stack-buffer-underflow).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNDER_ASAN()                                                      \
    do {                                                                       \
        print_message("      skipped under ASan (false positive on pthread_cancel "  \
                      "unwinding through pthread_cleanup_push)\n");           \
        skip();                                                                \
    } while (0)
#else
#define SKIP_UNDER_ASAN() ((void)0)
#endif

/* Joins th within timeout_ms (scaled); fails if it does not end. */
static void *join_within(pthread_t th, long long timeout_ms) {
    long long ms = h_scaled(timeout_ms);
    struct timespec ts = h_timespec_in(CLOCK_REALTIME, ms);
    void *ret = NULL;
    int rc = pthread_timedjoin_np(th, &ret, &ts);
    if (rc == ETIMEDOUT)
        H_FAIL("thread did not end within %lld ms", ms);
    assert_int_equal(rc, 0);
    return ret;
}


struct waiter {
    rlock *lock;
    int use_try;
    long long hold_ms;
    int acquired;      /* set once the lock is held (then released) */
    int returned;      /* the rlock call returned (any status) */
    int rc;
    long long acquired_ms;
};

static void *waiter_main(void *p) {
    struct waiter *w = p;
    int rc = w->use_try ? rlock_try_lock(w->lock, 30000, RLOCK_LEASE_WATCHDOG)
                        : rlock_lock(w->lock);
    __atomic_store_n(&w->rc, rc, __ATOMIC_SEQ_CST);
    __atomic_store_n(&w->returned, 1, __ATOMIC_SEQ_CST);
    if (rc == RLOCK_OK) {
        w->acquired_ms = h_now_ms();
        if (w->hold_ms > 0) {
            /* Not a cancellation point: sleep with cancellation disabled. */
            int old;
            pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
            h_sleep_ms(w->hold_ms);
            pthread_setcancelstate(old, &old);
        }
        rc = rlock_unlock(w->lock); /* runs with cancellation disabled */
        __atomic_store_n(&w->acquired, rc == RLOCK_OK ? 1 : -1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

static void test_cancel_release_race(void **state) {
    rlock_client *c;
    redisContext *r;
    int round, cancelled = 0, acquired = 0;
    long long dt;
    (void)state;
    SKIP_UNDER_ASAN();
    c = h_open(30000, 0);
    r = h_redis();

    for (round = 0; round < 40; round++) {
        const char *name = h_unique_name("cancel-race");
        rlock *l = h_get(c, name);
        struct waiter w = {l, round % 2, 0, 0, 0, 0, 0};
        pthread_t th;
        void *ret;
        int offset_us = (round % 8) * 150 - 300; /* cancel 300 us before .. 750 us after */
        long long t_end;

        h_foreign_lock(r, name, 30000);
        assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
        H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 2000);
        h_sleep_ms(20);
        if (offset_us < 0) {
            pthread_cancel(th);
            {
                struct timespec ts = {0, (long)(-offset_us) * 1000L};
                nanosleep(&ts, NULL);
            }
            h_foreign_unlock(r, name);
        } else {
            struct timespec ts = {0, (long)offset_us * 1000L};
            h_foreign_unlock(r, name);
            nanosleep(&ts, NULL);
            pthread_cancel(th);
        }
        ret = join_within(th, 5000);
        if (ret == PTHREAD_CANCELED) {
            cancelled++;
            /* Cancelled while waiting: the call never returned, nothing held. */
            assert_int_equal(w.returned, 0);
        } else {
            acquired++;
            H_ASSERT_RC(w.rc, RLOCK_OK);
            assert_int_equal(w.acquired, 1);
        }
        /* Nothing left: no subscription, no field, and nobody takes it later. */
        H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 0, 2000);
        t_end = h_now_ms() + 50;
        while (h_now_ms() < t_end) {
            assert_int_equal(h_exists(r, name, strlen(name)), 0);
            h_sleep_ms(5);
        }
        /* The client still works on this lock, from this thread. */
        H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_OK);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
        rlock_free(l);
    }
    dt = h_timed_close(c, 5000);
    print_message("      40 cancel/release races: %d cancelled while waiting, %d acquired "
                  "and released; close afterwards took %lld ms\n", cancelled, acquired, dt);
    assert_int_equal(cancelled + acquired, 40);
    assert_true(cancelled > 0);
    H_ASSERT_BETWEEN(dt, 0, H_MS(1000));
    redisFree(r);
}

#define NW 6

static void test_cancel_some_waiters(void **state) {
    rlock_client *c;
    redisContext *r;
    const char *name = h_unique_name("cancel-some");
    rlock *l;
    struct waiter w[NW];
    pthread_t th[NW];
    long long t_release, last = 0, dt;
    int i;
    (void)state;
    SKIP_UNDER_ASAN();
    c = h_open(30000, 0);
    r = h_redis();
    l = h_get(c, name);

    h_foreign_lock(r, name, 30000);
    for (i = 0; i < NW; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].lock = l;
        w[i].use_try = i % 2;
        w[i].hold_ms = 20;
        assert_int_equal(pthread_create(&th[i], NULL, waiter_main, &w[i]), 0);
    }
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 1, 2000);
    h_sleep_ms(200); /* all asleep on the channel */
    /* Cancel half of them. */
    for (i = 0; i < NW; i += 2)
        pthread_cancel(th[i]);
    for (i = 0; i < NW; i += 2)
        assert_ptr_equal(join_within(th[i], 5000), PTHREAD_CANCELED);
    /* The others still wait, subscribed. */
    assert_int_equal(h_numsub(r, name, strlen(name)), 1);
    for (i = 1; i < NW; i += 2)
        assert_int_equal(__atomic_load_n(&w[i].returned, __ATOMIC_SEQ_CST), 0);

    t_release = h_now_ms();
    h_foreign_unlock(r, name);
    for (i = 1; i < NW; i += 2) {
        assert_ptr_equal(join_within(th[i], 10000), NULL);
        H_ASSERT_RC(w[i].rc, RLOCK_OK);
        assert_int_equal(w[i].acquired, 1);
        if (w[i].acquired_ms > last)
            last = w[i].acquired_ms;
    }
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 0, 2000);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    dt = h_timed_close(c, 5000);
    print_message("      %d of %d waiters cancelled; the other %d acquired in turn within "
                  "%lld ms of the release (holder TTL was 30 s); close took %lld ms\n",
                  NW / 2, NW, NW - NW / 2, last - t_release, dt);
    /* Each hand-off far sooner than the 30 s a lost wake-up would cost. */
    H_ASSERT_BETWEEN(last - t_release, 0, H_MS(3000));
    H_ASSERT_BETWEEN(dt, 0, H_MS(1000));
    redisFree(r);
}

struct query {
    rlock *lock;
    int returned;
    int rc;
};

static void *query_main(void *p) {
    struct query *q = p;
    int rc = rlock_is_locked(q->lock);
    __atomic_store_n(&q->rc, rc, __ATOMIC_SEQ_CST);
    __atomic_store_n(&q->returned, 1, __ATOMIC_SEQ_CST);
    for (;;)
        pthread_testcancel(); /* cancelled here, after the call */
    return NULL;
}

static void test_cancel_inside_call(void **state) {
    h_server *s = h_server_start();
    rlock_config cfg;
    rlock_client *c;
    rlock *l;
    struct query q;
    pthread_t th;
    long long t0, dt, dt_close;
    (void)state;

    h_config(&cfg);
    cfg.url = h_server_url(s);
    cfg.command_timeout_ms = (int)H_MS(500);
    cfg.retry_attempts = 0;
    c = h_open_config(&cfg);
    l = h_get(c, h_unique_name("cancel-call"));
    memset(&q, 0, sizeof q);
    q.lock = l;

    h_server_pause(s);
    t0 = h_now_ms();
    assert_int_equal(pthread_create(&th, NULL, query_main, &q), 0);
    h_sleep_ms(100); /* blocked in the read (recv() is a cancellation point) */
    pthread_cancel(th);
    assert_ptr_equal(join_within(th, 5000), PTHREAD_CANCELED);
    dt = h_now_ms() - t0;
    h_server_resume(s);
    /* The call ran to its end (a timeout) before the thread was cancelled. */
    assert_int_equal(q.returned, 1);
    H_ASSERT_RC(q.rc, RLOCK_EIO);
    /* The client works, and nothing is left in flight. */
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    dt_close = h_timed_close(c, 5000);
    print_message("      cancel during a query blocked on a stopped Redis: the call "
                  "returned %s, the thread ended after %lld ms; close took %lld ms\n",
                  rlock_status_name(q.rc), dt, dt_close);
    H_ASSERT_BETWEEN(dt_close, 0, H_MS(1000));
    h_server_stop(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cancel_release_race),
        cmocka_unit_test(test_cancel_some_waiters),
        cmocka_unit_test(test_cancel_inside_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
