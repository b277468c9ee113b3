/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_lease_callback.c - lease truth with a slow callback (issue 8, class
 * 7): on_lock_lost blocks 4 s in a try_lock with a wait; another lock of the
 * client stays renewed meanwhile. The test fails on the library before
 * issue 8 (it says what that code did) and checks the contract of rlock.h.
 *
 * One redis-server per test (h_server_fixture_*); every duration goes through
 * h_scaled() (TEST_TIMEOUT_SCALE; x2 under ASan, x4 under TSan). The test
 * prints one line of what it measured. The callbacks are recorded by the
 * harness's event log (harness/eventlog.h).
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

/* The lock's single field (malloc'd); fails unless it is "<client_id>:<tid>" = 1. */
static char *owner_field(redisContext *c, const char *name, const char *client_id) {
    char *field = NULL;
    long long count = 0;
    if (h_lock_fields(c, name, strlen(name), &field, &count) != 1 || count != 1 ||
        strncmp(field, client_id, strlen(client_id)) != 0)
        H_FAIL("lock %s: expected one field of %s with count 1, got %s = %lld", name, client_id,
               field ? field : "(none)", count);
    return field;
}

/* ---- class 7: a slow callback must not stall renewals -------------------- */

/*
 * Before issue 8 on_lock_lost ran on the watchdog thread: while it blocked
 * (here 4 s in a try_lock with a wait) no lock of the client was renewed,
 * so Z (lease 1.5 s) expired: its PTTL fell to -2 and its field vanished.
 */
static void test_slow_callback_no_stall(void **state) {
    h_server *srv = *state;
    const long long wd = H_MS(1500), block = H_MS(4000);
    const char *y = h_unique_name("slow-y"), *z = h_unique_name("slow-z");
    const char *w = h_unique_name("slow-w");
    redisContext *r = h_server_redis(srv);
    struct h_evlog rec;
    rlock_client *c, *other;
    rlock *ly, *lz, *lw_c, *lw_other;
    h_actor *t1 = h_actor_start(), *t2 = h_actor_start();
    char *z_field;
    long long t_del, min_pttl = wd, polls = 0, limit, t_start, t_end;
    int done = 0, cb_rc;

    h_evlog_init(&rec);
    c = h_evlog_open(h_server_url(srv), wd, 0, &rec);
    other = h_open_url(h_server_url(srv), 0, 0);
    ly = h_get(c, y);
    lz = h_get(c, z);
    lw_c = h_get(c, w);
    lw_other = h_get(other, w);

    /* W is held by another client for longer than the callback waits. */
    H_ASSERT_RC(rlock_try_lock(lw_other, 0, H_MS(60000)), RLOCK_OK);
    pthread_mutex_lock(&rec.mu);
    snprintf(rec.block_name, sizeof rec.block_name, "%s", y);
    rec.block_lock = lw_c;
    rec.block_wait_ms = block;
    pthread_mutex_unlock(&rec.mu);

    H_ASSERT_RC((int)h_actor_call(t1, h_op_lock, ly), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(t2, h_op_lock, lz), RLOCK_OK);
    z_field = owner_field(r, z, rlock_client_id(c));

    h_cmd_ok(r, "DEL %s", y);
    t_del = h_now_ms();
    /* The watchdog finds Y gone at its next round; the callback starts blocking. */
    H_WAIT_FOR(h_evlog_block_started(&rec), 1500 + 1000);

    /* While it blocks, Z keeps being renewed: poll its PTTL every 100 ms. */
    limit = h_now_ms() + block + H_MS(3000);
    while (!done && h_now_ms() < limit) {
        long long p = h_pttl(r, z, strlen(z));
        if (p < min_pttl)
            min_pttl = p;
        polls++;
        h_sleep_ms(100);
        pthread_mutex_lock(&rec.mu);
        done = rec.block_done;
        pthread_mutex_unlock(&rec.mu);
    }
    pthread_mutex_lock(&rec.mu);
    cb_rc = rec.block_rc;
    t_start = rec.block_start_ms;
    t_end = rec.block_end_ms;
    pthread_mutex_unlock(&rec.mu);
    long long hexists = h_cmd_int(r, "HEXISTS %s %s", z, z_field);
    long long z_pttl = h_pttl(r, z, strlen(z));

    printf("      WD %lld ms: Y deleted; on_lock_lost(Y) started %lld ms later and blocked %lld "
           "ms in try_lock(wait %lld) = %s; Z meanwhile: lowest PTTL %lld ms over %lld polls, "
           "then HEXISTS %lld, PTTL %lld; on_lock_lost(Z) x%d, LOCK_LOST(Z) x%d\n",
           wd, t_start - t_del, done ? t_end - t_start : -1, block,
           done ? rlock_status_name(cb_rc) : "(still blocked)", min_pttl, polls, hexists, z_pttl,
           h_evlog_lost_count(&rec, z), h_evlog_count(&rec, RLOCK_EVENT_LOCK_LOST, z, NULL, NULL));

    assert_true(done);
    H_ASSERT_RC(cb_rc, RLOCK_BUSY);
    assert_true(t_end - t_start >= block - H_MS(100)); /* it really blocked ~4 s */
    assert_true(min_pttl > wd / 3);                    /* never below ~500 ms */
    assert_int_equal(hexists, 1);
    assert_int_equal(h_evlog_lost_count(&rec, z), 0);
    assert_int_equal(h_evlog_count(&rec, RLOCK_EVENT_LOCK_LOST, z, NULL, NULL), 0);
    assert_int_equal(h_evlog_lost_count(&rec, y), 1);
    assert_int_equal(h_evlog_count(&rec, RLOCK_EVENT_LOCK_LOST, y, NULL, NULL), 1);

    /* Z is still the second thread's; Y's owner learns it holds nothing. */
    H_ASSERT_RC((int)h_actor_call(t2, h_op_is_held, lz), 1);
    H_ASSERT_RC((int)h_actor_call(t2, h_op_unlock, lz), RLOCK_OK);
    assert_int_equal(h_exists(r, z, strlen(z)), 0);
    H_ASSERT_RC((int)h_actor_call(t1, h_op_unlock, ly), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_unlock(lw_other), RLOCK_OK);

    free(z_field);
    h_actor_stop(t1);
    h_actor_stop(t2);
    rlock_free(ly);
    rlock_free(lz);
    rlock_free(lw_c);
    rlock_free(lw_other);
    rlock_client_close(c);
    rlock_client_close(other);
    h_evlog_destroy(&rec);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SERVER_TEST(test_slow_callback_no_stall),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER")) /* e.g. FAULT_FILTER='test_slow*' */
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
