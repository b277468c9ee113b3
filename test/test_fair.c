/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fair.c - the fair lock (rlock_get_fair, Redisson's getFairLock):
 * Redisson's layout (hash, queue list, timeout zset), reentrancy, FIFO order
 * of waiters across two clients, a waiter that gives up leaving the queue,
 * a dead waiter at the head (injected, or a SIGKILLed process) holding the
 * queue no longer than its deadline, a cancelled waiter leaving it,
 * try_lock(0) never queueing, exact mutual exclusion under contention, and
 * bad arguments.
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
#include <sys/time.h>

#include "harness.h"

#if defined(__SANITIZE_ADDRESS__)
/* As in test_cancel.c: google/sanitizers#1399, a false stack-buffer-underflow
 * when pthread_cancel unwinds through the library's pthread_cleanup_push. */
#define SKIP_UNDER_ASAN()                                                                          \
    do {                                                                                           \
        print_message("      skipped under ASan (false positive on pthread_cancel unwinding)\n"); \
        skip();                                                                                    \
    } while (0)
#else
#define SKIP_UNDER_ASAN() ((void)0)
#endif

static rlock *fair(rlock_client *c, const char *name) {
    rlock *l = NULL;
    H_ASSERT_RC(rlock_get_fair(c, name, &l), RLOCK_OK);
    return l;
}

static long long queue_len(redisContext *r, const char *name) {
    return h_cmd_int(r, "LLEN redisson_lock_queue:{%s}", name);
}

static long long timeouts_len(redisContext *r, const char *name) {
    return h_cmd_int(r, "ZCARD redisson_lock_timeout:{%s}", name);
}

static long long wall_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* Waits (scaled) until name's queue has n waiters; fails the test otherwise. */
static void await_queue(redisContext *r, const char *name, long long n) {
    long long until = h_now_ms() + H_MS(5000);
    while (queue_len(r, name) != n && h_now_ms() < until)
        h_sleep_ms(2);
    assert_int_equal(queue_len(r, name), n);
}

static void test_layout_and_reentrancy(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("fair-reent");
    rlock *l = fair(c, name);
    redisContext *r = h_redis();
    const char *id = rlock_client_id(c);
    (void)state;

    for (int i = 1; i <= 3; i++) {
        H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
        H_ASSERT_LOCK_IS(r, name, id, i);
        H_ASSERT_RC(rlock_hold_count(l), i);
    }
    assert_true(h_pttl(r, name, strlen(name)) > 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);
    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, id, 4);
    for (int i = 3; i >= 0; i--) {
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
        H_ASSERT_RC(rlock_hold_count(l), i);
    }
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(queue_len(r, name), 0);
    assert_int_equal(timeouts_len(r, name), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- FIFO across clients -------------------------------------------------- */

#define FIFO_WAITERS 6

typedef struct fifo_run {
    atomic_int next;               /* acquisitions so far */
    int order[FIFO_WAITERS];       /* order[k] = the waiter that acquired k-th */
} fifo_run;

typedef struct fifo_waiter {
    fifo_run *run;
    rlock *lock;
    int index;
    int rc;
} fifo_waiter;

static void *fifo_main(void *arg) {
    fifo_waiter *w = arg;
    w->rc = rlock_lock(w->lock);
    if (w->rc != RLOCK_OK)
        return NULL;
    w->run->order[atomic_fetch_add(&w->run->next, 1)] = w->index;
    h_sleep_ms(5);
    w->rc = rlock_unlock(w->lock);
    return NULL;
}

/* Waiters of two clients, queued one by one, acquire in exactly that order. */
static void test_fifo_two_clients(void **state) {
    rlock_client *a = h_open(30000, 0), *b = h_open(30000, 0);
    const char *name = h_unique_name("fair-fifo");
    rlock *holder = fair(a, name), *la = fair(a, name), *lb = fair(b, name);
    redisContext *r = h_redis();
    fifo_run run = {.next = 0};
    fifo_waiter w[FIFO_WAITERS];
    pthread_t th[FIFO_WAITERS];
    (void)state;

    H_ASSERT_RC(rlock_lock(holder), RLOCK_OK);
    for (int i = 0; i < FIFO_WAITERS; i++) {
        w[i] = (fifo_waiter){.run = &run, .lock = i % 2 ? lb : la, .index = i};
        assert_int_equal(pthread_create(&th[i], NULL, fifo_main, &w[i]), 0);
        await_queue(r, name, i + 1);
    }
    H_ASSERT_RC(rlock_unlock(holder), RLOCK_OK);
    for (int i = 0; i < FIFO_WAITERS; i++) {
        pthread_join(th[i], NULL);
        H_ASSERT_RC(w[i].rc, RLOCK_OK);
    }
    assert_int_equal(atomic_load(&run.next), FIFO_WAITERS);
    for (int k = 0; k < FIFO_WAITERS; k++)
        assert_int_equal(run.order[k], k);
    assert_int_equal(queue_len(r, name), 0);
    assert_int_equal(timeouts_len(r, name), 0);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rlock_free(holder);
    rlock_free(la);
    rlock_free(lb);
    redisFree(r);
    rlock_client_close(a);
    rlock_client_close(b);
}

/* ---- waiters that give up ---------------------------------------------------- */

/* A try_lock whose wait ends leaves the queue and the zset; the waiter behind moves up. */
static void test_try_lock_timeout_leaves_queue(void **state) {
    rlock_client *a = h_open(30000, 0), *b = h_open(30000, 0);
    const char *name = h_unique_name("fair-giveup");
    rlock *holder = fair(a, name), *quitter = fair(b, name), *patient = fair(a, name);
    redisContext *r = h_redis();
    struct h_timed_try quit = {.lock = quitter, .wait_ms = H_MS(400), .lease_ms = RLOCK_LEASE_WATCHDOG};
    struct h_timed_try wait = {.lock = patient, .wait_ms = H_MS(20000), .lease_ms = 10000};
    pthread_t tq, tw;
    (void)state;

    H_ASSERT_RC(rlock_lock(holder), RLOCK_OK);
    assert_int_equal(pthread_create(&tq, NULL, h_timed_try_main, &quit), 0);
    await_queue(r, name, 1);
    assert_int_equal(pthread_create(&tw, NULL, h_timed_try_main, &wait), 0);
    await_queue(r, name, 2);
    pthread_join(tq, NULL);
    H_ASSERT_RC(quit.rc, RLOCK_BUSY);
    /* Gone from both: only the patient waiter is left. */
    assert_int_equal(queue_len(r, name), 1);
    assert_int_equal(timeouts_len(r, name), 1);
    {
        char *head = h_cmd_str(r, "LINDEX redisson_lock_queue:{%s} 0", name);
        assert_non_null(head);
        assert_memory_equal(head, rlock_client_id(a), 36);
        free(head);
    }
    /* The patient waiter gets the lock promptly at the unlock. */
    long long unlocked = h_now_ms();
    H_ASSERT_RC(rlock_unlock(holder), RLOCK_OK);
    pthread_join(tw, NULL);
    H_ASSERT_RC(wait.rc, RLOCK_OK);
    assert_true(h_now_ms() - unlocked < H_MS(1000));
    assert_int_equal(queue_len(r, name), 0);
    assert_int_equal(timeouts_len(r, name), 0);
    h_cmd_ok(r, "DEL %s", name);

    rlock_free(holder);
    rlock_free(quitter);
    rlock_free(patient);
    redisFree(r);
    rlock_client_close(a);
    rlock_client_close(b);
}

static void *lock_main(void *lock) {
    rlock_lock(lock);
    return NULL; /* never reached: cancelled while it waits */
}

/* A waiter cancelled while it waits leaves the queue; the one behind it is next. */
static void test_cancelled_waiter_leaves(void **state) {
    SKIP_UNDER_ASAN();
    rlock_client *a = h_open(30000, 0), *b = h_open(30000, 0);
    const char *name = h_unique_name("fair-cancel");
    rlock *holder = fair(a, name), *cancelled = fair(b, name), *next = fair(a, name);
    redisContext *r = h_redis();
    struct h_timed_try t = {.lock = next, .wait_ms = H_MS(20000), .lease_ms = 10000};
    pthread_t tc, tn;
    void *ret = NULL;
    (void)state;

    H_ASSERT_RC(rlock_lock(holder), RLOCK_OK);
    assert_int_equal(pthread_create(&tc, NULL, lock_main, cancelled), 0);
    await_queue(r, name, 1);
    assert_int_equal(pthread_create(&tn, NULL, h_timed_try_main, &t), 0);
    await_queue(r, name, 2);
    h_sleep_ms(50); /* asleep */
    pthread_cancel(tc);
    pthread_join(tc, &ret);
    assert_true(ret == PTHREAD_CANCELED);
    assert_int_equal(queue_len(r, name), 1);
    assert_int_equal(timeouts_len(r, name), 1);
    long long unlocked = h_now_ms();
    H_ASSERT_RC(rlock_unlock(holder), RLOCK_OK);
    pthread_join(tn, NULL);
    H_ASSERT_RC(t.rc, RLOCK_OK);
    assert_true(h_now_ms() - unlocked < H_MS(1000));
    H_ASSERT_RC(rlock_force_unlock(next), 1); /* held by the finished thread */

    rlock_free(holder);
    rlock_free(cancelled);
    rlock_free(next);
    redisFree(r);
    assert_true(h_timed_close(b, 5000) < H_MS(2000));
    rlock_client_close(a);
}

/* try_lock(0) never queues, and does not take a free lock from a queued waiter. */
static void test_try_lock_zero_never_queues(void **state) {
    rlock_client *a = h_open(30000, 0), *b = h_open(30000, 0);
    const char *name = h_unique_name("fair-nowait");
    rlock *la = fair(a, name), *lb = fair(b, name);
    redisContext *r = h_redis();
    (void)state;

    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(lb, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    assert_int_equal(queue_len(r, name), 0);
    assert_int_equal(timeouts_len(r, name), 0);
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);

    /* A (pretend) waiter queued with a live deadline: the free lock is its. */
    h_cmd_ok(r, "RPUSH redisson_lock_queue:{%s} 00000000-0000-0000-0000-000000000000:7", name);
    h_cmd_ok(r, "ZADD redisson_lock_timeout:{%s} %lld 00000000-0000-0000-0000-000000000000:7",
             name, wall_ms() + 60000);
    H_ASSERT_RC(rlock_try_lock(lb, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(queue_len(r, name), 1);
    h_cmd_ok(r, "DEL redisson_lock_queue:{%s} redisson_lock_timeout:{%s}", name, name);
    H_ASSERT_RC(rlock_try_lock(lb, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(lb), RLOCK_OK);

    rlock_free(la);
    rlock_free(lb);
    redisFree(r);
    rlock_client_close(a);
    rlock_client_close(b);
}

/*
 * A dead waiter at the head (a process that died while queued: its entry is
 * what is left) holds a free lock back until its deadline, and no longer: the
 * live waiter behind it sleeps until then, not a poll interval or a TTL more.
 */
static void test_dead_head_until_deadline(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("fair-dead");
    rlock *l = fair(c, name);
    redisContext *r = h_redis();
    long long dead_for = H_MS(2500); /* past the 1 s poll bound of a free lock */
    (void)state;

    h_cmd_ok(r, "RPUSH redisson_lock_queue:{%s} 00000000-0000-0000-0000-000000000000:9", name);
    h_cmd_ok(r, "ZADD redisson_lock_timeout:{%s} %lld 00000000-0000-0000-0000-000000000000:9",
             name, wall_ms() + dead_for);
    long long start = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(l, H_MS(10000), RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    long long took = h_now_ms() - start;
    printf("acquired %lld ms after a dead head due in %lld ms\n", took, dead_for);
    H_ASSERT_BETWEEN(took, dead_for - 50, dead_for + H_MS(500));
    assert_int_equal(queue_len(r, name), 0);
    assert_int_equal(timeouts_len(r, name), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/*
 * A dead waiter heads the queue when the holder unlocks: the unlock message
 * goes to it, and nobody else hears it. The live waiter behind it comes back
 * at the dead one's deadline, not at the end of the holder's (30 s) lease.
 */
static void test_dead_head_at_unlock(void **state) {
    rlock_client *a = h_open(30000, 0), *b = h_open(30000, 0);
    const char *name = h_unique_name("fair-deadunlock");
    rlock *holder = fair(a, name), *waiter = fair(b, name);
    redisContext *r = h_redis();
    long long dead_for = H_MS(1500);
    struct h_timed_try t = {.lock = waiter, .wait_ms = H_MS(10000), .lease_ms = 10000};
    pthread_t th;
    (void)state;

    H_ASSERT_RC(rlock_lock(holder), RLOCK_OK);
    long long start = h_now_ms();
    h_cmd_ok(r, "RPUSH redisson_lock_queue:{%s} 00000000-0000-0000-0000-000000000000:3", name);
    h_cmd_ok(r, "ZADD redisson_lock_timeout:{%s} %lld 00000000-0000-0000-0000-000000000000:3",
             name, wall_ms() + dead_for);
    assert_int_equal(pthread_create(&th, NULL, h_timed_try_main, &t), 0);
    await_queue(r, name, 2);
    h_sleep_ms(200);
    H_ASSERT_RC(rlock_unlock(holder), RLOCK_OK); /* "0" to the dead head's channel */
    pthread_join(th, NULL);
    H_ASSERT_RC(t.rc, RLOCK_OK);
    long long took = h_now_ms() - start;
    printf("acquired %lld ms after a dead head due in %lld ms was told of the unlock\n", took,
           dead_for);
    H_ASSERT_BETWEEN(took, dead_for - 50, dead_for + H_MS(500));
    assert_int_equal(queue_len(r, name), 0);
    assert_int_equal(timeouts_len(r, name), 0);
    H_ASSERT_RC(rlock_force_unlock(waiter), 1); /* held by the finished thread */

    rlock_free(holder);
    rlock_free(waiter);
    redisFree(r);
    rlock_client_close(a);
    rlock_client_close(b);
}

/*
 * A waiter's deadline in the timeout set: the lock's PTTL + its wait
 * (fair_wait_timeout_ms for rlock_lock, wait_ms for rlock_try_lock) from
 * now, and the next waiter's is the previous one's + its wait (Redisson's
 * rule). A short fair_wait_timeout_ms shortens the stall a dead waiter
 * causes.
 */
static void test_deadlines(void **state) {
    rlock_config cfg;
    rlock_client *a = h_open(30000, 0), *b;
    h_config(&cfg);
    cfg.fair_wait_timeout_ms = 7000;
    b = h_open_config(&cfg);
    const char *name = h_unique_name("fair-deadline");
    rlock *holder = fair(a, name), *lw = fair(b, name), *tw = fair(b, name);
    redisContext *r = h_redis();
    struct h_timed_try t1 = {.lock = lw, .wait_ms = -1, .lease_ms = RLOCK_LEASE_WATCHDOG};
    struct h_timed_try t2 = {.lock = tw, .wait_ms = H_MS(20000), .lease_ms = RLOCK_LEASE_WATCHDOG};
    pthread_t th1, th2;
    (void)state;

    H_ASSERT_RC(rlock_lock_lease(holder, 3000), RLOCK_OK);
    long long before = wall_ms();
    assert_int_equal(pthread_create(&th1, NULL, h_timed_try_main, &t1), 0);
    await_queue(r, name, 1);
    assert_int_equal(pthread_create(&th2, NULL, h_timed_try_main, &t2), 0);
    await_queue(r, name, 2);
    long long after = wall_ms();
    char *first = h_cmd_str(r, "LINDEX redisson_lock_queue:{%s} 0", name);
    char *second = h_cmd_str(r, "LINDEX redisson_lock_queue:{%s} 1", name);
    char *s1 = h_cmd_str(r, "ZSCORE redisson_lock_timeout:{%s} %s", name, first);
    char *s2 = h_cmd_str(r, "ZSCORE redisson_lock_timeout:{%s} %s", name, second);
    long long d1 = atoll(s1), d2 = atoll(s2);
    printf("deadlines: now + %lld ms, then + %lld ms\n", d1 - before, d2 - d1);
    H_ASSERT_BETWEEN(d1, before + 7000, after + 3000 + 7000);
    assert_int_equal(d2 - d1, H_MS(20000));
    free(first);
    free(second);
    free(s1);
    free(s2);
    /* The holder's lease ends: the first gets it; forced away, the second. */
    pthread_join(th1, NULL);
    H_ASSERT_RC(t1.rc, RLOCK_OK);
    H_ASSERT_RC(rlock_force_unlock(lw), 1);
    pthread_join(th2, NULL);
    H_ASSERT_RC(t2.rc, RLOCK_OK);
    H_ASSERT_RC(rlock_force_unlock(tw), 1);
    assert_int_equal(queue_len(r, name), 0);
    assert_int_equal(timeouts_len(r, name), 0);

    rlock_free(holder);
    rlock_free(lw);
    rlock_free(tw);
    redisFree(r);
    rlock_client_close(a);
    rlock_client_close(b);
}

/* A process that queues for name with try_lock(1500 ms), until it is killed. */
static int queued_child(void *name, int in_fd, int out_fd) {
    rlock_config cfg;
    rlock_client *c;
    rlock *l;
    char go[16];
    h_config(&cfg);
    if (rlock_client_open(&cfg, &c) != RLOCK_OK || rlock_get_fair(c, name, &l) != RLOCK_OK)
        return 1;
    h_line_send(out_fd, "OPEN");
    if (h_line_recv(in_fd, go, sizeof go, H_MS(30000)) < 0) /* the parent holds the lock */
        return 3;
    int rc = rlock_try_lock(l, H_MS(1500), RLOCK_LEASE_WATCHDOG);
    h_line_send(out_fd, "RETURNED %d", rc); /* too late: killed before */
    return 2;
}

/*
 * A waiter's process is SIGKILLed while it is queued (nothing can remove its
 * entry): the live waiter behind it gets the lock, after the holder's lease
 * ran out, at the dead waiter's deadline and no later. Skipped under TSan,
 * which cannot start threads in the child of a threaded process (as in
 * test_fork.c); the plain, ASan and valgrind runs cover it.
 */
static void test_killed_waiter(void **state) {
    const char *name = h_unique_name("fair-killed");
    h_child ch;
    char line[64];
    (void)state;
#if defined(__SANITIZE_THREAD__)
    print_message("      skipped under TSan (threads in a forked child)\n");
    skip();
#endif

    h_child_start(&ch, queued_child, (void *)name);
    h_child_recv(&ch, line, sizeof line, 10000);
    assert_string_equal(line, "OPEN");
    rlock_client *a = h_open(30000, 0), *b = h_open(30000, 0);
    rlock *holder = fair(a, name), *waiter = fair(b, name);
    redisContext *r = h_redis();
    H_ASSERT_RC(rlock_lock_lease(holder, H_MS(800)), RLOCK_OK);
    h_child_send(&ch, "GO");
    await_queue(r, name, 1);
    assert_int_equal(h_child_kill(&ch), 1009);
    char *dead = h_cmd_str(r, "LINDEX redisson_lock_queue:{%s} 0", name);
    char *score = h_cmd_str(r, "ZSCORE redisson_lock_timeout:{%s} %s", name, dead);
    long long deadline = atoll(score);
    free(dead);
    free(score);

    H_ASSERT_RC(rlock_try_lock(waiter, H_MS(10000), RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    long long at = wall_ms();
    printf("acquired %lld ms after the killed waiter's deadline\n", at - deadline);
    H_ASSERT_BETWEEN(at, deadline - 20, deadline + H_MS(500));
    assert_int_equal(queue_len(r, name), 0);
    assert_int_equal(timeouts_len(r, name), 0);
    H_ASSERT_RC(rlock_unlock(waiter), RLOCK_OK);

    rlock_free(holder);
    rlock_free(waiter);
    redisFree(r);
    rlock_client_close(a);
    rlock_client_close(b);
}

/*
 * A client closed while its thread waits leaves the queue at once, whatever the race
 * between the woken waiter and the close (issue 22, item 8: its entry stayed in about
 * a third of the runs, and the waiter queued behind it waited for its deadline, minutes,
 * after the holder's unlock). H holds, W (client 2) waits, B (client 3) waits behind W;
 * closing client 2 ends W with RLOCK_ECLOSED and takes its entry out before the close
 * returns; H's unlock then goes to B at once. Several rounds, each with new clients,
 * every other one with Redis pausing writes across the close (CLIENT PAUSE WRITE): the
 * close waits for W's leave (it aborted it).
 */
static void test_closed_client_waiter(void **state) {
    enum { ROUNDS = 8 };
    rlock_client *a = h_open(30000, 0), *c = h_open(30000, 0);
    redisContext *r = h_redis();
    (void)state;

    for (int round = 0; round < ROUNDS; round++) {
        rlock_client *b = h_open(30000, 0);
        const char *name = h_unique_name("fair-closed");
        rlock *holder = fair(a, name), *gone = fair(b, name), *behind = fair(c, name);
        struct h_timed_try w = {.lock = gone, .wait_ms = -1, .lease_ms = RLOCK_LEASE_WATCHDOG};
        struct h_timed_try t = {.lock = behind, .wait_ms = H_MS(20000), .lease_ms = 10000};
        pthread_t tw, tb;

        H_ASSERT_RC(rlock_lock(holder), RLOCK_OK);
        assert_int_equal(pthread_create(&tw, NULL, h_timed_try_main, &w), 0);
        await_queue(r, name, 1);
        assert_int_equal(pthread_create(&tb, NULL, h_timed_try_main, &t), 0);
        await_queue(r, name, 2);
        h_sleep_ms(round % 4 * 10); /* W asleep, or not yet */
        if (round % 2 == 1) /* W's leave waits in Redis while the close goes on */
            h_cmd_ok(r, "CLIENT PAUSE %d WRITE", (int)H_MS(400));
        rlock_client_close(b);
        pthread_join(tw, NULL);
        H_ASSERT_RC(w.rc, RLOCK_ECLOSED);
        assert_int_equal(queue_len(r, name), 1); /* B only */
        assert_int_equal(timeouts_len(r, name), 1);
        long long unlocked = h_now_ms();
        H_ASSERT_RC(rlock_unlock(holder), RLOCK_OK);
        pthread_join(tb, NULL);
        H_ASSERT_RC(t.rc, RLOCK_OK);
        assert_true(h_now_ms() - unlocked < H_MS(1000));
        H_ASSERT_RC(rlock_force_unlock(behind), 1); /* held by the finished thread */
        assert_int_equal(queue_len(r, name), 0);

        rlock_free(holder);
        rlock_free(gone);
        rlock_free(behind);
    }
    redisFree(r);
    rlock_client_close(c);
    rlock_client_close(a);
}

static void test_expired_holder(void **state) {
    rlock_client *a = h_open(30000, 0), *b = h_open(30000, 0);
    const char *name = h_unique_name("fair-expired");
    rlock *holder = fair(a, name), *waiter = fair(b, name);
    redisContext *r = h_redis();
    long long lease = H_MS(800);
    (void)state;

    H_ASSERT_RC(rlock_lock_lease(holder, lease), RLOCK_OK);
    long long start = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(waiter, H_MS(10000), RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    long long took = h_now_ms() - start;
    H_ASSERT_BETWEEN(took, lease - 100, lease + H_MS(500));
    assert_int_equal(queue_len(r, name), 0);
    H_ASSERT_RC(rlock_unlock(waiter), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(holder), RLOCK_ENOTOWNER);

    rlock_free(holder);
    rlock_free(waiter);
    redisFree(r);
    rlock_client_close(a);
    rlock_client_close(b);
}

/* The watchdog renews a fair lock as it renews a plain one (same hash, same field). */
static void test_watchdog_renews(void **state) {
    long long wd = H_MS(900);
    rlock_client *c = h_open(wd, 0);
    const char *name = h_unique_name("fair-wd");
    rlock *l = fair(c, name);
    redisContext *r = h_redis();
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_sleep_ms(3 * wd);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    assert_true(h_pttl(r, name, strlen(name)) > 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- mutual exclusion under contention ------------------------------------------ */

#define EXCL_THREADS 4
#define EXCL_ROUNDS 50

typedef struct excl_run {
    long long counter;             /* not atomic: the lock guards it */
    atomic_int inside;
    atomic_int overlaps;
} excl_run;

typedef struct excl_worker {
    excl_run *run;
    rlock *lock;
    int rc;
} excl_worker;

static void *excl_main(void *arg) {
    excl_worker *w = arg;
    for (int i = 0; i < EXCL_ROUNDS && w->rc == RLOCK_OK; i++) {
        if ((w->rc = rlock_lock(w->lock)) != RLOCK_OK)
            break;
        if (atomic_fetch_add(&w->run->inside, 1) != 0)
            atomic_fetch_add(&w->run->overlaps, 1);
        long long v = w->run->counter;
        w->run->counter = v + 1;
        atomic_fetch_sub(&w->run->inside, 1);
        w->rc = rlock_unlock(w->lock);
    }
    return NULL;
}

static void test_exclusion_two_clients(void **state) {
    rlock_client *c[2] = {h_open(30000, 0), h_open(30000, 0)};
    const char *name = h_unique_name("fair-excl");
    rlock *l[2] = {fair(c[0], name), fair(c[1], name)};
    redisContext *r = h_redis();
    excl_run run = {0};
    excl_worker w[2 * EXCL_THREADS];
    pthread_t th[2 * EXCL_THREADS];
    (void)state;

    for (int i = 0; i < 2 * EXCL_THREADS; i++) {
        w[i] = (excl_worker){.run = &run, .lock = l[i % 2], .rc = RLOCK_OK};
        assert_int_equal(pthread_create(&th[i], NULL, excl_main, &w[i]), 0);
    }
    for (int i = 0; i < 2 * EXCL_THREADS; i++) {
        pthread_join(th[i], NULL);
        H_ASSERT_RC(w[i].rc, RLOCK_OK);
    }
    assert_int_equal(atomic_load(&run.overlaps), 0);
    assert_int_equal(run.counter, 2 * EXCL_THREADS * EXCL_ROUNDS);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(queue_len(r, name), 0);
    assert_int_equal(timeouts_len(r, name), 0);

    for (int i = 0; i < 2; i++) {
        rlock_free(l[i]);
        rlock_client_close(c[i]);
    }
    redisFree(r);
}

/* ---- force unlock and bad input ------------------------------------------------- */

/* Force unlock wakes the queue's head: it acquires at once, not at the TTL. */
static void test_force_unlock_wakes_head(void **state) {
    rlock_client *a = h_open(30000, 0), *b = h_open(30000, 0);
    const char *name = h_unique_name("fair-force");
    rlock *holder = fair(a, name), *waiter = fair(b, name);
    redisContext *r = h_redis();
    struct h_timed_try t = {.lock = waiter, .wait_ms = H_MS(20000), .lease_ms = 10000};
    pthread_t th;
    (void)state;

    H_ASSERT_RC(rlock_lock(holder), RLOCK_OK);
    assert_int_equal(pthread_create(&th, NULL, h_timed_try_main, &t), 0);
    await_queue(r, name, 1);
    long long forced = h_now_ms();
    H_ASSERT_RC(rlock_force_unlock(holder), 1);
    pthread_join(th, NULL);
    H_ASSERT_RC(t.rc, RLOCK_OK);
    assert_true(h_now_ms() - forced < H_MS(1000));
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(b), 1);
    H_ASSERT_RC(rlock_force_unlock(holder), 1);
    H_ASSERT_RC(rlock_force_unlock(holder), 0);
    H_ASSERT_RC(rlock_unlock(holder), RLOCK_ENOTOWNER); /* its last hold, lost: nothing to do */

    rlock_free(holder);
    rlock_free(waiter);
    redisFree(r);
    rlock_client_close(a);
    rlock_client_close(b);
}

static void test_bad_input(void **state) {
    rlock_client *c = h_open(30000, 0);
    rlock *l = (rlock *)&l;
    (void)state;

    H_ASSERT_RC(rlock_get_fair(c, "x", NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get_fair(NULL, "x", &l), RLOCK_EINVAL);
    assert_null(l);
    l = (rlock *)&l;
    H_ASSERT_RC(rlock_get_fair(c, NULL, &l), RLOCK_EINVAL);
    assert_null(l);
    H_ASSERT_RC(rlock_get_fair(c, "", &l), RLOCK_EINVAL);
    assert_null(l);
    {
        char *long_name = malloc(RLOCK_MAX_NAME_LEN + 2);
        assert_non_null(long_name);
        memset(long_name, 'n', RLOCK_MAX_NAME_LEN + 1);
        long_name[RLOCK_MAX_NAME_LEN + 1] = '\0';
        H_ASSERT_RC(rlock_get_fair(c, long_name, &l), RLOCK_EINVAL);
        assert_null(l);
        free(long_name);
    }
    /* Not a Cluster client: names that would span slots in a Cluster are fine here. */
    H_ASSERT_RC(rlock_get_fair(c, "a}b", &l), RLOCK_OK);
    rlock *kept = l; /* keeps the closed client's struct alive */
    rlock_client_close(c);
    H_ASSERT_RC(rlock_get_fair(c, "x", &l), RLOCK_ECLOSED);
    assert_null(l);
    rlock_free(kept);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_and_reentrancy),
        cmocka_unit_test(test_fifo_two_clients),
        cmocka_unit_test(test_try_lock_timeout_leaves_queue),
        cmocka_unit_test(test_try_lock_zero_never_queues),
        cmocka_unit_test(test_cancelled_waiter_leaves),
        cmocka_unit_test(test_dead_head_until_deadline),
        cmocka_unit_test(test_dead_head_at_unlock),
        cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_killed_waiter),
        cmocka_unit_test(test_closed_client_waiter),
        cmocka_unit_test(test_expired_holder),
        cmocka_unit_test(test_watchdog_renews),
        cmocka_unit_test(test_exclusion_two_clients),
        cmocka_unit_test(test_force_unlock_wakes_head),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
