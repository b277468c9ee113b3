/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_truth_relock.c - ownership truth (issue 8) after a loss discovered by
 * the owner's own call: a reentrant acquire or unlock of a lock deleted
 * behind its back is RLOCK_ELOST (or RLOCK_ENOTOWNER for a last unlock),
 * creates and publishes nothing, and the next acquire starts afresh at
 * count 1; the loss is reported once.
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

/* Watchdog timeout of the ownership tests: renewal every WD/3. */
#define WD H_MS(1500)

/* ---- 2. reentrant acquire after a loss --------------------------------- */

/*
 * (a) A thread holds X twice with a 60 s lease; X is deleted from outside.
 * Its next rlock_lock returns RLOCK_ELOST and creates nothing; the call after
 * that acquires afresh with hold count 1. The loss is one LOCK_LOST event.
 * Old code: the acquire found no field, silently re-created X with count 1
 * and returned RLOCK_OK while the thread believed it held 3 levels.
 */
static void test_relock_after_loss_lease(void **state) {
    struct h_lossrec rec;
    rlock_client *c;
    const char *name = h_unique_name("relock");
    size_t n = strlen(name);
    rlock *l;
    redisContext *r = h_redis();
    char *field;
    (void)state;

    h_lossrec_init(&rec);
    c = h_lossrec_open(NULL, WD, &rec);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);
    h_cmd_ok(r, "DEL %b", name, n);

    H_ASSERT_RC(rlock_lock(l), RLOCK_ELOST);
    assert_int_equal(h_exists(r, name, n), 0);
    H_WAIT_FOR(h_lossrec_lost_events(&rec, name) >= 1, 2000);

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    field = h_lock_owner(r, name);
    {
        char *v = h_cmd_str(r, "HGET %b %s", name, n, field);
        assert_non_null(v);
        assert_string_equal(v, "1");
        free(v);
    }
    free(field);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    h_sleep_ms(H_MS(300));
    assert_int_equal(h_lossrec_lost_events(&rec, name), 1);
    assert_int_equal(h_lossrec_others(&rec, name), 0);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * (a') The same discovered by try_lock(wait 0): ELOST, nothing created, then
 * a fresh hold of count 1.
 * Old code: try_lock re-created X with count 1 and returned RLOCK_OK.
 */
static void test_try_lock_after_loss(void **state) {
    struct h_lossrec rec;
    rlock_client *c;
    const char *name = h_unique_name("retry0");
    size_t n = strlen(name);
    rlock *l;
    redisContext *r = h_redis();
    (void)state;

    h_lossrec_init(&rec);
    c = h_lossrec_open(NULL, WD, &rec);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_try_lock(l, 0, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(l, 0, 60000), RLOCK_OK);
    h_cmd_ok(r, "DEL %b", name, n);

    H_ASSERT_RC(rlock_try_lock(l, 0, 60000), RLOCK_ELOST);
    assert_int_equal(h_exists(r, name, n), 0);
    H_ASSERT_RC(rlock_try_lock(l, 0, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);

    H_WAIT_FOR(h_lossrec_lost_events(&rec, name) >= 1, 2000);
    h_sleep_ms(H_MS(300));
    assert_int_equal(h_lossrec_lost_events(&rec, name), 1);
    assert_int_equal(h_lossrec_others(&rec, name), 0);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * (b) The unlock discovers the loss. Held twice (60 s lease), deleted from
 * outside: the first unlock, which would leave the thread believing it still
 * held one level, is RLOCK_ELOST; the next is RLOCK_ENOTOWNER; nothing is
 * re-created or published. Held once: the (last) unlock is RLOCK_ENOTOWNER
 * as rlock.h says, and the loss is still reported once as an event.
 * Old code: the first unlock returned RLOCK_ENOTOWNER (no ELOST existed) and
 * a lease lock's loss was never reported.
 */
static void test_unlock_discovers_loss(void **state) {
    struct h_lossrec rec;
    rlock_client *c;
    const char *name = h_unique_name("unlost2"), *name1 = h_unique_name("unlost1");
    size_t n = strlen(name), n1 = strlen(name1);
    rlock *l, *l1;
    redisContext *r = h_redis(), *sub, *sub1;
    char *msg;
    (void)state;

    h_lossrec_init(&rec);
    c = h_lossrec_open(NULL, WD, &rec);
    l = h_get(c, name);
    l1 = h_get(c, name1);

    /* Held twice. */
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    h_cmd_ok(r, "DEL %b", name, n);
    sub = h_sub_open(h_url(), name, n);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ELOST);
    assert_int_equal(h_exists(r, name, n), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, n), 0);
    H_WAIT_FOR(h_lossrec_lost_events(&rec, name) >= 1, 2000);

    /* Held once. */
    H_ASSERT_RC(rlock_lock_lease(l1, 60000), RLOCK_OK);
    h_cmd_ok(r, "DEL %b", name1, n1);
    sub1 = h_sub_open(h_url(), name1, n1);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name1, n1), 0);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_ENOTOWNER);
    H_WAIT_FOR(h_lossrec_lost_events(&rec, name1) >= 1, 2000);

    /* Nothing was published for either (the unlocks changed nothing). */
    msg = h_sub_read(sub, 200);
    assert_null(msg);
    msg = h_sub_read(sub1, 1);
    assert_null(msg);
    redisFree(sub);
    redisFree(sub1);

    h_sleep_ms(H_MS(300));
    assert_int_equal(h_lossrec_lost_events(&rec, name), 1);
    assert_int_equal(h_lossrec_lost_events(&rec, name1), 1);

    /* Both start afresh. */
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);

    rlock_free(l);
    rlock_free(l1);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * (c) Watchdog variant: held twice, deleted; the watchdog reports the loss
 * (on_lock_lost and one LOCK_LOST event named X); the thread's next
 * rlock_lock is still RLOCK_ELOST (no pretended continuity), the one after
 * acquires afresh with count 1, renewed again.
 * Old code: after the watchdog's report, rlock_lock re-created X with count
 * 1 and returned RLOCK_OK (the thread believing 3 levels).
 */
