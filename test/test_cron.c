/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cron.c - docs/operations.md, "Cron: run a job once per period", on a
 * shortened scale: a period of PERIOD ms, a job of JOB ms, three hosts whose
 * cron starts the job at the period's start by their own clocks, the third
 * one's clock SKEW ms behind (longer than the job).
 *
 * With an unlock after the run, the late host finds the lock free and runs the
 * job a second time (the issue 25 report: a host 3 s behind ran a 2 s job
 * again). With either recipe -- one name held for a lease just under the
 * period, or one name per period held for a lease -- it gets RLOCK_BUSY, and
 * the next period's job runs once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "harness.h"

#define PERIOD 1000 /* ms */
#define JOB 200
#define SKEW 300
/* Recipe 1's lease: > SKEW + JOB, < PERIOD - SKEW. */
#define FIXED_LEASE 650

enum recipe { UNLOCK_AFTER_RUN, HOLD_FOR_PERIOD, NAME_PER_PERIOD };

struct host {
    rlock_client *client;
    long long behind_ms; /* its clock is this much behind */
};

/* The lock's name for a run: per period, from the host's own clock. */
static void run_name(const struct host *h, const char *base, enum recipe r, char *out,
                     size_t size) {
    if (r == NAME_PER_PERIOD)
        snprintf(out, size, "%s:%lld", base, (h_now_ms() - h->behind_ms) / PERIOD);
    else
        snprintf(out, size, "%s", base);
}

/*
 * One cron start of the job on host h: the lock held for the run if it is to
 * run the job, NULL if it skips.
 */
static rlock *cron_begin(const struct host *h, const char *base, enum recipe r) {
    char name[128];
    rlock *lock;
    long long lease = r == HOLD_FOR_PERIOD ? FIXED_LEASE
                    : r == NAME_PER_PERIOD ? PERIOD
                                           : RLOCK_LEASE_WATCHDOG;
    int rc;

    run_name(h, base, r, name, sizeof name);
    lock = h_get(h->client, name);
    rc = rlock_try_lock(lock, 0, lease);
    if (rc == RLOCK_BUSY) {
        rlock_free(lock);
        return NULL;
    }
    H_ASSERT_RC(rc, RLOCK_OK);
    return lock;
}

/* The end of a run: the recipes leave the lock held until its lease ends. */
static void cron_end(rlock *lock, enum recipe r) {
    if (r == UNLOCK_AFTER_RUN)
        H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    rlock_free(lock);
}

/* Sleeps until 10 ms into the next period (by the real clock). */
static void sleep_to_next_period(void) {
    h_sleep_ms(PERIOD - h_now_ms() % PERIOD + 10);
}

/* Sleeps until offset_ms into the current period, if it is not that late yet. */
static void sleep_into_period(long long offset_ms) {
    long long in = h_now_ms() % PERIOD;

    if (in < offset_ms)
        h_sleep_ms(offset_ms - in);
}

/*
 * Two periods. Hosts 0 and 1 start at the period's start (host 1 finds host 0
 * running: never two runs at once), host 2 SKEW ms later by the real clock
 * (at the period's start by its own), when host 0 has finished. Returns the
 * runs in each period.
 */
static void two_periods(enum recipe r, int runs[2]) {
    struct host hosts[3] = {
        {h_open(30000, 0), 0}, {h_open(30000, 0), 0}, {h_open(30000, 0), SKEW}};
    const char *base = h_unique_name("cron");

    for (int p = 0; p < 2; p++) {
        rlock *first, *late;

        sleep_to_next_period();
        first = cron_begin(&hosts[0], base, r);
        assert_non_null(first);
        assert_null(cron_begin(&hosts[1], base, r));
        h_sleep_ms(JOB);
        cron_end(first, r);
        runs[p] = 1;

        sleep_into_period(SKEW + 10);
        late = cron_begin(&hosts[2], base, r);
        if (late != NULL) {
            runs[p]++;
            h_sleep_ms(JOB);
            cron_end(late, r);
        }
    }
    for (int i = 0; i < 3; i++)
        rlock_client_close(hosts[i].client);
}

static void test_unlock_after_run_runs_twice(void **state) {
    int runs[2];
    (void)state;

    two_periods(UNLOCK_AFTER_RUN, runs);
    assert_int_equal(runs[0], 2);
    assert_int_equal(runs[1], 2);
}

static void test_hold_for_period_runs_once(void **state) {
    int runs[2];
    (void)state;

    two_periods(HOLD_FOR_PERIOD, runs);
    assert_int_equal(runs[0], 1);
    assert_int_equal(runs[1], 1);
}

static void test_name_per_period_runs_once(void **state) {
    int runs[2];
    (void)state;

    two_periods(NAME_PER_PERIOD, runs);
    assert_int_equal(runs[0], 1);
    assert_int_equal(runs[1], 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unlock_after_run_runs_twice),
        cmocka_unit_test(test_hold_for_period_runs_once),
        cmocka_unit_test(test_name_per_period_runs_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
