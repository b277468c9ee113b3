/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_truth_config.c - ownership truth (issue 8) for the configuration:
 * rlock_config's documented ranges are the real ones (both bounds open a
 * client, one past each is RLOCK_EINVAL).
 *
 * Every test names, in a comment line starting "Old code:", what the library
 * before issue 8 did, and so why the test fails there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ---- 5. config ranges ---------------------------------------------------- */

enum cfg_field {
    F_WATCHDOG,
    F_CONNECT,
    F_COMMAND,
    F_POOL,
    F_RETRIES,
    F_RETRY_INTERVAL,
    F_HANDOFFS
};

static const char *const field_names[] = {
    "watchdog_timeout_ms", "connect_timeout_ms", "command_timeout_ms", "pool_size",
    "retry_attempts",      "retry_interval_ms",  "local_handoffs"};

/* rlock_client_open() with one field set to v; the client is closed at once. */
static int open_with(enum cfg_field f, long long v) {
    rlock_config cfg;
    rlock_client *c = NULL;
    int rc;
    h_config(&cfg);
    switch (f) {
    case F_WATCHDOG: cfg.watchdog_timeout_ms = v; break;
    case F_CONNECT: cfg.connect_timeout_ms = (int)v; break;
    case F_COMMAND: cfg.command_timeout_ms = (int)v; break;
    case F_POOL: cfg.pool_size = (int)v; break;
    case F_RETRIES: cfg.retry_attempts = (int)v; break;
    case F_RETRY_INTERVAL: cfg.retry_interval_ms = (int)v; break;
    case F_HANDOFFS: cfg.local_handoffs = (int)v; break;
    }
    rc = rlock_client_open(&cfg, &c);
    if (rc == RLOCK_OK) {
        rlock *l = NULL;
        /* The client works (a trivial call) before it is closed. */
        if (rlock_get(c, "rlock-test:truth:cfg-probe", &l) == RLOCK_OK) {
            int locked = rlock_is_locked(l);
            if (locked != 0 && locked != 1)
                print_message("      %s = %lld: is_locked = %s\n", field_names[f], v,
                              rlock_status_name(locked));
            rlock_free(l);
        }
        rlock_client_close(c);
    } else {
        assert_null(c);
    }
    return rc;
}

/* The bound v must be accepted. A 1 ms connect or command bound is accepted
 * too, but may run out against a real server: RLOCK_EIO is then the honest
 * answer; RLOCK_EINVAL never is. */
static void accepted(enum cfg_field f, long long v, int may_time_out) {
    int rc = open_with(f, v);
    if (rc == RLOCK_OK || (may_time_out && rc == RLOCK_EIO))
        return;
    fail_msg("%s = %lld: rlock_client_open = %s (%s), expected RLOCK_OK", field_names[f], v,
             rlock_status_name(rc), rlock_last_error());
}

static void refused(enum cfg_field f, long long v) {
    int rc = open_with(f, v);
    rlock_error_info info;
    if (rc != RLOCK_EINVAL)
        fail_msg("%s = %lld: rlock_client_open = %s, expected RLOCK_EINVAL", field_names[f], v,
                 rlock_status_name(rc));
    rlock_last_error_info(&info);
    assert_int_equal(info.status, RLOCK_EINVAL);
}

/*
 * Every range rlock.h documents for rlock_config is the accepted range: both
 * bounds open a client, one past each is RLOCK_EINVAL.
 * Old code: connect_timeout_ms and command_timeout_ms had no upper bound
 * (3600001 was accepted), so the header's ranges were not the real ones.
 */
static void test_config_ranges(void **state) {
    (void)state;
    accepted(F_WATCHDOG, 30, 0);
    refused(F_WATCHDOG, 29);
    accepted(F_WATCHDOG, RLOCK_MAX_LEASE_MS, 0);
    refused(F_WATCHDOG, RLOCK_MAX_LEASE_MS + 1);
    refused(F_WATCHDOG, RLOCK_LEASE_WATCHDOG);

    accepted(F_CONNECT, 1, 1);
    refused(F_CONNECT, 0);
    refused(F_CONNECT, -1);
    accepted(F_CONNECT, 3600000, 0);
    refused(F_CONNECT, 3600001);

    accepted(F_COMMAND, 1, 1);
    refused(F_COMMAND, 0);
    refused(F_COMMAND, -1);
    accepted(F_COMMAND, 3600000, 0);
    refused(F_COMMAND, 3600001);

    accepted(F_POOL, 1, 0);
    refused(F_POOL, 0);
    accepted(F_POOL, 1024, 0);
    refused(F_POOL, 1025);

    accepted(F_RETRIES, 0, 0);
    refused(F_RETRIES, -1);
    accepted(F_RETRIES, 100, 0);
    refused(F_RETRIES, 101);

    accepted(F_RETRY_INTERVAL, 0, 0);
    refused(F_RETRY_INTERVAL, -1);
    accepted(F_RETRY_INTERVAL, 3600000, 0);
    refused(F_RETRY_INTERVAL, 3600001);

    accepted(F_HANDOFFS, 0, 0);
    refused(F_HANDOFFS, -1);
    accepted(F_HANDOFFS, 1000, 0);
    refused(F_HANDOFFS, 1001);

    /* The defaults themselves are in range. */
    {
        rlock_config cfg;
        rlock_client *c = NULL;
        rlock_config_init(&cfg);
        cfg.url = h_url();
        H_ASSERT_RC(rlock_client_open(&cfg, &c), RLOCK_OK);
        rlock_client_close(c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
