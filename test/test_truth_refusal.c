/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_truth_refusal.c - ownership truth (issue 8) for refused calls: an
 * unlock that errs has released nothing, and a hash that is not a lock is
 * never taken for one (RLOCK_ENOTLOCK at once, the data untouched), while a
 * foreign Redisson-shaped lock still is a lock.
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

/* ---- 3. an unlock that errs has not released --------------------------- */

/*
 * A server to make ACL users on: the suite's if its url (*base) is plain
 * redis://host:port, else one of our own (*own, *base its url). Its admin connection.
 */
static redisContext *acl_server(h_server **own, const char **base) {
    *own = NULL;
    if (strncmp(*base, "redis://", 8) == 0 && !strchr(*base + 8, '@') && !strchr(*base + 8, '/'))
        return h_redis();
    *own = h_server_start();
    *base = h_server_url(*own);
    return h_server_redis(*own);
}

/*
 * An ACL user that may use every key and command, whose channels are taken
 * away while it holds a lock: the unlock cannot PUBLISH. rlock_unlock is
 * RLOCK_ENOPERM with Redis's NOPERM text, the lock is still held and
 * renewed, never reported lost; force_unlock is refused the same way and
 * leaves it. (A user without the channel from the start is refused the lock
 * itself: test_lock_refused_for_its_unlock.)
 * Old code: RELEASE deleted the key, then failed on PUBLISH: unlock returned
 * RLOCK_EREDIS with the lock gone, and the watchdog later reported it lost.
 */
static void test_unlock_refused_keeps_lock(void **state) {
    struct h_lossrec rec;
    h_server *own = NULL;
    const char *base = h_url();
    redisContext *admin;
    rlock_client *c;
    rlock *l;
    rlock_error_info info;
    char user[64], url[512];
    const char *name = h_unique_name("noperm");
    size_t n = strlen(name);
    long long t_end;
    (void)state;

    admin = acl_server(&own, &base);
    snprintf(user, sizeof user, "rlock-truth-%ld-%lld", (long)getpid(), h_now_us());
    h_cmd_ok(admin, "ACL SETUSER %s on >pw ~* &* +@all", user);
    h_url_auth(url, sizeof url, base, user, "pw");

    h_lossrec_init(&rec);
    c = h_lossrec_open(url, WD, &rec);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(admin, name, rlock_client_id(c), 1);
    h_cmd_ok(admin, "ACL SETUSER %s resetchannels", user);

    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOPERM);
    rlock_last_error_info(&info);
    assert_int_equal(info.status, RLOCK_ENOPERM);
    assert_non_null(info.redis_error);
    /* Redis 6.2 has no NOPERM inside a script: "... The user executing the script can't
     * publish to the channel ..." */
    if (strstr(info.redis_error, h_server_major(admin) >= 7 ? "NOPERM" : "can't publish") == NULL)
        fail_msg("redis_error \"%s\" does not name the refusal (message: %s)", info.redis_error,
                 info.message ? info.message : "(null)");
    /* Nothing changed: still ours, count 1, with a TTL. */
    H_ASSERT_LOCK_IS(admin, name, rlock_client_id(c), 1);
    assert_true(h_pttl(admin, name, n) > 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);
    H_ASSERT_RC(rlock_hold_count(l), 1);

    /* Still held and renewed two watchdog timeouts later; never reported lost. */
    t_end = h_now_ms() + 2 * WD;
    while (h_now_ms() < t_end) {
        long long pttl = h_pttl(admin, name, n);
        if (pttl <= 0)
            fail_msg("lock %s expired after the refused unlock (pttl %lld)", name, pttl);
        h_sleep_ms(20);
    }
    H_ASSERT_LOCK_IS(admin, name, rlock_client_id(c), 1);
    assert_int_equal(h_lossrec_lost(&rec, name), 0);
    assert_int_equal(h_lossrec_lost_events(&rec, name), 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);

    /* force_unlock by that user is refused the same way and leaves the lock. */
    H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ENOPERM);
    rlock_last_error_info(&info);
    assert_int_equal(info.status, RLOCK_ENOPERM);
    assert_non_null(strstr(info.redis_error, h_server_major(admin) >= 7 ? "NOPERM" : "can't publish"));
    H_ASSERT_LOCK_IS(admin, name, rlock_client_id(c), 1);
    assert_true(h_pttl(admin, name, n) > 0);
    h_sleep_ms(WD / 3 + H_MS(100));
    H_ASSERT_LOCK_IS(admin, name, rlock_client_id(c), 1);
    assert_int_equal(h_lossrec_lost(&rec, name), 0);
    assert_int_equal(h_lossrec_lost_events(&rec, name), 0);

    /* Clean up with the admin connection. */
    rlock_free(l);
    rlock_client_close(c);
    h_cmd_ok(admin, "DEL %b", name, n);
    h_cmd_ok(admin, "ACL DELUSER %s", user);
    redisFree(admin);
    if (own)
        h_server_stop(own);
}

