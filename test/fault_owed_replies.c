/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fault_owed_replies.c - replies a Redlock fan-out left unread are never
 * taken for another command's.
 *
 * A Redlock attempt stops reading once a quorum answered: a slow master's
 * part is left unread and its connection goes back to the pool owing that
 * reply (rlock__conn.owed), to be read past by the next user. Here master 2
 * is behind the test proxy with 20-40 ms of delay each way, so the quorum
 * (masters 0 and 1) always answers first and master 2's connection (its
 * client's only one: pool_size 1) is left owing a reply -- the ACQUIRE's
 * nil, "acquired". The next command on that connection must read past it:
 *
 *   plain calls   a try_lock on a lock another owner holds must say
 *                 RLOCK_BUSY and is_locked 1 (an owed nil taken for the
 *                 try_lock's reply would say RLOCK_OK: a lock believed held
 *                 that is not); the Redlock's unlock reads past it itself;
 *                 meanwhile the watchdog renews a hold on the same
 *                 connection (its pipeline reads past the owed reply too)
 *                 and must never lose it.
 *   send-ahead    a waiter of the same client woken by an unlock, its
 *                 ACQUIRE sent ahead by the subscriber thread on the owing
 *                 connection (or, the owed reply not there yet, not sent
 *                 ahead): it must hold the lock in Redis, and a contended
 *                 try_lock right after must still say RLOCK_BUSY (a reply
 *                 read one place off would shift every later one).
 *
 * Three redis-servers and a proxy per test.
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

#define MASTERS 3
#define DELAY_MIN_MS 20 /* master 2's proxy, each way */
#define DELAY_MAX_MS 40

static h_server *srv[MASTERS];

/* A Redlock over the three masters, master 2 through px with one pooled connection. */
typedef struct owed_set {
    h_proxy *px;
    rlock_client *c[MASTERS];
    rlock_redlock *rl;
    struct h_lost lost; /* master 2's client's losses */
    struct h_loglines log; /* master 2's client's log lines (printed on a failure) */
} owed_set;

static void set_open(owed_set *s, const char *name, long long wd) {
    rlock_config cfg;
    h_servers_start(MASTERS, srv);
    s->px = h_proxy_start(h_server_port(srv[2]));
    for (int i = 0; i < 2; i++)
        s->c[i] = h_open_url(h_server_url(srv[i]), 30000, (int)H_MS(2000));
    h_config(&cfg);
    cfg.url = h_proxy_url(s->px);
    cfg.pool_size = 1; /* every command of this client goes on the one owing connection */
    cfg.command_timeout_ms = (int)H_MS(2000);
    cfg.watchdog_timeout_ms = wd;
    h_lost_init(&s->lost);
    cfg.on_lock_lost = h_lost_cb;
    cfg.callback_arg = &s->lost;
    h_loglines_init(&s->log);
    cfg.log = h_loglines_cb;
    cfg.log_arg = &s->log;
    cfg.log_level = RLOCK_LOG_DEBUG;
    s->c[2] = h_open_config(&cfg);
    H_ASSERT_RC(rlock_redlock_new(s->c, MASTERS, name, &s->rl), RLOCK_OK);
    long long validity;
    H_ASSERT_RC(rlock_redlock_try_lock(s->rl, 0, 5000, &validity), RLOCK_OK); /* connections up */
    H_ASSERT_RC(rlock_redlock_unlock(s->rl), RLOCK_OK);
    h_proxy_set_delay(s->px, DELAY_MIN_MS, DELAY_MAX_MS);
}

static void set_close(owed_set *s) {
    rlock_redlock_free(s->rl);
    for (int i = 0; i < MASTERS; i++)
        rlock_client_close(s->c[i]);
    h_proxy_stop(s->px);
    h_servers_stop(MASTERS, srv);
}

/*
 * A Redlock attempt that had its quorum before master 2 answered: 1 if it
 * returned sooner than master 2's reply can come (2 x DELAY_MIN_MS), so that
 * master 2's connection was given back owing the reply.
 */
static int acquire_leaving_owed(owed_set *s, long long lease) {
    long long validity, t0 = h_now_ms();
    H_ASSERT_RC(rlock_redlock_try_lock(s->rl, 0, lease, &validity), RLOCK_OK);
    return h_now_ms() - t0 < 2 * DELAY_MIN_MS;
}

/* Every master's copy of the Redlock's key is gone (master 2's once its owed ACQUIRE ran). */
static void assert_redlock_released(const char *name) {
    for (int i = 0; i < MASTERS; i++) {
        redisContext *r = h_server_redis(srv[i]);
        H_WAIT_FOR(h_exists(r, name, strlen(name)) == 0, 2000);
        redisFree(r);
    }
}

#define ROUNDS 30

