/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_contention.c - mutual exclusion under contention (threads, clients,
 * processes) checked with a non-atomic counter kept in Redis. Fork safety is
 * in test_fork.c.
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
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* ---- the locked, non-atomic increment --------------------------------- */

struct worker {
    rlock *lock;
    const char *counter; /* key of the counter */
    int iterations;
    int use_try;         /* try_lock with a wait and a lease instead of lock() */
    int id;
    /* results */
    int errors;
    char what[200];
    long long max_wait_ms;
};

static void worker_error(struct worker *w, const char *what, int rc) {
    if (w->errors++ == 0)
        snprintf(w->what, sizeof w->what, "%s: %s", what, rlock_status_name(rc));
}

static void *worker_main(void *p) {
    struct worker *w = p;
    redisContext *r = h_redis();
    const char *name = rlock_name(w->lock);
    int i;

    for (i = 0; i < w->iterations; i++) {
        long long t0 = h_now_ms(), waited;
        int rc = w->use_try ? rlock_try_lock(w->lock, H_MS(120000), 60000) : rlock_lock(w->lock);
        redisReply *rep;
        long long v = 0;
        if (rc != RLOCK_OK) {
            worker_error(w, "outer lock", rc);
            continue;
        }
        waited = h_now_ms() - t0;
        if (waited > w->max_wait_ms)
            w->max_wait_ms = waited;
        /* Nested, reentrant. */
        rc = rlock_lock(w->lock);
        if (rc != RLOCK_OK)
            worker_error(w, "inner lock", rc);
        if (rlock_hold_count(w->lock) != 2)
            worker_error(w, "hold count is not 2", 0);
        /* Exactly one owner in Redis. */
        rep = redisCommand(r, "HLEN %s", name);
        if (!rep || rep->type != REDIS_REPLY_INTEGER || rep->integer != 1)
            worker_error(w, "HLEN is not 1", 0);
        if (rep)
            freeReplyObject(rep);
        /* The non-atomic increment: GET, then SET. */
        rep = redisCommand(r, "GET %s", w->counter);
        if (rep && rep->type == REDIS_REPLY_STRING)
            v = strtoll(rep->str, NULL, 10);
        else if (!rep || rep->type != REDIS_REPLY_NIL)
            worker_error(w, "GET counter", 0);
        if (rep)
            freeReplyObject(rep);
        rep = redisCommand(r, "SET %s %lld", w->counter, v + 1);
        if (!rep || rep->type == REDIS_REPLY_ERROR)
            worker_error(w, "SET counter", 0);
        if (rep)
            freeReplyObject(rep);
        if (rc == RLOCK_OK) {
            rc = rlock_unlock(w->lock);
            if (rc != RLOCK_OK)
                worker_error(w, "inner unlock", rc);
        }
        rc = rlock_unlock(w->lock);
        if (rc != RLOCK_OK)
            worker_error(w, "outer unlock", rc);
    }
    redisFree(r);
    return NULL;
}

/*
 * Runs nthreads workers on the given clients (round robin), each doing
 * iterations increments of counter under the lock called name. Returns the
 * number of errors (details on stderr).
 */
static int run_workers(rlock_client **clients, int nclients, const char *name,
                       const char *counter, int nthreads, int iterations, long long *max_wait) {
    struct worker *w = calloc((size_t)nthreads, sizeof *w);
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    rlock **locks = calloc((size_t)nclients, sizeof *locks);
    int i, errors = 0;

    if (!w || !th || !locks)
        abort();
    for (i = 0; i < nclients; i++)
        if (rlock_get(clients[i], name, &locks[i]) != RLOCK_OK)
            abort();
    for (i = 0; i < nthreads; i++) {
        w[i].lock = locks[i % nclients];
        w[i].counter = counter;
        w[i].iterations = iterations;
        w[i].use_try = i % 2;
        w[i].id = i;
        if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0)
            abort();
    }
    *max_wait = 0;
    for (i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        if (w[i].errors) {
            fprintf(stderr, "pid %d worker %d: %d errors, first: %s\n", (int)getpid(), i,
                    w[i].errors, w[i].what);
            errors += w[i].errors;
        }
        if (w[i].max_wait_ms > *max_wait)
            *max_wait = w[i].max_wait_ms;
    }
    for (i = 0; i < nclients; i++)
        rlock_free(locks[i]);
    free(locks);
    free(th);
    free(w);
    return errors;
}

