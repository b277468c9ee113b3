/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_replies_dropped.c - executed, reply lost.
 *
 *   scenario 5c  the test proxy lets the command reach Redis and drops its reply
 *                (then cuts the connection), deterministically. Acquire and release
 *                with and without retries; the final release's re-send; an
 *                in-process hand-off (TRANSFER); and a lost reentrant acquisition
 *                that the caller gives up on (user-needs F8, F9).
 *
 * One redis-server for the whole file (h_server_fixture_*); a proxy per test.
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

/* ---- scenario 5c: executed, reply lost (proxy) -------------------------- */

static void test_lost_reply_acquire(void **state) {
    const long long wd = H_MS(1500);
    h_proxy *px = h_proxy_start(h_server_port(h_srv));
    redisContext *r = h_server_redis(h_srv);
    rlock_client *c3 = h_open_retries(h_proxy_url(px), wd, H_MS(1000), 3, 100, NULL);
    rlock_client *c0 = h_open_retries(h_proxy_url(px), wd, H_MS(1000), 0, 100, NULL);
    const char *n1 = h_unique_name("lost-acq3"), *n2 = h_unique_name("lost-acq0");
    const char *n3 = h_unique_name("lost-acq0b");
    rlock *l1 = h_get(c3, n1), *l2 = h_get(c0, n2), *l3 = h_get(c0, n3);
    struct h_proxy_stats st;
    long long gone;
    int rc;
    (void)state;

    /* With retries (a wait > 0: try_lock(0) makes one attempt and never
     * re-sends): the re-send adopts the first send's acquisition. */
    h_proxy_drop_replies(px, 1);
    H_ASSERT_RC(rlock_try_lock(l1, 2000, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    h_proxy_stats(px, &st);
    assert_int_equal(st.dropped_replies, 1);
    H_ASSERT_LOCK_IS(r, n1, rlock_client_id(c3), 1);
    H_ASSERT_RC(rlock_hold_count(l1), 1);
    h_sleep_ms(wd + wd / 3);
    H_ASSERT_LOCK_IS(r, n1, rlock_client_id(c3), 1); /* renewed */
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_OK);
    assert_int_equal(h_exists(r, n1, strlen(n1)), 0);

    /* Without retries, giving up: the field is there (count 1), never renewed,
     * and expires after its lease. */
    h_proxy_drop_replies(px, 1);
    rc = rlock_try_lock(l2, 0, RLOCK_LEASE_WATCHDOG);
    H_ASSERT_RC(rc, RLOCK_EIO);
    H_ASSERT_LOCK_IS(r, n2, rlock_client_id(c0), 1);
    gone = h_orphan_expires(r, n2, rlock_client_id(c0), wd);
    H_ASSERT_RC(rlock_is_locked(l2), 0);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_ENOTOWNER);

    /* Without retries, calling again: adopted exactly once (count 1), renewed. */
    h_proxy_drop_replies(px, 1);
    H_ASSERT_RC(rlock_try_lock(l3, 0, RLOCK_LEASE_WATCHDOG), RLOCK_EIO);
    H_ASSERT_LOCK_IS(r, n3, rlock_client_id(c0), 1);
    H_ASSERT_RC(rlock_try_lock(l3, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, n3, rlock_client_id(c0), 1);
    H_ASSERT_RC(rlock_hold_count(l3), 1);
    h_sleep_ms(wd + wd / 3);
    H_ASSERT_LOCK_IS(r, n3, rlock_client_id(c0), 1);
    H_ASSERT_RC(rlock_unlock(l3), RLOCK_OK);
    assert_int_equal(h_exists(r, n3, strlen(n3)), 0);

    printf("scenario 5c acquire: reply dropped -> with 3 retries OK, count 1, renewed; "
           "with 0 retries EIO, field count 1 left unrenewed, expired after %lld ms "
           "(lease %lld); called again: adopted once, count 1\n", gone, wd);
    rlock_free(l1);
    rlock_free(l2);
    rlock_free(l3);
    rlock_client_close(c3);
    rlock_client_close(c0);
    h_proxy_stop(px);
    redisFree(r);
}

static void test_lost_reply_release(void **state) {
    h_proxy *px = h_proxy_start(h_server_port(h_srv));
    redisContext *r = h_server_redis(h_srv);
    rlock_client *c3 = h_open_retries(h_proxy_url(px), 30000, H_MS(1000), 3, 100, NULL);
    rlock_client *c0 = h_open_retries(h_proxy_url(px), 30000, H_MS(1000), 0, 100, NULL);
    const char *n1 = h_unique_name("lost-rel3"), *n2 = h_unique_name("lost-rel0");
    rlock *l1 = h_get(c3, n1), *l2 = h_get(c0, n2);
    long long pub0;
    (void)state;

    /* Count 2, with retries: exactly one release. */
    H_ASSERT_RC(rlock_lock(l1), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l1), RLOCK_OK);
    h_proxy_drop_replies(px, 1);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, n1, rlock_client_id(c3), 1);
    /* Count 1, with retries: the first send deleted it; the re-send says OK. */
    pub0 = h_commandstat_calls(r, "publish");
    h_proxy_drop_replies(px, 1);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_OK);
    assert_int_equal(h_exists(r, n1, strlen(n1)), 0);
    assert_int_equal(h_commandstat_calls(r, "publish") - pub0, 1);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_ENOTOWNER);

    /* Count 2, no retries: EIO (it did apply); unlock again is a no-op, not a
     * second release. */
    H_ASSERT_RC(rlock_lock(l2), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l2), RLOCK_OK);
    h_proxy_drop_replies(px, 1);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_EIO);
    H_ASSERT_LOCK_IS(r, n2, rlock_client_id(c0), 1);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, n2, rlock_client_id(c0), 1);
    H_ASSERT_RC(rlock_hold_count(l2), 1);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    assert_int_equal(h_exists(r, n2, strlen(n2)), 0);

    /* Count 1, no retries: EIO (it did apply); unlock again finds the hold gone
     * and says so, without reporting the hold lost: the first unlock released it. */
    rlock_stats st = {.struct_size = sizeof st};
    H_ASSERT_RC(rlock_lock(l2), RLOCK_OK);
    h_proxy_drop_replies(px, 1);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_EIO);
    assert_int_equal(h_exists(r, n2, strlen(n2)), 0);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_client_stats(c0, &st), RLOCK_OK);
    assert_int_equal(st.losses, 0);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_ENOTOWNER);

    printf("scenario 5c release: reply dropped -> count 2 with retries ends at 1 (OK); "
           "count 1 with retries: deleted once, OK; count 2 without retries: EIO, applied, "
           "the repeated unlock is a no-op (count stays 1); count 1 without retries: EIO, "
           "the repeated unlock ENOTOWNER, no loss reported\n");
    rlock_free(l1);
    rlock_free(l2);
    rlock_client_close(c3);
    rlock_client_close(c0);
    h_proxy_stop(px);
    redisFree(r);
}

