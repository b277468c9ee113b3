/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_spurious_lost.c - no on_lock_lost without a fault: a renewal round
 * racing a full unlock must never report the released lock as lost (the
 * race fault_stress's scenario 8 also checks, here in a tight loop).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/*
 * No fault at all, so on_lock_lost must never be called: one thread locks and
 * unlocks a watchdog lock in a tight loop while the watchdog renews it every
 * 100 ms (a 300 ms lease: no scheduling stall of this machine comes near it,
 * so no lock can really be lost, and any error would show it). A round that
 * snapshots the hold just before a full unlock must not report the released
 * lock as lost. Runs 5 s, or until the first such report.
 */
static void test_no_spurious_lost(void **state) {
    h_server *srv = h_server_start();
    struct h_lost lost;
    rlock_config cfg;
    rlock_client *c;
    rlock *l;
    long long t0, cycles = 0, secs = 5, elapsed;
    int errors = 0, nlost;
    (void)state;

    memset(&lost, 0, sizeof lost);
    h_config(&cfg);
    cfg.url = h_server_url(srv);
    cfg.watchdog_timeout_ms = 300;
    cfg.on_lock_lost = h_lost_cb;
    cfg.callback_arg = &lost;
    c = h_open_config(&cfg);
    l = h_get(c, h_unique_name("spurious"));
    t0 = h_now_ms();
    while (h_now_ms() - t0 < secs * 1000 && h_lost_count(&lost) == 0) {
        errors += rlock_lock(l) != RLOCK_OK;
        errors += rlock_unlock(l) != RLOCK_OK;
        cycles++;
    }
    elapsed = h_now_ms() - t0;
    h_sleep_ms(150); /* a report of the last cycles would come by now */
    nlost = h_lost_count(&lost);
    rlock_free(l);
    rlock_client_close(c);
    h_server_stop(srv);
    printf("no fault: %lld lock/unlock cycles in %lld ms with a renewal every 100 ms: "
           "%d errors, on_lock_lost called %d times\n", cycles, elapsed, errors, nlost);
    assert_int_equal(errors, 0);
    if (nlost != 0)
        H_FAIL("on_lock_lost was called %d times for a lock that was never lost (%s): a "
               "renewal round that snapshotted the hold before a full unlock reported the "
               "released lock as lost", nlost, lost.last_name);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_spurious_lost),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER"))
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
