/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_api_handles.c - clients and lock handles (include/rlock.h): client
 * ids, NULL arguments, lock names (copied, any byte but NUL, the longest),
 * bad leases, extreme waits on a free lock, unlocks by a non-owner, and
 * every call after rlock_client_close.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/* ---- clients and handles -------------------------------------------- */

static int is_uuid(const char *s) {
    size_t i;
    if (!s || strlen(s) != 36)
        return 0;
    for (i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return 0;
        } else if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

static void test_client_id(void **state) {
    rlock_client *a = h_open(0, 0), *b = h_open(0, 0);
    const char *ida = rlock_client_id(a), *idb = rlock_client_id(b);
    (void)state;
    assert_true(is_uuid(ida));
    assert_true(is_uuid(idb));
    assert_string_not_equal(ida, idb);
    assert_ptr_equal(rlock_client_id(a), ida);
    assert_null(rlock_client_id(NULL));
    rlock_client_close(a);
    rlock_client_close(b);
}

static void test_null_noops(void **state) {
    (void)state;
    rlock_client_close(NULL);
    rlock_free(NULL);
    assert_null(rlock_name(NULL));
    assert_null(rlock_client_id(NULL));
}

static void test_get_args(void **state) {
    rlock_client *c = h_open(0, 0);
    rlock *l = NULL;
    char name[] = "rlock-test:copied";
    char *big;
    (void)state;

    H_ASSERT_RC(rlock_get(NULL, "x", &l), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get(c, NULL, &l), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get(c, "x", NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get(c, "", &l), RLOCK_EINVAL);

    /* The name is copied. */
    l = h_get(c, name);
    name[0] = 'X';
    assert_string_equal(rlock_name(l), "rlock-test:copied");
    rlock_free(l);

    big = malloc(RLOCK_MAX_NAME_LEN + 2);
    assert_non_null(big);
    memset(big, 'n', RLOCK_MAX_NAME_LEN + 1);
    big[RLOCK_MAX_NAME_LEN + 1] = 0; /* 65537 bytes */
    l = NULL;
    H_ASSERT_RC(rlock_get(c, big, &l), RLOCK_EINVAL);
    big[RLOCK_MAX_NAME_LEN] = 0; /* 65536 bytes */
    H_ASSERT_RC(rlock_get(c, big, &l), RLOCK_OK);
    assert_non_null(l);
    assert_int_equal(strlen(rlock_name(l)), RLOCK_MAX_NAME_LEN);
    assert_memory_equal(rlock_name(l), big, RLOCK_MAX_NAME_LEN);
    rlock_free(l);
    free(big);
    rlock_client_close(c);
}

/* Locks name (len bytes), checks the Redis layout, unlocks, checks it is
 * gone. */
static void lock_roundtrip(rlock_client *c, redisContext *r, const char *name) {
    size_t len = strlen(name);
    rlock *l = h_get(c, name);
    h_cmd_ok(r, "DEL %b", name, len);
    H_ASSERT_RC(rlock_lock_lease(l, 20000), RLOCK_OK);
    if (!h_lock_is(r, name, len, rlock_client_id(c), 1))
        fail_msg("name of %zu bytes: wrong layout", len);
    H_ASSERT_BETWEEN(h_pttl(r, name, len), 10000, 20000);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, len), 0);
    H_ASSERT_RC(rlock_is_locked(l), 0);
    rlock_free(l);
}