/*
 * An in-process hand-off (TRANSFER) whose reply is lost. With retries the
 * re-send finds the waiter at count 1 and reports success; without, the
 * unlock returns RLOCK_EIO and the waiter's own attempt adopts the hold the
 * TRANSFER gave it. Either way: one owner (the waiter, count 1), nothing
 * published, the waiter returns RLOCK_OK.
 */
static void lost_transfer(int retries) {
    h_proxy *px = h_proxy_start(h_server_port(h_srv));
    redisContext *r = h_server_redis(h_srv);
    rlock_client *c = h_open_retries(h_proxy_url(px), 30000, H_MS(1000), retries, 100, NULL);
    const char *name = h_unique_name(retries ? "lost-xfer3" : "lost-xfer0");
    rlock *l = h_get(c, name);
    h_actor *waiter = h_actor_start();
    long long pub0;
    int rc;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_actor_post(waiter, h_op_lock, l);
    h_scripts_quiet(r, 200, 10000);
    pub0 = h_commandstat_calls(r, "publish");
    h_proxy_drop_replies(px, 1);
    rc = rlock_unlock(l);
    H_ASSERT_RC(rc, retries ? RLOCK_OK : RLOCK_EIO);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    assert_int_equal(h_actor_call(waiter, h_op_is_held, l), 1);
    assert_int_equal(h_commandstat_calls(r, "publish") - pub0, 0);
    /* The old holder holds nothing; the new one releases normally. */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    printf("hand-off reply dropped, %d re-sends: unlock %s, waiter RLOCK_OK holding count 1, "
           "0 messages published\n", retries, rlock_status_name(rc));

    h_actor_stop(waiter);
    rlock_free(l);
    rlock_client_close(c);
    h_proxy_stop(px);
    redisFree(r);
}

