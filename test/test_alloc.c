/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_alloc.c - allocation failure: every allocation of rlock's own may fail.
 *
 * The library's test hook rlock__alloc_fail_after(n) (src/core/core.h) makes the
 * n-th allocation of rlock's own from now fail. For n = 1, 2, ... a fixed
 * sequence runs - open a client, get two handles, lock, lock again (reentrant),
 * let the watchdog run a few rounds, try_lock on a lock another owner holds (so
 * it subscribes and waits), unlock, close - until a run completes without the
 * injected failure having happened. In every run:
 *   - each call returns RLOCK_ENOMEM or its normal result, nothing else, and
 *     nothing crashes;
 *   - Redis stays consistent: after the run no field of ours remains (an unlock
 *     that could not run leaves a hold that expires with its lease), and no
 *     subscription is left;
 *   - nothing leaks (`make valgrind` and `make test SAN=address` run this file).
 * hiredis allocates with plain malloc (and aborts on failure); that is outside
 * the hook and outside rlock's reach.
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
#include "core/internal.h"

#define MAX_N 5000

struct counts {
    long runs, injected, enomem, swallowed;
    long by_step[8];
};

enum { S_OPEN, S_GET, S_LOCK, S_REENTER, S_TRY, S_UNLOCK, S_NSTEPS };
static const char *const step_names[S_NSTEPS] = {"open", "get", "lock", "reentrant lock",
                                                 "contended try_lock", "unlock"};

/* 1 if the countdown set for this run is still armed (no failure injected). */
static int countdown_armed(long n)
{
    long i;
    for (i = 0; i <= n; i++) {
        void *p = rlock__malloc(1);
        if (p == NULL)
            return 1;
        rlock__free(p);
    }
    return 0;
}

/* Fails unless rc is want or RLOCK_ENOMEM; counts ENOMEM. */
static int check(int rc, int want, int step, struct counts *k, long n)
{
    if (rc == RLOCK_ENOMEM) {
        k->enomem++;
        k->by_step[step]++;
        return 0;
    }
    if (rc != want)
        H_FAIL("n = %ld: %s returned %s, expected %s or RLOCK_ENOMEM", n, step_names[step],
               rlock_status_name(rc), rlock_status_name(want));
    return 1;
}

/* One run with the n-th allocation failing. Returns 1 if the failure was injected. */
static int run_once(long n, redisContext *r, struct counts *k)
{
    const char *name = h_unique_name("alloc"), *busy = h_unique_name("alloc-busy");
    /* A renewal round every 30 ms (scaled, as every deadline of the tests: under valgrind a
     * 90 ms lease left no room for the round after a failed one): the watchdog allocates too. */
    const long long wd = H_MS(90);
    rlock_config cfg;
    rlock_client *c = NULL;
    rlock *l = NULL, *bl = NULL;
    int holds = 0, left, injected, enomem_before = (int)k->enomem;

    /* Another owner holds "busy". */
    h_cmd_ok(r, "HSET %s other:1 1", busy);
    h_cmd_ok(r, "PEXPIRE %s 60000", busy);

    h_config(&cfg);
    cfg.watchdog_timeout_ms = wd;
    rlock__alloc_fail_after(n);
    if (!check(rlock_client_open(&cfg, &c), RLOCK_OK, S_OPEN, k, n))
        goto done;
    if (!check(rlock_get(c, name, &l), RLOCK_OK, S_GET, k, n))
        goto close;
    if (!check(rlock_get(c, busy, &bl), RLOCK_OK, S_GET, k, n))
        goto close;
    if (check(rlock_lock(l), RLOCK_OK, S_LOCK, k, n))
        holds++;
    if (holds && check(rlock_lock(l), RLOCK_OK, S_REENTER, k, n))
        holds++;
    h_sleep_ms(H_MS(70)); /* two renewal rounds */
    check(rlock_try_lock(bl, 40, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY, S_TRY, k, n);
    for (left = holds; left > 0; left--)
        if (!check(rlock_unlock(l), RLOCK_OK, S_UNLOCK, k, n))
            break;
    holds = left;
close:
    rlock_free(l);
    rlock_free(bl);
    rlock_client_close(c);
done:
    injected = !countdown_armed(n);
    rlock__alloc_fail_after(0);
    k->runs++;
    if (injected) {
        k->injected++;
        if ((int)k->enomem == enomem_before)
            k->swallowed++; /* failed inside a library thread or a best-effort path */
    }

    /* Redis is consistent: the lock is free, or held by us with the holds an
     * unlock could not give back, and then expires (renewal stopped at close). */
    if (holds == 0) {
        assert_int_equal(h_exists(r, name, strlen(name)), 0);
    } else {
        long long count = 0;
        assert_int_equal(h_lock_fields(r, name, strlen(name), NULL, &count), 1);
        assert_int_equal(count, holds);
        H_WAIT_FOR(h_exists(r, name, strlen(name)) == 0, wd + 1000);
    }
    /* The other owner's lock untouched; no subscription left. */
    {
        char *field = NULL;
        long long count = 0;
        assert_int_equal(h_lock_fields(r, busy, strlen(busy), &field, &count), 1);
        assert_string_equal(field, "other:1");
        assert_int_equal(count, 1);
        free(field);
    }
    H_WAIT_FOR(h_numsub(r, busy, strlen(busy)) == 0, 2000);
    h_cmd_ok(r, "DEL %s", busy);
    return injected;
}

static void test_alloc_failures(void **state)
{
    redisContext *r = h_redis();
    struct counts k;
    long n;
    int i;
    char steps[300] = "";
    (void)state;

    memset(&k, 0, sizeof k);
    for (n = 1; n <= MAX_N; n++)
        if (!run_once(n, r, &k))
            break;
    if (n > MAX_N)
        H_FAIL("still injecting failures after %d runs", MAX_N);
    for (i = 0; i < S_NSTEPS; i++)
        if (k.by_step[i])
            snprintf(steps + strlen(steps), sizeof steps - strlen(steps), "%s%s %ld",
                     steps[0] ? ", " : "", step_names[i], k.by_step[i]);
    print_message("      %ld runs (the last one without a failure): %ld injected failures, "
                  "%ld returned RLOCK_ENOMEM (%s), %ld absorbed by library threads or "
                  "best-effort paths\n",
                  k.runs, k.injected, k.enomem, steps, k.swallowed);
    assert_true(k.runs >= 10);
    assert_true(k.by_step[S_OPEN] >= 1);
    assert_true(k.by_step[S_GET] >= 1);
    assert_true(k.by_step[S_LOCK] >= 1);
    redisFree(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
