/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_truth_owners.c - ownership truth (issue 8) with two owners in one
 * client: a thread that lost its lock while another thread of the same
 * client took it is told exactly once, its unlock changes nothing, and the
 * new owner's hold is renewed.
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

/* ---- 1. one client, two owners ----------------------------------------- */

/*
 * Thread A holds X (watchdog); thread B of the same client waits for X;
 * another client force-unlocks X; B acquires it. A's loss is reported exactly
 * once, A's unlock is ENOTOWNER and changes nothing, B's hold is renewed and
 * B releases it normally.
 * Old code: one hold entry per lock name; B's acquisition took over A's
 * entry, so the watchdog renewed B's field and A's loss was never reported
 * (on_lock_lost stayed 0, which fails the first wait for it below).
 */
static void test_one_client_two_owners(void **state) {
    struct h_lossrec rec;
    rlock_client *c, *admin;
    const char *name = h_unique_name("twoowners");
    size_t n = strlen(name);
    rlock *l, *la;
    redisContext *r = h_redis();
    h_actor *a = h_actor_start(), *b = h_actor_start();
    struct h_try bt;
    char *field_a, *field_b;
    long long t_lost;
    (void)state;

    h_lossrec_init(&rec);
    c = h_lossrec_open(NULL, WD, &rec);
    admin = h_open(30000, 0);
    l = h_get(c, name);
    la = h_get(admin, name);

    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
    field_a = h_lock_owner(r, name);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);

    /* B waits (10 s, watchdog) and is subscribed before the forced unlock. */
    bt.lock = l;
    bt.wait_ms = H_MS(10000);
    bt.lease_ms = RLOCK_LEASE_WATCHDOG;
    h_actor_post(b, h_op_try_lock, &bt);
    H_WAIT_FOR(h_numsub(r, name, n) >= 1, 3000);
    assert_false(h_actor_done(b));

    H_ASSERT_RC(rlock_force_unlock(la), 1);
    H_ASSERT_RC((int)h_actor_wait(b, 5000), RLOCK_OK);
    field_b = h_lock_owner(r, name);
    assert_string_not_equal(field_a, field_b);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);

    /* A's loss: reported exactly once, to both callbacks. */
    H_WAIT_FOR(h_lossrec_lost(&rec, name) >= 1, WD + 1000);
    t_lost = h_now_ms();
    H_WAIT_FOR(h_lossrec_lost_events(&rec, name) >= 1, 1000);
    h_sleep_ms(2 * (WD / 3) + H_MS(100)); /* two more renewal rounds */
    assert_int_equal(h_lossrec_lost(&rec, name), 1);
    assert_int_equal(h_lossrec_lost_events(&rec, name), 1);
    assert_int_equal(h_lossrec_others(&rec, name), 0);

    /* A learns it holds nothing; nothing changes in Redis. */
    H_ASSERT_RC((int)h_actor_call(a, h_op_is_held, l), 0);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ENOTOWNER);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    assert_int_equal(h_cmd_int(r, "HEXISTS %b %s", name, n, field_b), 1);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ENOTOWNER);

    /* B's hold lives on past the watchdog timeout: it is renewed. */
    while (h_now_ms() < t_lost + WD + WD / 3) {
        long long pttl = h_pttl(r, name, n);
        if (pttl <= 0)
            fail_msg("B's lock %s expired (pttl %lld): not renewed", name, pttl);
        h_sleep_ms(20);
    }
    assert_int_equal(h_cmd_int(r, "HEXISTS %b %s", name, n, field_b), 1);
    assert_true(h_pttl(r, name, n) > 0);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC((int)h_actor_call(b, h_op_is_held, l), 1);
    H_ASSERT_RC((int)h_actor_call(b, h_op_hold_count, l), 1);
    assert_int_equal(h_lossrec_lost(&rec, name), 1);
    assert_int_equal(h_lossrec_lost_events(&rec, name), 1);

    H_ASSERT_RC((int)h_actor_call(b, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);
    /* A's view did not come back to life with B's release. */
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ENOTOWNER);
    h_sleep_ms(WD / 3 + H_MS(100));
    assert_int_equal(h_lossrec_lost(&rec, name), 1);
    assert_int_equal(h_lossrec_lost_events(&rec, name), 1);
    assert_int_equal(h_lossrec_others(&rec, name), 0);

    free(field_a);
    free(field_b);
    h_actor_stop(a);
    h_actor_stop(b);
    rlock_free(l);
    rlock_free(la);
    rlock_client_close(c);
    rlock_client_close(admin);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_client_two_owners),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
