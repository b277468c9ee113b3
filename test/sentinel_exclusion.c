/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel_exclusion.c - mutual exclusion through repeated failovers: 4
 * processes x 4 threads take one lock through a redis-sentinel:// url while
 * the test runs SENTINEL FAILOVER twice. Each holder checks, in memory the
 * processes share, that nobody else is inside, and increments a counter
 * with a read, a pause and a write: the counter is exact only if no two
 * holders overlapped (the contest: harness/exclusion.h). Unlocks are not
 * checked: one can say RLOCK_ENOREPL, and the hold is gone either way.
 *
 * The clients use replica_acks 2 (every replica): an acquisition a failover
 * could lose is never reported as taken (docs/design.md, "What WAIT
 * guarantees"). With fewer acknowledgements a failover can promote a
 * replica that never saw a lock, and this test could legitimately see two
 * holders.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "harness.h"

#define PROCESSES 4
#define THREADS 4

static void test_exclusion_across_failovers(void **state) {
    (void)state;
    h_sentinels *hs = h_sentinels_start();
    const char *name = h_unique_name("sentinel-exclusion");
    rlock_config cfg;
    h_exclusion ex;
    h_excl_result r;
    h_excl_config(&cfg, hs->url); /* watchdog 3 s, 40 retries 250 ms apart */
    cfg.replica_acks = 2;
    cfg.replica_ack_timeout_ms = 1000;
    h_excl_start(&ex, &cfg, name, PROCESSES, THREADS);
    h_sleep_ms(H_MS(2000));
    long before = h_excl_acquisitions(&ex);
    for (int f = 0; f < 2; f++) {
        long long t0 = h_now_ms();
        h_server *now = h_sentinels_failover(hs);
        printf("      failover %d: new master :%d after %lld ms, %ld acquisitions so far\n", f + 1,
               h_server_port(now), h_now_ms() - t0, h_excl_acquisitions(&ex));
        /* The next failover needs a settled set-up: both replicas following the new master. */
        H_WAIT_FOR(h_replicas_linked(now) == 2, 30000);
    }
    h_excl_wait_more(&ex, 50, 20000); /* going again */
    h_excl_stop(&ex, 30000, &r);      /* fails unless every process exited 0 */
    printf("      %ld acquisitions before the first failover\n", before);
    h_excl_print(&r);
    assert_int_equal(r.overlaps, 0);
    assert_int_equal(r.counter, r.acquisitions);
    for (int p = 0; p < PROCESSES; p++)
        assert_true(r.per_process[p] > 0);
    h_sentinels_stop(hs);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exclusion_across_failovers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