static void test_odd_names(void **state) {
    rlock_client *c = h_open(0, 0);
    redisContext *r = h_redis();
    char buf[600];
    const char *base = h_unique_name("odd");
    static const char *const suffixes[] = {
        " with spaces ", "\r\n", "line\nfeed", "cr\rcr", "{tag}", "{", "}", "}{", "a{b}c",
        "\"quoted\" 'single'", "*", "$3", "%s%n", "\\", "\t\v\f",
    };
    size_t i;
    char *big;
    (void)state;

    for (i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", base, suffixes[i]);
        lock_roundtrip(c, r, buf);
    }
    /* Every byte but NUL. */
    {
        size_t n = strlen(base);
        int b;
        memcpy(buf, base, n);
        for (b = 1; b < 256; b++)
            buf[n++] = (char)b;
        buf[n] = 0;
        lock_roundtrip(c, r, buf);
    }
    /* The longest name. */
    big = malloc(RLOCK_MAX_NAME_LEN + 1);
    assert_non_null(big);
    memset(big, 'L', RLOCK_MAX_NAME_LEN);
    memcpy(big, base, strlen(base));
    big[RLOCK_MAX_NAME_LEN] = 0;
    lock_roundtrip(c, r, big);
    free(big);

    redisFree(r);
    rlock_client_close(c);
}