static void test_lost_reply_transfer(void **state) {
    (void)state;
    lost_transfer(3);
    lost_transfer(0);
}

/*
 * A reentrant acquisition whose reply is lost (no retries) returns RLOCK_EIO.
 * The caller gives up on it and releases the one hold it knows of. The
 * header promises that an error return never leaves a renewed hold behind:
 * the lock must end free (at the latest when the extra hold's lease runs out),
 * not held and renewed for as long as the thread lives.
 */
static void test_lost_reply_reentrant(void **state) {
    const long long wd = H_MS(1500);
    h_proxy *px = h_proxy_start(h_server_port(h_srv));
    redisContext *r = h_server_redis(h_srv);
    rlock_client *c0 = h_open_retries(h_proxy_url(px), wd, H_MS(1000), 0, 100, NULL);
    const char *name = h_unique_name("lost-reent");
    rlock *l = h_get(c0, name);
    long long t0, count = 0, elapsed;
    int rc, n;
    (void)state;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    h_wait_renewal(r, name, 50, h_scaled(wd)); /* no renewal round will race with the drop */
    h_proxy_drop_replies(px, 1);
    rc = rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG);
    H_ASSERT_RC(rc, RLOCK_EIO);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c0), 2); /* it ran; the reply was lost */
    /* The caller knows of one hold and releases it. */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    t0 = h_now_ms();
    /* Free within the lease of the lost acquisition (plus slack), or never. */
    while (h_now_ms() - t0 < wd + H_MS(500) && h_exists(r, name, strlen(name)))
        h_sleep_ms(20);
    n = h_own_fields(r, name, rlock_client_id(c0), &count);
    elapsed = h_now_ms() - t0;
    printf("scenario 5c reentrant: lost reentrant acquisition (EIO), then one unlock: "
           "%s %lld ms later (hold count %lld, PTTL %lld)\n",
           n ? "STILL HELD" : "free", elapsed, n ? count : 0, h_pttl(r, name, strlen(name)));
    if (n != 0)
        rlock_unlock(l); /* clean up before failing */
    rlock_free(l);
    rlock_client_close(c0);
    h_proxy_stop(px);
    redisFree(r);
    if (n != 0)
        H_FAIL("a reentrant try_lock that returned RLOCK_EIO (reply lost after the script "
               "ran) left a hold that the watchdog keeps renewing: after the caller's only "
               "unlock, the lock is still held (count %lld) %lld ms later, longer than its "
               "lease (%lld ms)", count, elapsed, wd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lost_reply_acquire),
        cmocka_unit_test(test_lost_reply_release),
        cmocka_unit_test(test_lost_reply_transfer),
        cmocka_unit_test(test_lost_reply_reentrant),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* The proxy drops the next reply whoever it is for: no registration writes
     * beside the commands under test (test_observe.c covers the registration). */
    h_register_clients = 0;
    if (getenv("FAULT_FILTER")) /* e.g. FAULT_FILTER='test_lost*' */
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, h_server_fixture_start, h_server_fixture_stop);
}
