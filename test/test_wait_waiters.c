/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_wait_waiters.c - many waiters: no thundering herd when a lock is
 * passed along 20 waiting threads (with and without local hand-offs), and
 * blocked waiters ended by rlock_client_close or pthread_cancel.
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

/* ---- no thundering herd ---------------------------------------------- */

enum { HERD = 20 };

struct herd {
    rlock *lock;
    atomic_int done;
    atomic_int inside;
    atomic_int overlap;
    atomic_int order;
    int rc[HERD];
    int unlock_rc[HERD];
    int turn[HERD];
};

struct herd_arg {
    struct herd *h;
    int i;
};

static void *herd_thread(void *p) {
    struct herd_arg *a = p;
    struct herd *h = a->h;
    int rc = rlock_lock(h->lock);
    h->rc[a->i] = rc;
    if (rc == RLOCK_OK) {
        if (atomic_fetch_add(&h->inside, 1) != 0)
            atomic_fetch_add(&h->overlap, 1);
        h->turn[a->i] = atomic_fetch_add(&h->order, 1);
        h_sleep_ms(2);
        atomic_fetch_sub(&h->inside, 1);
        h->unlock_rc[a->i] = rlock_unlock(h->lock);
    }
    atomic_fetch_add(&h->done, 1);
    return NULL;
}

/*
 * HERD threads of one client wait on a held lock; it is then passed along
 * all of them. With local_handoffs 0 every unlock releases and publishes;
 * otherwise most unlocks hand the lock straight to the next sleeper.
 */
static void run_herd(int local_handoffs) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.watchdog_timeout_ms = 30000;
    cfg.local_handoffs = local_handoffs;
    rlock_client *c = h_open_config(&cfg);
    const char *name = h_unique_name("herd");
    redisContext *r = h_redis();
    /* static: a failed test may leave the threads running with them. */
    static struct herd h;
    static struct herd_arg args[HERD];
    static pthread_t th[HERD];
    long long base0, base1, end, pub0, pubs;
    int i;

    memset(&h, 0, sizeof h);
    h.lock = h_get(c, name);
    H_ASSERT_RC(rlock_lock(h.lock), RLOCK_OK);
    base0 = h_script_calls(r);
    for (i = 0; i < HERD; i++) {
        args[i].h = &h;
        args[i].i = i;
        assert_int_equal(pthread_create(&th[i], NULL, herd_thread, &args[i]), 0);
    }
    H_WAIT_FOR(h_script_calls(r) - base0 >= HERD, 5000);
    base1 = h_scripts_quiet(r, 300, 10000);
    assert_int_equal(atomic_load(&h.done), 0);
    print_message("      local_handoffs %d: %d waiters made %lld script calls before the hand-offs\n",
                  local_handoffs, HERD, base1 - base0);

    pub0 = h_commandstat_calls(r, "publish");
    H_ASSERT_RC(rlock_unlock(h.lock), RLOCK_OK);
    H_WAIT_FOR(atomic_load(&h.done) == HERD, 30000);
    for (i = 0; i < HERD; i++)
        pthread_join(th[i], NULL);
    end = h_script_calls(r);
    pubs = h_commandstat_calls(r, "publish") - pub0;
    for (i = 0; i < HERD; i++) {
        H_ASSERT_RC(h.rc[i], RLOCK_OK);
        H_ASSERT_RC(h.unlock_rc[i], RLOCK_OK);
    }
    assert_int_equal(atomic_load(&h.overlap), 0);
    assert_int_equal(atomic_load(&h.order), HERD);
    print_message("      %d hand-offs: %lld script calls (%.2f per hand-off), %lld unlock messages\n",
                  HERD, end - base1, (double)(end - base1 - 1) / HERD, pubs);
    if (local_handoffs == 0) {
        /* Each hand-off: the winner's acquire and its unlock, plus a little. A
         * herd (every waiter retrying on every unlock) would be ~HERD/2 more
         * per hand-off. Every unlock publishes. */
        H_ASSERT_BETWEEN(end - base1, 2 * HERD + 1, 3 * HERD + 1);
        assert_int_equal(pubs, HERD + 1);
    } else {
        /* A hand-off is one TRANSFER; every (local_handoffs + 1)-th unlock
         * releases and publishes instead, and one woken waiter acquires. */
        long long releases = HERD / (local_handoffs + 1) + 1;
        H_ASSERT_BETWEEN(end - base1, HERD + 1, HERD + 1 + 2 * releases);
        H_ASSERT_BETWEEN(pubs, 1, releases + 1);
    }
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 0, 2000);

    rlock_free(h.lock);
    redisFree(r);
    rlock_client_close(c);
}

static void test_no_herd(void **state) {
    (void)state;
    run_herd(0);
}

static void test_no_herd_handoff(void **state) {
    (void)state;
    run_herd(4);
}

/* ---- close and cancellation ------------------------------------------ */