static long long counter_value(redisContext *r, const char *counter) {
    char *s = h_cmd_str(r, "GET %s", counter);
    long long v = s ? strtoll(s, NULL, 10) : 0;
    free(s);
    return v;
}

static void check_done(redisContext *r, const char *name, const char *counter, long long expect) {
    long long v = counter_value(r, counter);
    if (v != expect)
        fail_msg("counter is %lld, expected %lld: mutual exclusion broken", v, expect);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_WAIT_FOR(h_numsub(r, name, strlen(name)) == 0, 2000);
    h_cmd_ok(r, "DEL %s", counter);
}

static void test_threads_one_client(void **state) {
    enum { THREADS = 8, ITER = 250 };
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("cont1"), *counter = h_unique_name("counter1");
    redisContext *r = h_redis();
    long long t0 = h_now_ms(), max_wait;
    int errors;
    (void)state;

    errors = run_workers(&c, 1, name, counter, THREADS, ITER, &max_wait);
    print_message("      %d threads x %d increments: %lld ms, longest wait %lld ms\n", THREADS,
                  ITER, h_now_ms() - t0, max_wait);
    assert_int_equal(errors, 0);
    check_done(r, name, counter, THREADS * ITER);
    redisFree(r);
    rlock_client_close(c);
}

static void test_threads_two_clients(void **state) {
    enum { THREADS = 8, ITER = 250 };
    rlock_client *c[2];
    const char *name = h_unique_name("cont2"), *counter = h_unique_name("counter2");
    redisContext *r = h_redis();
    long long t0 = h_now_ms(), max_wait;
    int errors;
    (void)state;

    c[0] = h_open(30000, 0);
    c[1] = h_open(30000, 0);
    errors = run_workers(c, 2, name, counter, THREADS, ITER, &max_wait);
    print_message("      2 clients, %d threads x %d increments: %lld ms, longest wait %lld ms\n",
                  THREADS, ITER, h_now_ms() - t0, max_wait);
    assert_int_equal(errors, 0);
    check_done(r, name, counter, THREADS * ITER);
    redisFree(r);
    rlock_client_close(c[0]);
    rlock_client_close(c[1]);
}

static void test_processes(void **state) {
    enum { PROCS = 4, THREADS = 4, ITER = 150 };
    const char *name = h_unique_name("contp"), *counter = h_unique_name("counterp");
    redisContext *r = h_redis();
    pid_t pids[PROCS];
    long long t0 = h_now_ms();
    int i, failed = 0;
    (void)state;

    for (i = 0; i < PROCS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            rlock_client *c = h_open(30000, 0);
            long long max_wait;
            int errors = run_workers(&c, 1, name, counter, THREADS, ITER, &max_wait);
            rlock_client_close(c);
            h_child_exit(errors ? 1 : 0);
        }
    }
    for (i = 0; i < PROCS; i++) {
        int code = h_child_code(h_wait_child(pids[i], 240000));
        if (code != 0) {
            fprintf(stderr, "child %d: code %d\n", i, code);
            failed++;
        }
    }
    print_message("      %d processes x %d threads x %d increments: %lld ms\n", PROCS, THREADS,
                  ITER, h_now_ms() - t0);
    assert_int_equal(failed, 0);
    check_done(r, name, counter, PROCS * THREADS * ITER);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_one_client),
        cmocka_unit_test(test_threads_two_clients),
        cmocka_unit_test(test_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
