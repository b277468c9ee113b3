/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_pool_fair.c - a thread queued for a pooled connection gets one: a
 * thread that gives its connection back and takes one again at once (a
 * loop of commands) does not take it past the queued one.
 *
 * The watchdog is such a queued thread. Here the client has one pooled
 * connection (pool_size 1), Redis is 40-80 ms away (the test proxy's
 * delay), and the main thread runs try_lock after try_lock for several
 * leases' time while the client holds a lock on the watchdog (lease 600 ms,
 * a renewal round every 200 ms). Before, the main thread took the slot back
 * before the woken watchdog could, every time: no renewal went out, and the
 * hold was reported lost when its lease ran out by the client's clock
 * (LOCK_LOST, with no RENEWAL_FAILED before it). Now the hold is kept and
 * renewed throughout.
 *
 * One redis-server for the file (h_server_fixture_*); a proxy per test.
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
#include "proxy.h"

static void test_watchdog_not_starved(void **state) {
    const char *busy = h_unique_name("fair-busy"), *held = h_unique_name("fair-held");
    const long long wd = H_MS(600);
    h_proxy *px = h_proxy_start(h_server_port(h_srv));
    redisContext *r = h_server_redis(h_srv);
    struct h_lost lost;
    rlock_config cfg;
    (void)state;

    h_config(&cfg);
    cfg.url = h_proxy_url(px);
    cfg.pool_size = 1;
    cfg.command_timeout_ms = (int)H_MS(2000);
    cfg.watchdog_timeout_ms = wd;
    h_lost_init(&lost);
    cfg.on_lock_lost = h_lost_cb;
    cfg.callback_arg = &lost;
    rlock_client *c = h_open_config(&cfg);
    rlock *lb = h_get(c, busy), *lh = h_get(c, held);
    h_foreign_lock(r, busy, 60000);
    H_ASSERT_RC(rlock_lock(lh), RLOCK_OK); /* the watchdog's */
    h_proxy_set_delay(px, 20, 40);

    long long t0 = h_now_ms(), calls = 0;
    while (h_now_ms() - t0 < 5 * wd) { /* five leases without a pause between calls */
        H_ASSERT_RC(rlock_try_lock(lb, 0, 5000), RLOCK_BUSY);
        calls++;
    }
    long long pttl = h_pttl(r, held, strlen(held));
    rlock_stats st = h_stats(c);
    print_message("      %lld try_locks back to back in %lld ms on pool_size 1, Redis 40-80 ms "
                  "away: the watchdog hold (lease %lld ms) renewed %llu time(s), %llu failed, "
                  "lost %d time(s), PTTL now %lld ms; %llu connection(s) opened\n",
                  calls, h_now_ms() - t0, wd, st.renewals, st.renewal_failures,
                  h_lost_count(&lost), pttl, st.connections);
    assert_int_equal(h_lost_count(&lost), 0);
    H_ASSERT_LOCK_IS(r, held, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_unlock(lh), RLOCK_OK);

    rlock_free(lb);
    rlock_free(lh);
    rlock_client_close(c);
    h_proxy_stop(px);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SERVER_TEST(test_watchdog_not_starved),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER"))
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
