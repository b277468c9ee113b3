/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_replies_pause.c - replies held up by CLIENT PAUSE WRITE.
 *
 *   scenario 5a  CLIENT PAUSE <p> WRITE with p on both sides of command_timeout_ms
 *                (200 ms), retries 0 and 3: try_lock ends with our field absent
 *                (and an error), or present with count 1 (and OK) - never 2 - and an
 *                error never leaves a renewed hold: a field left by an acquisition
 *                whose every reply was lost expires within its lease, unless the
 *                same thread calls again, which adopts it once (user-needs F8).
 *   scenario 5b  unlock of a hold count of 2 under the same pauses ends at exactly 1
 *                (after one more unlock call if the first returned RLOCK_EIO) (F9).
 *
 * One redis-server for the whole file (h_server_fixture_*).
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
/* ---- scenario 5a/5b: CLIENT PAUSE WRITE ------------------------------- */

/* What the sweep saw, over all its rounds. */
struct sweep {
    int acq_ok, acq_err_absent, acq_err_orphan, rel_ok, rel_eio;
};

/* Scenario 5a, one round: try_lock under a pause of p ms; ends released. */
static void pause_acquire(redisContext *r, rlock *l, const char *name, const char *id, int retries,
                          long long p, long long wd, struct sweep *sw) {
    long long t0, dt, count = 0, left;
    int rc, n;

    /* try_lock under the pause (with retries, a wait: try_lock(0) is one
     * attempt and never re-sends). */
    h_cmd_ok(r, "CLIENT PAUSE %lld WRITE", p);
    t0 = h_now_ms();
    rc = rlock_try_lock(l, retries ? 1500 : 0, RLOCK_LEASE_WATCHDOG);
    dt = h_now_ms() - t0;
    left = t0 + p + 50 - h_now_ms();
    h_sleep_ms(left); /* let the pause end */
    n = h_own_fields(r, name, id, &count);
    printf("scenario 5a: retries %d, CLIENT PAUSE %lld WRITE: try_lock(wait %d) = %s in "
           "%lld ms; field %s", retries, p, retries ? 1500 : 0, rlock_status_name(rc), dt,
           n ? "present" : "absent");
    if (rc == RLOCK_OK) {
        sw->acq_ok++;
        if (n != 1 || count != 1)
            H_FAIL("try_lock OK but the field is %s (count %lld)",
                   n ? "present" : "absent", count);
        /* A real hold: renewed past its lease. */
        h_sleep_ms(wd + wd / 3);
        H_ASSERT_LOCK_IS(r, name, id, 1);
        printf(", count 1, renewed past its lease\n");
    } else {
        H_ASSERT_RC(rc, RLOCK_EIO);
        if (n == 0) {
            sw->acq_err_absent++;
            printf("\n");
        } else {
            long long gone;
            sw->acq_err_orphan++;
            if (count != 1)
                H_FAIL("try_lock failed and left count %lld", count);
            gone = h_orphan_expires(r, name, id, wd);
            printf(", count 1, not renewed, expired after %lld ms\n", gone);
        }
        /* The same thread tries again: a clean single hold. */
        H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
        H_ASSERT_LOCK_IS(r, name, id, 1);
    }
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
}

/* Scenario 5b, one round: unlock of a hold count of 2 under a pause of p ms;
 * ends released. */
static void pause_release(redisContext *r, rlock *l, const char *name, const char *id, int retries,
                          long long p, struct sweep *sw) {
    long long t0, dt, count = 0;
    int rc, n;

    /* unlock of a hold count of 2 under the pause. */
    H_ASSERT_RC(rlock_lock_lease(l, 30000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, 30000), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, id, 2);
    h_cmd_ok(r, "CLIENT PAUSE %lld WRITE", p);
    t0 = h_now_ms();
    rc = rlock_unlock(l);
    dt = h_now_ms() - t0;
    h_sleep_ms(t0 + p + 50 - h_now_ms());
    n = h_own_fields(r, name, id, &count);
    printf("scenario 5b: retries %d, CLIENT PAUSE %lld WRITE: unlock (count 2) = %s in "
           "%lld ms, count now %lld", retries, p, rlock_status_name(rc), dt,
           n ? count : 0);
    if (rc == RLOCK_OK) {
        sw->rel_ok++;
        printf("\n");
    } else {
        H_ASSERT_RC(rc, RLOCK_EIO);
        sw->rel_eio++;
        if (n != 1 || (count != 1 && count != 2))
            H_FAIL("unlock failed and left %d fields, count %lld", n, count);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
        n = h_own_fields(r, name, id, &count);
        printf(", after a second unlock %lld\n", n ? count : 0);
    }
    /* Exactly 1: released once, never twice. */
    H_ASSERT_LOCK_IS(r, name, id, 1);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
}

static void test_client_pause_sweep(void **state) {
    static const long long pauses[] = {100, 250, 450, 700, 1100};
    const long long cmd = H_MS(200), wd = H_MS(1500);
    redisContext *r = h_server_redis(h_srv);
    int retries_set[2] = {0, 3}, ri;
    size_t pi;
    struct sweep sw = {0};
    (void)state;

    for (ri = 0; ri < 2; ri++) {
        int retries = retries_set[ri];
        rlock_client *c = h_open_retries(h_server_url(h_srv), wd, cmd, retries, 100, NULL);
        const char *id = rlock_client_id(c);
        for (pi = 0; pi < sizeof pauses / sizeof pauses[0]; pi++) {
            long long p = H_MS(pauses[pi]);
            const char *name = h_unique_name("pause");
            rlock *l = h_get(c, name);

            pause_acquire(r, l, name, id, retries, p, wd, &sw);
            pause_release(r, l, name, id, retries, p, &sw);
            rlock_free(l);
        }
        rlock_client_close(c);
    }
    printf("scenario 5a/5b summary: try_lock OK %d, error+absent %d, error+unrenewed orphan "
           "%d; unlock OK %d, EIO then completed %d\n",
           sw.acq_ok, sw.acq_err_absent, sw.acq_err_orphan, sw.rel_ok, sw.rel_eio);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_pause_sweep),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER")) /* e.g. FAULT_FILTER='test_client_pause*' */
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, h_server_fixture_start, h_server_fixture_stop);
}