static void test_plain_calls_read_past(void **state) {
    const char *name = h_unique_name("owed-redlock"), *busy = h_unique_name("owed-busy");
    const char *held = h_unique_name("owed-held");
    owed_set s;
    int left_owing = 0;
    const long long wd = H_MS(600);
    (void)state;
    set_open(&s, name, wd); /* renewals every 200 ms on the owing connection */
    redisContext *r2 = h_server_redis(srv[2]);
    h_foreign_lock(r2, busy, 60000);
    rlock *lb = h_get(s.c[2], busy), *lh = h_get(s.c[2], held);
    H_ASSERT_RC(rlock_lock(lh), RLOCK_OK); /* the watchdog's */
    long long t0 = h_now_ms();

    for (int round = 0; round < ROUNDS; round++) {
        left_owing += acquire_leaving_owed(&s, H_MS(5000));
        if (round % 3 == 0)
            H_ASSERT_RC(rlock_try_lock(lb, 0, 5000), RLOCK_BUSY);
        else if (round % 3 == 1)
            H_ASSERT_RC(rlock_is_locked(lb), 1);
        /* round % 3 == 2: the unlock's own fan-out reads past it */
        H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
        H_ASSERT_RC(rlock_try_lock(lb, 0, 5000), RLOCK_BUSY); /* nothing off by one since */
    }
    long long took = h_now_ms() - t0;
    print_message("      %d rounds in %lld ms, %d with master 2's reply left owed; a watchdog "
                  "hold (lease %lld ms) renewed throughout on the same connection\n", ROUNDS,
                  took, left_owing, wd);
    assert_true(left_owing >= ROUNDS / 10); /* the case under test did happen, several times */
    assert_true(took > 2 * wd);            /* the hold lived on renewals */
    if (h_lost_count(&s.lost) != 0)
        h_loglines_dump(&s.log);
    assert_int_equal(h_lost_count(&s.lost), 0);
    H_ASSERT_LOCK_IS(r2, held, rlock_client_id(s.c[2]), 1);
    H_ASSERT_LOCK_IS(r2, busy, "5c3a9e2b-7d41-4f0a-9b6e-1a2b3c4d5e6f", 1);
    H_ASSERT_RC(rlock_unlock(lh), RLOCK_OK);
    assert_redlock_released(name);

    rlock_free(lb);
    rlock_free(lh);
    redisFree(r2);
    set_close(&s);
}

static void test_send_ahead_reads_past(void **state) {
    const char *name = h_unique_name("owed-redlock-ahead"), *q = h_unique_name("owed-ahead");
    owed_set s;
    int left_owing = 0;
    (void)state;
    set_open(&s, name, 30000);
    redisContext *r2 = h_server_redis(srv[2]);
    rlock_client *d = h_open_url(h_server_url(srv[2]), 30000, (int)H_MS(2000)); /* direct */
    rlock *qd = h_get(d, q), *qw = h_get(s.c[2], q), *qmain = h_get(s.c[2], q);
    h_actor *waiter = h_actor_start();

    for (int round = 0; round < ROUNDS / 2; round++) {
        H_ASSERT_RC(rlock_lock(qd), RLOCK_OK);
        h_actor_post(waiter, h_op_lock, qw);
        H_WAIT_FOR(h_numsub(r2, q, strlen(q)) == 1, 5000); /* s.c[2]'s subscriber */
        h_sleep_ms(20); /* asleep on its channel */
        left_owing += acquire_leaving_owed(&s, H_MS(5000));
        if (round % 2 == 1)
            h_sleep_ms(3 * DELAY_MAX_MS); /* the owed reply is there: it is sent ahead */
        H_ASSERT_RC(rlock_unlock(qd), RLOCK_OK); /* wakes the waiter */
        H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
        H_ASSERT_LOCK_IS(r2, q, rlock_client_id(s.c[2]), 1);
        /* The main thread is another owner: the waiter's hold makes it busy. */
        H_ASSERT_RC(rlock_try_lock(qmain, 0, 5000), RLOCK_BUSY);
        H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, qw), RLOCK_OK);
        H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
        assert_int_equal(h_exists(r2, q, strlen(q)), 0);
    }
    print_message("      %d rounds, %d with master 2's reply left owed when the waiter woke\n",
                  ROUNDS / 2, left_owing);
    assert_true(left_owing >= ROUNDS / 10);
    assert_redlock_released(name);

    h_actor_stop(waiter);
    rlock_free(qd);
    rlock_free(qw);
    rlock_free(qmain);
    rlock_client_close(d);
    redisFree(r2);
    set_close(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_calls_read_past),
        cmocka_unit_test(test_send_ahead_reads_past),
    };
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getenv("FAULT_FILTER"))
        cmocka_set_test_filter(getenv("FAULT_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