/* Fails unless the last error is RLOCK_ENOPERM naming `command` and saying nothing was taken. */
static void assert_refused_for_later(const char *command) {
    rlock_error_info info;
    rlock_last_error_info(&info);
    assert_int_equal(info.status, RLOCK_ENOPERM);
    if (info.message == NULL || strstr(info.message, command) == NULL ||
        strstr(info.message, "not taken") == NULL)
        fail_msg("detail \"%s\" does not name %s and that nothing was taken",
                 info.message ? info.message : "(null)", command);
}

/* One refusal case: an ACL user with all keys and commands but `channels` and `command`; each
 * kind's acquire refused for `refused`. */
static void refused_case(redisContext *admin, const char *base, const char *channels,
                         const char *command, const char *refused) {
    char user[64], url[512];
    const char *name = h_unique_name("laterperm");
    size_t n = strlen(name);
    rlock *plain, *fair, *rd, *wr;

    snprintf(user, sizeof user, "rlock-later-%ld-%lld", (long)getpid(), h_now_us());
    h_cmd_ok(admin, "ACL SETUSER %s on >pw ~* +@all %s %s", user, channels, command);
    rlock_client *c = h_open_url(h_url_auth(url, sizeof url, base, user, "pw"), 0, 0);
    char fair_name[160], rw_name[160];
    snprintf(fair_name, sizeof fair_name, "%s:fair", name);
    snprintf(rw_name, sizeof rw_name, "%s:rw", name);
    plain = h_get(c, name);
    H_ASSERT_RC(rlock_get_fair(c, fair_name, &fair), RLOCK_OK);
    H_ASSERT_RC(rlock_get_rw(c, rw_name, &rd, &wr), RLOCK_OK);

    rlock *each[] = {plain, fair, rd, wr};
    for (size_t i = 0; i < sizeof each / sizeof each[0]; i++) {
        H_ASSERT_RC(rlock_lock(each[i]), RLOCK_ENOPERM);
        assert_refused_for_later(refused);
        H_ASSERT_RC(rlock_try_lock(each[i], 0, 5000), RLOCK_ENOPERM);
        assert_refused_for_later(refused);
        H_ASSERT_RC(rlock_is_held_by_current_thread(each[i]), 0);
        H_ASSERT_RC(rlock_hold_count(each[i]), 0);
    }
    /* Nothing was written: no hash, no queue entry, no read hold. */
    assert_int_equal(h_exists(admin, name, n), 0);
    assert_int_equal(h_exists(admin, fair_name, strlen(fair_name)), 0);
    assert_int_equal(h_exists(admin, rw_name, strlen(rw_name)), 0);
    assert_int_equal(h_cmd_int(admin, "EXISTS redisson_lock_queue:{%s}", fair_name), 0);

    rlock_free(plain);
    rlock_free(fair);
    rlock_free(rd);
    rlock_free(wr);
    rlock_client_close(c);
    h_cmd_ok(admin, "ACL DELUSER %s", user);
}

/*
 * A user who may lock but not unlock -- no PUBLISH on the unlock channel, no
 * DEL on the key -- is refused the lock itself, for every kind: RLOCK_ENOPERM
 * naming the missing command, nothing written in Redis, nothing held.
 * Redis < 7.0 has no redis.acl_check_cmd: there the lock is taken and its
 * unlock is refused with the lock left held (docs/failure-modes.md), which
 * is what this test asserts on such a server.
 * Old code: lock() succeeded, and the first unlock failed with RLOCK_ENOPERM,
 * leaving the lock to linger until its lease ran out.
 */
static void test_lock_refused_for_its_unlock(void **state) {
    h_server *own = NULL;
    const char *base = h_url();
    redisContext *admin;
    (void)state;

    admin = acl_server(&own, &base);
    if (h_server_major(admin) >= 7) {
        refused_case(admin, base, "resetchannels", "+publish", "publish");
        refused_case(admin, base, "&*", "-del", "del");
    } else {
        char user[64], url[512];
        const char *name = h_unique_name("laterperm");
        snprintf(user, sizeof user, "rlock-later-%ld-%lld", (long)getpid(), h_now_us());
        h_cmd_ok(admin, "ACL SETUSER %s on >pw ~* resetchannels +@all", user);
        rlock_client *c = h_open_url(h_url_auth(url, sizeof url, base, user, "pw"), 0, 0);
        rlock *l = h_get(c, name);
        H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOPERM);
        H_ASSERT_LOCK_IS(admin, name, rlock_client_id(c), 1);
        H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ENOPERM);
        rlock_free(l);
        rlock_client_close(c);
        h_cmd_ok(admin, "DEL %s", name);
        h_cmd_ok(admin, "ACL DELUSER %s", user);
    }
    redisFree(admin);
    if (own)
        h_server_stop(own);
}

/* ---- 4. not a lock ------------------------------------------------------ */

/* Fails unless name is a hash with exactly "name" = "bob" and ttl as given
 * (-1: none; > 0: some TTL). */