static void test_relock_after_loss_watchdog(void **state) {
    struct h_lossrec rec;
    rlock_client *c;
    const char *name = h_unique_name("relockwd");
    size_t n = strlen(name);
    rlock *l;
    redisContext *r = h_redis();
    (void)state;

    h_lossrec_init(&rec);
    c = h_lossrec_open(NULL, WD, &rec);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);
    h_cmd_ok(r, "DEL %b", name, n);

    H_WAIT_FOR(h_lossrec_lost(&rec, name) >= 1, WD + 1000);
    assert_int_equal(h_lossrec_lost(&rec, name), 1);
    assert_int_equal(h_exists(r, name, n), 0);

    H_ASSERT_RC(rlock_lock(l), RLOCK_ELOST);
    assert_int_equal(h_exists(r, name, n), 0);
    H_WAIT_FOR(h_lossrec_lost_events(&rec, name) >= 1, 1000);
    assert_int_equal(h_lossrec_lost(&rec, name), 1);
    assert_int_equal(h_lossrec_lost_events(&rec, name), 1);

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);

    /* The fresh hold is renewed past the watchdog timeout; no new report. */
    h_sleep_ms(WD + WD / 3);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    assert_true(h_pttl(r, name, n) > 0);
    assert_int_equal(h_lossrec_lost(&rec, name), 1);
    assert_int_equal(h_lossrec_lost_events(&rec, name), 1);
    assert_int_equal(h_lossrec_others(&rec, name), 0);

    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relock_after_loss_lease),
        cmocka_unit_test(test_try_lock_after_loss),
        cmocka_unit_test(test_unlock_discovers_loss),
        cmocka_unit_test(test_relock_after_loss_watchdog),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