static void test_null_handle(void **state) {
    long long ttl = 12345;
    rlock_client *c = h_open(0, 0);
    rlock *l = h_get(c, h_unique_name("nullttl"));
    (void)state;
    H_ASSERT_RC(rlock_lock(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_lock_lease(NULL, 1000), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_lock_lease(NULL, RLOCK_LEASE_WATCHDOG), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock(NULL, 0, -1), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock(NULL, 100, 1000), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_unlock(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_force_unlock(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_is_locked(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_is_held_by_current_thread(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_hold_count(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_remain_ttl(NULL, &ttl), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_remain_ttl(l, NULL), RLOCK_EINVAL);
    rlock_free(l);
    rlock_client_close(c);
}

static void test_bad_leases(void **state) {
    static const long long bad[] = {0, -2, -3, -1000, LLONG_MIN, RLOCK_MAX_LEASE_MS + 1, LLONG_MAX};
    rlock_client *c = h_open(0, 0);
    const char *name = h_unique_name("lease");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    long long ttl;
    size_t i;
    (void)state;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = rlock_lock_lease(l, bad[i]);
        if (rc != RLOCK_EINVAL)
            fail_msg("rlock_lock_lease(%lld) = %s", bad[i], rlock_status_name(rc));
        rc = rlock_try_lock(l, 0, bad[i]);
        if (rc != RLOCK_EINVAL)
            fail_msg("rlock_try_lock(0, %lld) = %s", bad[i], rlock_status_name(rc));
        rc = rlock_try_lock(l, 100, bad[i]);
        if (rc != RLOCK_EINVAL)
            fail_msg("rlock_try_lock(100, %lld) = %s", bad[i], rlock_status_name(rc));
        rc = rlock_try_lock(l, -1, bad[i]);
        if (rc != RLOCK_EINVAL)
            fail_msg("rlock_try_lock(-1, %lld) = %s", bad[i], rlock_status_name(rc));
        assert_int_equal(h_exists(r, name, strlen(name)), 0);
    }
    /* A bad lease is rejected even when the thread already holds the lock,
     * and the hold is unchanged. */
    H_ASSERT_RC(rlock_lock_lease(l, 20000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, 0), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock(l, 0, -2), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* The extremes of the valid range. */
    H_ASSERT_RC(rlock_lock_lease(l, RLOCK_MAX_LEASE_MS), RLOCK_OK);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    H_ASSERT_BETWEEN(ttl, RLOCK_MAX_LEASE_MS - H_MS(10000), RLOCK_MAX_LEASE_MS);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), RLOCK_MAX_LEASE_MS - H_MS(10000),
                     RLOCK_MAX_LEASE_MS);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    H_ASSERT_RC(rlock_lock_lease(l, 1), RLOCK_OK);
    H_WAIT_FOR(h_exists(r, name, strlen(name)) == 0, 1000);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    H_ASSERT_RC(rlock_try_lock(l, 0, 1), RLOCK_OK);
    H_WAIT_FOR(h_exists(r, name, strlen(name)) == 0, 1000);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

static void test_wait_extremes_free_lock(void **state) {
    static const long long waits[] = {0, 1, -1, -2, LLONG_MIN, LLONG_MAX, LLONG_MAX - 1};
    rlock_client *c = h_open(0, 0);
    const char *name = h_unique_name("waitx");
    rlock *l = h_get(c, name);
    size_t i;
    (void)state;
    for (i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        long long t0 = h_now_ms();
        int rc = rlock_try_lock(l, waits[i], 10000);
        if (rc != RLOCK_OK)
            fail_msg("rlock_try_lock(wait %lld) on a free lock = %s", waits[i], rlock_status_name(rc));
        H_ASSERT_BETWEEN(h_now_ms() - t0, 0, H_MS(1000));
        /* Reentrant with the same wait. */
        rc = rlock_try_lock(l, waits[i], RLOCK_LEASE_WATCHDOG);
        if (rc != RLOCK_OK)
            fail_msg("reentrant rlock_try_lock(wait %lld) = %s", waits[i], rlock_status_name(rc));
        H_ASSERT_RC(rlock_hold_count(l), 2);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
        H_ASSERT_RC(rlock_is_locked(l), 0);
    }
    rlock_free(l);
    rlock_client_close(c);
}

static void test_unlock_not_owner(void **state) {
    rlock_client *c = h_open(0, 0);
    const char *name = h_unique_name("dbl");
    rlock *l = h_get(c, name), *l2 = h_get(c, name);
    redisContext *r = h_redis();
    long long pub0, pub1;
    (void)state;

    pub0 = h_commandstat_calls(r, "publish");
    /* Never held. */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    /* Held once, released twice. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    pub1 = h_commandstat_calls(r, "publish");
    assert_int_equal(pub1 - pub0, 1); /* the real release published once */
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    /* ENOTOWNER publishes nothing. */
    assert_int_equal(h_commandstat_calls(r, "publish"), pub1);
    H_ASSERT_RC(rlock_hold_count(l), 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);

    /* Another handle of the same lock is the same lock. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(l2), 1);
    H_ASSERT_RC(rlock_lock(l2), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rlock_free(l);
    rlock_free(l2);
    redisFree(r);
    rlock_client_close(c);
}

static void test_use_after_close(void **state) {
    rlock_client *c = h_open(0, 0);
    const char *name = h_unique_name("closed");
    rlock *l = h_get(c, name), *held = h_get(c, h_unique_name("closedheld"));
    rlock *l2 = NULL;
    long long ttl = 7;
    char id[64];
    (void)state;

    snprintf(id, sizeof id, "%s", rlock_client_id(c));
    H_ASSERT_RC(rlock_lock_lease(held, 10000), RLOCK_OK);
    rlock_client_close(c);

    H_ASSERT_RC(rlock_get(c, name, &l2), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_lock(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_lock_lease(l, 1000), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_try_lock(l, 1000, 1000), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_is_locked(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_hold_count(l), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_unlock(held), RLOCK_ECLOSED);
    /* The handle and the client id stay valid until the handles are freed. */
    assert_string_equal(rlock_name(l), name);
    assert_non_null(rlock_client_id(c));
    assert_string_equal(rlock_client_id(c), id);

    /* The held lock was not released by close. */
    {
        redisContext *r = h_redis();
        const char *hn = rlock_name(held);
        H_ASSERT_LOCK_IS(r, hn, id, 1);
        h_cmd_ok(r, "DEL %s", hn);
        redisFree(r);
    }
    rlock_free(l);
    rlock_free(held);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_id),
        cmocka_unit_test(test_null_noops),
        cmocka_unit_test(test_get_args),
        cmocka_unit_test(test_odd_names),
        cmocka_unit_test(test_null_handle),
        cmocka_unit_test(test_bad_leases),
        cmocka_unit_test(test_wait_extremes_free_lock),
        cmocka_unit_test(test_unlock_not_owner),
        cmocka_unit_test(test_use_after_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
