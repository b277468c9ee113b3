/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_lock_redis.c - the lock as Redis and other clients see it:
 * force_unlock (ours and a Redisson holder's, and what the old holder then
 * learns), the "0" unlock message on the Redisson channel, values of another
 * type under the lock's name, and SCRIPT FLUSH.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* ---- force_unlock ---------------------------------------------------- */

static void test_force_unlock(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("force");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    redisContext *sub = h_sub_open(h_url(), name, strlen(name));
    h_actor *a = h_actor_start();
    char *msg;
    (void)state;

    H_ASSERT_RC(rlock_force_unlock(l), 0);
    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);

    H_ASSERT_RC(rlock_force_unlock(l), 1);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    msg = h_sub_read(sub, 2000);
    assert_non_null(msg);
    assert_string_equal(msg, "0");
    free(msg);
    H_ASSERT_RC(rlock_force_unlock(l), 0);
    H_ASSERT_RC(rlock_is_locked(l), 0);

    /* The old holder learns it at unlock: two levels deep, RLOCK_ELOST (after
     * it the thread would still believe it held); then it holds nothing. */
    H_ASSERT_RC((int)h_actor_call(a, h_op_is_held, l), 0);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ELOST);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* Force-unlocking a foreign (Redisson) holder works too. */
    h_cmd_ok(r, "HSET %s %s 3", name, "6f1d3c2e-0000-4000-8000-000000000001:1");
    h_cmd_ok(r, "PEXPIRE %s 30000", name); /* every Redisson lock has a TTL */
    H_ASSERT_RC(rlock_force_unlock(l), 1);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    h_actor_stop(a);
    redisFree(sub);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- the unlock message ---------------------------------------------- */

/* Unlock to zero publishes "0" on the Redisson channel; a reentrant unlock
 * publishes nothing. */
static void check_channel(rlock_client *c, redisContext *r, const char *name) {
    rlock *l = h_get(c, name);
    redisContext *sub = h_sub_open(h_url(), name, strlen(name));
    long long pub0;
    char *msg;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    pub0 = h_commandstat_calls(r, "publish");
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_commandstat_calls(r, "publish"), pub0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_commandstat_calls(r, "publish"), pub0 + 1);
    msg = h_sub_read(sub, 2000);
    if (!msg)
        fail_msg("no message on the channel of %s", name);
    assert_string_equal(msg, "0");
    free(msg);
    redisFree(sub);
    rlock_free(l);
}

static void test_unlock_channel(void **state) {
    rlock_client *c = h_open(30000, 0);
    redisContext *r = h_redis();
    char name[300];
    (void)state;
    check_channel(c, r, h_unique_name("chan"));
    snprintf(name, sizeof name, "%s{tag}", h_unique_name("chan"));
    check_channel(c, r, name);
    snprintf(name, sizeof name, "{%s}", h_unique_name("chan"));
    check_channel(c, r, name);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- coexistence with other data ------------------------------------ */

static void test_wrongtype(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("wrongtype");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    char *v;
    long long t0;
    (void)state;

    h_cmd_ok(r, "SET %s x", name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_EREDIS);
    H_ASSERT_RC(rlock_lock_lease(l, 5000), RLOCK_EREDIS);
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_EREDIS);
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_EREDIS);
    /* An error is not "busy": no waiting for the whole wait. */
    t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(l, H_MS(3000), -1), RLOCK_EREDIS);
    H_ASSERT_BETWEEN(h_now_ms() - t0, 0, H_MS(1000));
    H_ASSERT_RC(rlock_hold_count(l), RLOCK_EREDIS);
    v = h_cmd_str(r, "GET %s", name);
    assert_non_null(v);
    assert_string_equal(v, "x");
    free(v);
    assert_int_equal(h_pttl(r, name, strlen(name)), -1);

    /* Another type (a list). */
    h_cmd_ok(r, "DEL %s", name);
    h_cmd_ok(r, "RPUSH %s a b", name);
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_EREDIS);
    assert_int_equal(h_cmd_int(r, "LLEN %s", name), 2);
    assert_int_equal(h_pttl(r, name, strlen(name)), -1);
    h_cmd_ok(r, "DEL %s", name);

    /* Once the key is gone, the lock works. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* SCRIPT FLUSH: the next lock reloads the script with exactly one EVAL. */
static void test_script_flush(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("flush"), *name2 = h_unique_name("flush2");
    rlock *l = h_get(c, name), *l2 = h_get(c, name2);
    redisContext *r = h_redis();
    long long eval0, eval1;
    (void)state;

    /* Warm up: everything loaded and used once. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    h_cmd_ok(r, "SCRIPT FLUSH");
    eval0 = h_commandstat_calls(r, "eval");
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    assert_int_equal(h_commandstat_calls(r, "eval") - eval0, 1);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);
    assert_int_equal(h_commandstat_calls(r, "eval") - eval0, 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    /* The unlock script may have needed its own reload: at most one EVAL. */
    eval1 = h_commandstat_calls(r, "eval");
    H_ASSERT_BETWEEN(eval1 - eval0, 1, 2);

    /* Everything is cached again: no more EVAL. */
    H_ASSERT_RC(rlock_lock(l2), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_commandstat_calls(r, "eval"), eval1);

    rlock_free(l);
    rlock_free(l2);
    redisFree(r);
    rlock_client_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_force_unlock),
        cmocka_unit_test(test_unlock_channel),
        cmocka_unit_test(test_wrongtype),
        cmocka_unit_test(test_script_flush),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