static void assert_user_hash(redisContext *r, const char *name, int want_ttl) {
    size_t n = strlen(name);
    char *v = h_cmd_str(r, "HGET %b name", name, n);
    long long ttl = h_cmd_int(r, "TTL %b", name, n);
    if (v == NULL || strcmp(v, "bob") != 0)
        fail_msg("HGET %s name = %s, expected bob", name, v ? v : "(nil)");
    free(v);
    assert_int_equal(h_cmd_int(r, "HLEN %b", name, n), 1);
    if (want_ttl < 0)
        assert_int_equal(ttl, -1);
    else if (ttl <= 0)
        fail_msg("TTL %s = %lld, expected > 0", name, ttl);
}

/*
 * An ordinary hash under the lock's name (no TTL) is not a lock: every
 * acquire, unlock and force_unlock says RLOCK_ENOTLOCK at once and leaves it.
 * Old code: try_lock said RLOCK_BUSY (after the whole wait), lock blocked
 * for ever, unlock said ENOTOWNER, and force_unlock deleted the user's data.
 */
static void test_plain_hash_not_a_lock(void **state) {
    rlock_client *c = h_open(30000, 0);
    char name[128];
    rlock *l;
    redisContext *r = h_redis();
    h_actor *a = h_actor_start();
    long long t0, dt, bound;
    (void)state;

    snprintf(name, sizeof name, "user:%s", h_unique_name("plain"));
    h_cmd_ok(r, "HSET %s name bob", name);
    l = h_get(c, name);

    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);

    /* Not a wait for a holder: it answers at once, well under the 2 s wait. */
    bound = H_MS(500) < 1000 ? H_MS(500) : 1000;
    t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(l, 2000, RLOCK_LEASE_WATCHDOG), RLOCK_ENOTLOCK);
    dt = h_now_ms() - t0;
    print_message("      try_lock(wait 2000) on a plain hash returned after %lld ms\n", dt);
    H_ASSERT_BETWEEN(dt, 0, bound);
    H_ASSERT_RC(rlock_try_lock(l, 2000, 10000), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);

    /* rlock_lock does not block (on an actor, so a hang fails the test). */
    h_actor_post(a, h_op_lock, l);
    H_ASSERT_RC((int)h_actor_wait(a, 2000), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);

    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);
    H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);
    {
        rlock_error_info info;
        rlock_last_error_info(&info);
        assert_int_equal(info.status, RLOCK_ENOTLOCK);
    }

    /* After all of that: a lock call from the same thread is still ENOTLOCK
     * (nothing was recorded as held), and the data is intact. */
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_RC(rlock_lock(l), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, -1);

    h_cmd_ok(r, "DEL %s", name);
    h_actor_stop(a);
    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * A hash with a TTL but a field that is not "<id>:<thread>" is not a lock
 * either: try_lock and force_unlock say RLOCK_ENOTLOCK and leave it.
 * Old code: try_lock said RLOCK_BUSY and force_unlock deleted it (1).
 */
static void test_ttl_hash_bad_field_not_a_lock(void **state) {
    rlock_client *c = h_open(30000, 0);
    char name[128];
    rlock *l;
    redisContext *r = h_redis();
    (void)state;

    snprintf(name, sizeof name, "user:%s", h_unique_name("ttlhash"));
    h_cmd_ok(r, "HSET %s name bob", name);
    h_cmd_ok(r, "PEXPIRE %s 60000", name);
    l = h_get(c, name);

    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, 1);
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, 1);
    H_ASSERT_RC(rlock_force_unlock(l), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTLOCK);
    assert_user_hash(r, name, 1);
    assert_true(h_cmd_int(r, "PTTL %s", name) > 50000);

    h_cmd_ok(r, "DEL %s", name);
    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

/*
 * Positive control: a Redisson-shaped lock of someone else (owner field
 * "<uuid>:<thread>" = 1, with a TTL) is a lock: try_lock(wait 0) is BUSY and
 * force_unlock deletes it (1).
 * Old code: passes this one too; it guards the ENOTLOCK rule from being too
 * wide (a library that called everything "not a lock" fails here).
 */
static void test_foreign_lock_is_a_lock(void **state) {
    static const char other[] = "0b8f3c1e-5a4d-4c1b-9f7e-2d6a8b9c0e1f:57";
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("foreign");
    size_t n = strlen(name);
    rlock *l;
    redisContext *r = h_redis();
    (void)state;

    h_cmd_ok(r, "HSET %b %s 1", name, n, other);
    h_cmd_ok(r, "PEXPIRE %b 10000", name, n);
    l = h_get(c, name);
    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    {
        char *v = h_cmd_str(r, "HGET %b %s", name, n, other);
        assert_non_null(v);
        assert_string_equal(v, "1");
        free(v);
    }
    H_ASSERT_RC(rlock_force_unlock(l), 1);
    assert_int_equal(h_exists(r, name, n), 0);
    H_ASSERT_RC(rlock_force_unlock(l), 0);

    rlock_free(l);
    rlock_client_close(c);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unlock_refused_keeps_lock),
        cmocka_unit_test(test_lock_refused_for_its_unlock),
        cmocka_unit_test(test_plain_hash_not_a_lock),
        cmocka_unit_test(test_ttl_hash_bad_field_not_a_lock),
        cmocka_unit_test(test_foreign_lock_is_a_lock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