struct blocked {
    rlock *lock;
    int use_try;
    int rc;
    atomic_int done;
};

static void *blocked_thread(void *p) {
    struct blocked *b = p;
    b->rc = b->use_try ? rlock_try_lock(b->lock, H_MS(60000), -1) : rlock_lock(b->lock);
    atomic_store(&b->done, 1);
    return NULL;
}

static void test_close_wakes_waiters(void **state) {
    enum { N = 6 };
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("closewake"), *name2 = h_unique_name("closewake2");
    redisContext *r = h_redis();
    static struct blocked b[N]; /* may outlive a failed test */
    static pthread_t th[N];
    rlock *handles[2];
    long long t0, dt;
    int i;
    (void)state;

    handles[0] = h_get(c, name);
    handles[1] = h_get(c, name2);
    h_foreign_lock(r, name, 30000);
    h_foreign_lock(r, name2, 30000);
    for (i = 0; i < N; i++) {
        b[i].lock = handles[i % 2];
        b[i].use_try = i >= N / 2;
        b[i].rc = 12345;
        atomic_init(&b[i].done, 0);
        assert_int_equal(pthread_create(&th[i], NULL, blocked_thread, &b[i]), 0);
    }
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) >= 1 && h_numsub(r, name2, strlen(name2)) >= 1,
               2000);
    h_scripts_quiet(r, 200, 5000);
    for (i = 0; i < N; i++)
        assert_int_equal(atomic_load(&b[i].done), 0);

    t0 = h_now_ms();
    rlock_client_close(c);
    dt = h_now_ms() - t0;
    print_message("      close with %d blocked waiters took %lld ms\n", N, dt);
    H_ASSERT_BETWEEN(dt, 0, H_MS(1000));
    /* Close returns only after every call in flight has returned; the thread
     * still needs a moment to store the result (its lock's TTL is 30 s). */
    for (i = 0; i < N; i++) {
        if (!H_POLL_UNTIL(atomic_load(&b[i].done), 500))
            fail_msg("waiter %d still blocked after rlock_client_close() returned", i);
        pthread_join(th[i], NULL);
        H_ASSERT_RC(b[i].rc, RLOCK_ECLOSED);
    }
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 0 && h_numsub(r, name2, strlen(name2)) == 0,
               2000);
    /* The foreign holds are untouched. */
    assert_int_equal(h_cmd_int(r, "HLEN %s", name), 1);
    assert_int_equal(h_cmd_int(r, "HLEN %s", name2), 1);
    h_cmd_ok(r, "DEL %s %s", name, name2);
    rlock_free(handles[0]);
    rlock_free(handles[1]);
    redisFree(r);
}

static void *cancel_thread(void *p) {
    struct blocked *b = p;
    b->rc = b->use_try ? rlock_try_lock(b->lock, -1, -1) : rlock_lock(b->lock);
    atomic_store(&b->done, 1);
    return NULL;
}

static void cancel_waiter(int use_try) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("cancel");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    static struct blocked b; /* may outlive a failed test */
    pthread_t th;
    void *ret = NULL;
    struct timespec ts;
    long long t_end;
    int rc;

    h_foreign_lock(r, name, 30000);
    b.lock = l;
    b.use_try = use_try;
    b.rc = 12345;
    atomic_init(&b.done, 0);
    assert_int_equal(pthread_create(&th, NULL, cancel_thread, &b), 0);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) >= 1, 2000);
    h_scripts_quiet(r, 100, 5000);
    assert_int_equal(pthread_cancel(th), 0);
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(h_scaled(5000) / 1000);
    rc = pthread_timedjoin_np(th, &ret, &ts);
    if (rc == ETIMEDOUT)
        fail_msg("a cancelled waiter did not end within 5 s");
    assert_int_equal(rc, 0);
    assert_ptr_equal(ret, PTHREAD_CANCELED);
    assert_int_equal(atomic_load(&b.done), 0);

    /* No subscription left behind; when the lock is released, nobody
     * (no leftover waiter) takes it. */
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 0, 2000);
    h_foreign_unlock(r, name);
    t_end = h_now_ms() + H_MS(300);
    while (h_now_ms() < t_end) {
        assert_int_equal(h_exists(r, name, strlen(name)), 0);
        h_sleep_ms(10);
    }
    /* The client still works. */
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

static void test_cancel_waiter(void **state) {
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    /* ASan reports a false stack-buffer-underflow when a cancelled thread
     * unwinds through pthread_cleanup_push in C (google/sanitizers#1399). */
    print_message("      skipped under ASan (false positive on pthread_cancel unwinding)\n");
    skip();
#endif
    cancel_waiter(0);
    cancel_waiter(1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_herd),
        cmocka_unit_test(test_no_herd_handoff),
        cmocka_unit_test(test_close_wakes_waiters),
        cmocka_unit_test(test_cancel_waiter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
