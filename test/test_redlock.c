/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_redlock.c - the Redlock (rlock_redlock_*) on 3 and 5 redis-servers of
 * its own: Redisson's hash on every master with each client's owner field,
 * the validity (lease - elapsed - drift) and a lock that really ends by the
 * lease, quorum against other holders (ours and Redisson-style ones),
 * reentrancy, a master down from the start, a master SIGSTOPped during the
 * attempt (acquired without waiting for it, validity honoured), a majority
 * unreachable, unlock outcomes, a waiter cancelled between attempts, bad
 * input, one server given twice, refusals named. The fault runs (masters
 * restarted empty, exclusion under kills) are in redlock_faults.c
 * (make test-redlock).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#include "harness/cancel_skip.h"

#define MASTERS 5
#define REPLY_BOUND_MS 300 /* the clients' command_timeout_ms: an attempt's reply bound */

static h_server *srv[MASTERS];

static int start_servers(void **state) {
    (void)state;
    h_servers_start(MASTERS, srv);
    return 0;
}

static int stop_servers(void **state) {
    (void)state;
    h_servers_stop(MASTERS, srv);
    return 0;
}

/* A Redlock over the first n servers, each through a client of its own. */
typedef struct rl_set {
    int n;
    rlock_client *c[MASTERS];
    rlock_redlock *rl;
} rl_set;

static void rl_open(rl_set *s, int n, const char *name) {
    s->n = n;
    for (int i = 0; i < n; i++)
        s->c[i] = h_open_url(h_server_url(srv[i]), 30000, (int)H_MS(REPLY_BOUND_MS));
    H_ASSERT_RC(rlock_redlock_new(s->c, (size_t)n, name, &s->rl), RLOCK_OK);
}

static void rl_close(rl_set *s) {
    rlock_redlock_free(s->rl);
    for (int i = 0; i < s->n; i++)
        rlock_client_close(s->c[i]);
}

static long long drift(long long lease_ms) {
    return lease_ms / 100 + 2;
}

/* Asserts master i holds name for client c with count (0: not at all). */
static void assert_master(int i, const char *name, rlock_client *c, long long count) {
    redisContext *r = h_server_redis(srv[i]);
    if (count == 0)
        assert_int_equal(h_exists(r, name, strlen(name)), 0);
    else
        H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), count);
    redisFree(r);
}

/* Whether master i holds name for client c with count 1. */
static int master_holds(int i, const char *name, rlock_client *c) {
    redisContext *r = h_server_redis(srv[i]);
    int holds = h_lock_is(r, name, strlen(name), rlock_client_id(c), 1);
    redisFree(r);
    return holds;
}

static long long master_pttl(int i, const char *name) {
    redisContext *r = h_server_redis(srv[i]);
    long long ttl = h_pttl(r, name, strlen(name));
    redisFree(r);
    return ttl;
}

static void test_layout_and_validity(void **state) {
    const char *name = h_unique_name("redlock-layout");
    const long long lease = 5000;
    rl_set s;
    long long validity = -1;
    (void)state;
    rl_open(&s, 3, name);
    long long before = h_now_ms();
    H_ASSERT_RC(rlock_redlock_try_lock(s.rl, 0, lease, &validity), RLOCK_OK);
    long long took = h_now_ms() - before;
    print_message("      acquired on 3 masters in %lld ms, validity %lld ms\n", took, validity);
    H_ASSERT_BETWEEN(validity, lease - drift(lease) - took, lease - drift(lease));
    for (int i = 0; i < 3; i++) {
        assert_master(i, name, s.c[i], 1);
        H_ASSERT_BETWEEN(master_pttl(i, name), lease - H_MS(500), lease);
    }
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_master(i, name, s.c[i], 0);
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_ENOTOWNER);
    rl_close(&s);
}

/* The validity is honoured: nobody else gets the lock before it ends, somebody after the lease. */
static void test_validity_then_expiry(void **state) {
    const char *name = h_unique_name("redlock-expiry");
    const long long lease = 800;
    rl_set a, b;
    long long validity = -1, ignored;
    (void)state;
    rl_open(&a, 3, name);
    rl_open(&b, 3, name);
    long long before = h_now_ms();
    H_ASSERT_RC(rlock_redlock_try_lock(a.rl, 0, lease, &validity), RLOCK_OK);
    long long valid_until = h_now_ms() + validity;
    assert_true(validity > 0 && validity <= lease - drift(lease));
    /* Tried over and over until the validity ends: never granted. */
    int tries = 0;
    while (h_now_ms() + 30 < valid_until) {
        H_ASSERT_RC(rlock_redlock_try_lock(b.rl, 0, lease, &ignored), RLOCK_BUSY);
        tries++;
        h_sleep_ms(20);
    }
    /* Every key was set after `before`: all have expired by before + lease. */
    h_sleep_ms(before + lease + 5 - h_now_ms());
    H_ASSERT_RC(rlock_redlock_try_lock(b.rl, 0, lease, &ignored), RLOCK_OK);
    print_message("      %d attempts refused during the validity, granted %lld ms after the "
                  "first acquisition began\n", tries, h_now_ms() - before);
    assert_true(tries > 0);
    /* The first holder's unlock: its holds are gone (validity over), it says so. */
    H_ASSERT_RC(rlock_redlock_unlock(a.rl), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_redlock_unlock(b.rl), RLOCK_OK);
    rl_close(&a);
    rl_close(&b);
}

/* A quorum decides: busy on a majority -> BUSY (nothing left), on a minority -> acquired. */
static void test_quorum_against_other_holders(void **state) {
    const char *name = h_unique_name("redlock-quorum");
    rl_set s;
    long long validity;
    redisContext *r[MASTERS];
    (void)state;
    rl_open(&s, 5, name);
    for (int i = 0; i < 5; i++)
        r[i] = h_server_redis(srv[i]);
    /* A Redisson-style holder on 3 of 5: no quorum. */
    for (int i = 0; i < 3; i++)
        h_foreign_lock(r[i], name, 10000);
    H_ASSERT_RC(rlock_redlock_try_lock(s.rl, 200, 5000, &validity), RLOCK_BUSY);
    print_message("      busy on 3 of 5: %s\n", rlock_last_error());
    for (int i = 3; i < 5; i++)
        assert_int_equal(h_exists(r[i], name, strlen(name)), 0); /* given back */
    /* On 2 of 5: a quorum of 3 is free. */
    h_foreign_unlock(r[2], name);
    H_ASSERT_RC(rlock_redlock_try_lock(s.rl, 0, 5000, &validity), RLOCK_OK);
    for (int i = 2; i < 5; i++)
        assert_master(i, name, s.c[i], 1);
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
    for (int i = 0; i < 2; i++) {
        h_foreign_unlock(r[i], name);
        redisFree(r[i]);
    }
    for (int i = 2; i < 5; i++) {
        assert_int_equal(h_exists(r[i], name, strlen(name)), 0);
        redisFree(r[i]);
    }
    rl_close(&s);
}

/* Two Redlocks of the same masters exclude each other; the second gets it after the unlock. */
static void test_two_redlocks(void **state) {
    const char *name = h_unique_name("redlock-two");
    rl_set a, b;
    long long validity;
    (void)state;
    rl_open(&a, 3, name);
    rl_open(&b, 3, name);
    H_ASSERT_RC(rlock_redlock_try_lock(a.rl, 0, 10000, &validity), RLOCK_OK);
    long long before = h_now_ms();
    H_ASSERT_RC(rlock_redlock_try_lock(b.rl, 300, 10000, &validity), RLOCK_BUSY);
    H_ASSERT_BETWEEN(h_now_ms() - before, 300, H_MS(300 + 3 * REPLY_BOUND_MS + 500));
    H_ASSERT_RC(rlock_redlock_unlock(a.rl), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_try_lock(b.rl, 1000, 10000, &validity), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_unlock(b.rl), RLOCK_OK);
    rl_close(&a);
    rl_close(&b);
}

static void test_reentrancy(void **state) {
    const char *name = h_unique_name("redlock-reent");
    rl_set s;
    long long validity;
    (void)state;
    rl_open(&s, 3, name);
    H_ASSERT_RC(rlock_redlock_lock(s.rl, 5000, &validity), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_lock(s.rl, 5000, &validity), RLOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_master(i, name, s.c[i], 2);
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_master(i, name, s.c[i], 1);
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_master(i, name, s.c[i], 0);
    rl_close(&s);
}

/*
 * A reentrant Redlock lost on a majority: the unlock that would have left the thread holding
 * says RLOCK_ELOST and gives back the holds left on the minority; the next says ENOTOWNER.
 */
/* The lock is deleted on masters 0 and 1 of 3 behind its owner's back. */
static void lose_on_majority(const char *name) {
    for (int i = 0; i < 2; i++) {
        redisContext *r = h_server_redis(srv[i]);
        h_cmd_ok(r, "DEL %s", name);
        redisFree(r);
    }
}

static void test_reentrant_lost_on_majority(void **state) {
    const char *name = h_unique_name("redlock-lost2");
    rl_set s;
    long long validity;
    (void)state;
    rl_open(&s, 3, name);
    H_ASSERT_RC(rlock_redlock_lock(s.rl, 10000, &validity), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_lock(s.rl, 10000, &validity), RLOCK_OK);
    lose_on_majority(name);
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_ELOST);
    for (int i = 0; i < 3; i++)
        assert_master(i, name, s.c[i], 0);
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_ENOTOWNER);
    /* Held once: the unlock is the last one, ENOTOWNER as before, nothing left either. */
    H_ASSERT_RC(rlock_redlock_lock(s.rl, 10000, &validity), RLOCK_OK);
    lose_on_majority(name);
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_ENOTOWNER);
    for (int i = 0; i < 3; i++)
        assert_master(i, name, s.c[i], 0);
    rl_close(&s);
}

/* An explicit owner's Redlock: "<client uuid>:<owner>" on every master, taken on one thread
 * and released on another; the calling thread's forms do not see it as theirs. */
struct rl_as {
    rlock_redlock *rl;
    uint64_t owner;
    long long validity;
};

static long long op_redlock_try_as(void *arg) {
    struct rl_as *a = arg;
    return rlock_redlock_try_lock_as(a->rl, a->owner, 0, 5000, &a->validity);
}

static void test_explicit_owner(void **state) {
    const char *name = h_unique_name("redlock-as");
    rl_set s;
    long long validity;
    h_actor *actor = h_actor_start();
    (void)state;
    rl_open(&s, 3, name);
    struct rl_as call = {s.rl, rlock_owner_new(), -1};
    assert_int_equal(h_actor_call(actor, op_redlock_try_as, &call), RLOCK_OK);
    H_ASSERT_BETWEEN(call.validity, 1, 5000 - drift(5000));
    for (int i = 0; i < 3; i++) {
        char field[200];
        redisContext *r = h_server_redis(srv[i]);
        snprintf(field, sizeof field, "%s:%llu", rlock_client_id(s.c[i]),
                 (unsigned long long)call.owner);
        assert_int_equal(h_hget_int(r, name, field), 1);
        redisFree(r);
    }
    H_ASSERT_RC(rlock_redlock_try_lock(s.rl, 0, 5000, &validity), RLOCK_BUSY);
    H_ASSERT_RC(rlock_redlock_try_lock_as(s.rl, rlock_owner_new(), 0, 5000, NULL), RLOCK_BUSY);
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_ENOTOWNER); /* not this thread's */
    H_ASSERT_RC(rlock_redlock_unlock_as(s.rl, call.owner), RLOCK_OK);
    for (int i = 0; i < 3; i++)
        assert_master(i, name, s.c[i], 0);
    H_ASSERT_RC(rlock_redlock_unlock_as(s.rl, call.owner), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_redlock_try_lock_as(s.rl, 0, 0, 5000, NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_unlock_as(s.rl, 0), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_unlock_as(NULL, call.owner), RLOCK_EINVAL);
    h_actor_stop(actor);
    rl_close(&s);
}

/* One master (of 3) or two (of 5) down from the start: still acquired; a majority down: EIO. */
static void test_masters_down_at_start(void **state) {
    const char *name = h_unique_name("redlock-down");
    long long validity;
    (void)state;
    for (int n = 3; n <= 5; n += 2) {
        rl_set s;
        int down = n / 2; /* the most a quorum can spare */
        rl_open(&s, n, name);
        for (int i = 0; i < down; i++)
            h_server_kill(srv[i]);
        long long before = h_now_ms();
        H_ASSERT_RC(rlock_redlock_try_lock(s.rl, 0, 5000, &validity), RLOCK_OK);
        print_message("      %d of %d masters down: acquired in %lld ms, validity %lld\n", down, n,
                      h_now_ms() - before, validity);
        for (int i = down; i < n; i++)
            assert_master(i, name, s.c[i], 1);
        H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
        /* One more down: no majority reachable. */
        h_server_kill(srv[down]);
        before = h_now_ms();
        H_ASSERT_RC(rlock_redlock_try_lock(s.rl, 400, 5000, &validity), RLOCK_EIO);
        print_message("      %d of %d down: %s (%lld ms)\n", down + 1, n, rlock_last_error(),
                      h_now_ms() - before);
        for (int i = down + 1; i < n; i++)
            assert_master(i, name, s.c[i], 0);
        for (int i = 0; i <= down; i++)
            h_server_restart(srv[i]);
        rl_close(&s);
    }
}

/*
 * A master SIGSTOPped: its reply never comes, and the attempt does not wait
 * for it -- the others are a quorum: acquired in about a round trip, well
 * within the reply bound, the validity counted from the start; the paused
 * master's hold (which it takes when it resumes) is released by the unlock.
 */
static void test_paused_master(void **state) {
    const char *name = h_unique_name("redlock-paused");
    const long long lease = H_MS(4000); /* room for two reply bounds, however scaled */
    rl_set s, other;
    long long validity, ignored;
    (void)state;
    rl_open(&s, 3, name);
    rl_open(&other, 3, name);
    H_ASSERT_RC(rlock_redlock_try_lock(s.rl, 0, lease, &validity), RLOCK_OK); /* connections up */
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
    h_server_pause(srv[1]);
    long long before = h_now_ms();
    H_ASSERT_RC(rlock_redlock_try_lock(s.rl, 0, lease, &validity), RLOCK_OK);
    long long took = h_now_ms() - before;
    print_message("      one of 3 paused: acquired in %lld ms (reply bound %lld), validity %lld\n",
                  took, (long long)H_MS(REPLY_BOUND_MS), validity);
    H_ASSERT_BETWEEN(took, 0, H_MS(REPLY_BOUND_MS) / 2); /* the paused one not waited for */
    H_ASSERT_BETWEEN(validity, lease - drift(lease) - took, lease - drift(lease));
    assert_master(0, name, s.c[0], 1);
    assert_master(2, name, s.c[2], 1);
    H_ASSERT_RC(rlock_redlock_try_lock(other.rl, 0, lease, &ignored), RLOCK_BUSY);
    /* Unlock: two released, the paused one unknown -- another owner can take it now. */
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
    assert_master(0, name, s.c[0], 0);
    assert_master(2, name, s.c[2], 0);
    H_ASSERT_RC(rlock_redlock_try_lock(other.rl, 0, lease, &ignored), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_unlock(other.rl), RLOCK_OK);
    h_server_resume(srv[1]);
    /* Whatever the resumed master applied late ends with its lease; it never blocks a quorum. */
    H_ASSERT_RC(rlock_redlock_try_lock(s.rl, 0, lease, &validity), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
    rl_close(&s);
    rl_close(&other);
}

/*
 * Locks s's Redlock (after a warm-up lock and unlock: connections up) with
 * master 2 paused, so its reply is not waited for, then resumes it and
 * waits until it has run the ACQUIRE late.
 */
static void lock_with_master_late(rl_set *s, const char *name, long long lease) {
    long long validity;
    H_ASSERT_RC(rlock_redlock_try_lock(s->rl, 0, lease, &validity), RLOCK_OK); /* warm */
    H_ASSERT_RC(rlock_redlock_unlock(s->rl), RLOCK_OK);
    h_server_pause(srv[2]);
    H_ASSERT_RC(rlock_redlock_try_lock(s->rl, 0, lease, &validity), RLOCK_OK);
    h_server_resume(srv[2]);
    redisContext *r = h_server_redis(srv[2]);
    H_WAIT_FOR(h_exists(r, name, strlen(name)) == 1, 2000); /* it ran the ACQUIRE late */
    redisFree(r);
}

/*
 * The replies an attempt did not wait for are read past, not mistaken for
 * later ones: the paused master's connection owes its ACQUIRE's reply; once
 * it resumes, the next command on that connection -- the Redlock's unlock
 * (a fan-out), or a plain lock's call through the same client -- reads its
 * own reply, and the hold the master took late is released.
 */
static void test_unawaited_replies_read_past(void **state) {
    const char *name = h_unique_name("redlock-owed");
    const long long lease = H_MS(4000);
    rl_set s;
    (void)state;
    rl_open(&s, 3, name);
    rlock *plain = h_get(s.c[2], h_unique_name("redlock-owed-plain"));
    for (int round = 0; round < 2; round++) {
        lock_with_master_late(&s, name, lease);
        assert_master(2, name, s.c[2], 1);
        if (round == 1) { /* the client's next command is a plain one (not a fan-out) */
            H_ASSERT_RC(rlock_try_lock(plain, 0, 5000), RLOCK_OK);
            H_ASSERT_RC(rlock_is_locked(plain), 1);
            H_ASSERT_RC(rlock_unlock(plain), RLOCK_OK);
        }
        H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
        for (int i = 0; i < 3; i++)
            assert_master(i, name, s.c[i], 0);
    }
    rlock_free(plain);
    rl_close(&s);
}

/*
 * The statistics of a Redlock's clients stay balanced when a master is not
 * waited for: its hold is booked unsure and counted as an acquisition, and
 * the unlock that releases it (the master ran the ACQUIRE late) counts its
 * unlock; a hold booked unsure that the master never took counts its unlock
 * too. Every client ends with as many acquisitions as unlocks, holding none.
 */
static void test_stats_balanced(void **state) {
    const char *name = h_unique_name("redlock-stats"), *taken = h_unique_name("redlock-taken");
    const long long lease = H_MS(4000);
    rl_set s, t;
    long long validity;
    (void)state;
    rl_open(&s, 3, name);
    lock_with_master_late(&s, name, lease);
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
    for (int i = 0; i < 3; i++) {
        rlock_stats st = h_stats(s.c[i]);
        print_message("      master %d: %llu acquisitions, %llu unlocks, %llu holds timed\n", i,
                      st.acquisitions, st.unlocks, st.hold_time.count);
        assert_int_equal(st.acquisitions, 2);
        assert_int_equal(st.unlocks, 2);
        assert_int_equal(st.hold_time.count, 2);
        assert_int_equal(st.held_locks, 0);
    }

    /* Master 2 paused while another client holds the name there: booked unsure, never taken. */
    rl_open(&t, 3, taken);
    rlock_client *other = h_open_url(h_server_url(srv[2]), 30000, (int)H_MS(REPLY_BOUND_MS));
    rlock *there = h_get(other, taken);
    H_ASSERT_RC(rlock_try_lock(there, 0, lease), RLOCK_OK);
    h_server_pause(srv[2]);
    H_ASSERT_RC(rlock_redlock_try_lock(t.rl, 0, lease, &validity), RLOCK_OK);
    h_server_resume(srv[2]);
    H_ASSERT_RC(rlock_redlock_unlock(t.rl), RLOCK_OK);
    rlock_stats st = h_stats(t.c[2]);
    assert_int_equal(st.acquisitions, st.unlocks);
    assert_int_equal(st.held_locks, 0);
    H_ASSERT_RC(rlock_unlock(there), RLOCK_OK);
    rlock_free(there);
    rlock_client_close(other);
    rl_close(&t);
    rl_close(&s);
}

/*
 * A lease so short that lease - drift is below the clients' command
 * timeout bounds how long replies are awaited: when they do not come in
 * that time, the message says the lease set the bound, not only that the
 * masters timed out.
 */
static void test_short_lease_bound_named(void **state) {
    const char *name = h_unique_name("redlock-short");
    rl_set s;
    long long validity;
    (void)state;
    rl_open(&s, 3, name);
    H_ASSERT_RC(rlock_redlock_try_lock(s.rl, 0, 5000, &validity), RLOCK_OK); /* connections up */
    H_ASSERT_RC(rlock_redlock_unlock(s.rl), RLOCK_OK);
    for (int i = 0; i < 3; i++)
        h_server_pause(srv[i]);
    H_ASSERT_RC(rlock_redlock_try_lock(s.rl, 0, 50, &validity), RLOCK_EIO); /* bound 48 ms */
    print_message("      %s\n", rlock_last_error());
    assert_non_null(strstr(rlock_last_error(), "awaited 48 ms"));
    for (int i = 0; i < 3; i++)
        h_server_resume(srv[i]);
    rl_close(&s);
}

static void *redlock_lock_main(void *rl) {
    long long validity;
    rlock_redlock_lock(rl, 5000, &validity);
    return NULL; /* never reached: cancelled while it pauses between attempts */
}

/* A thread cancelled while it retries holds nothing, and leaves every client's guard. */
static void test_cancelled_waiter(void **state) {
    H_SKIP_CANCEL_UNDER_ASAN();
    const char *name = h_unique_name("redlock-cancel");
    rl_set holder, waiter;
    long long validity;
    pthread_t th;
    (void)state;
    rl_open(&holder, 3, name);
    rl_open(&waiter, 3, name);
    H_ASSERT_RC(rlock_redlock_try_lock(holder.rl, 0, 10000, &validity), RLOCK_OK);
    /* The try returns on a quorum: the third master's hold may land a moment later, and
       the waiter's first attempt must find it there (else that master is the waiter's). */
    for (int i = 0; i < 3; i++)
        H_WAIT_FOR(master_holds(i, name, holder.c[i]), 2000);
    assert_int_equal(pthread_create(&th, NULL, redlock_lock_main, waiter.rl), 0);
    h_sleep_ms(300); /* several attempts, several pauses */
    pthread_cancel(th);
    pthread_join(th, NULL);
    for (int i = 0; i < 3; i++)
        assert_master(i, name, holder.c[i], 1); /* the waiter took nothing, left nothing */
    H_ASSERT_RC(rlock_redlock_unlock(holder.rl), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_try_lock(waiter.rl, 0, 10000, &validity), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_unlock(waiter.rl), RLOCK_OK);
    rl_close(&holder);
    rl_close(&waiter); /* would hang if a guard had not been left */
}

static void test_bad_input(void **state) {
    const char *name = h_unique_name("redlock-bad");
    rlock_client *c[3];
    rlock_redlock *rl = NULL;
    long long validity = 12345;
    (void)state;
    for (int i = 0; i < 3; i++)
        c[i] = h_open_url(h_server_url(srv[i]), 30000, 1000);
    rlock_client *same_server[2] = {c[0], h_open_url(h_server_url(srv[0]), 30000, 1000)};
    rlock_client *twice[2] = {c[0], c[0]};
    rlock_client *with_null[2] = {c[0], NULL};
    H_ASSERT_RC(rlock_redlock_new(NULL, 3, name, &rl), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_new(c, 0, name, &rl), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_new(c, RLOCK_GROUP_MAX + 1, name, &rl), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_new(c, 3, NULL, &rl), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_new(c, 3, "", &rl), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_new(c, 3, name, NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_new(with_null, 2, name, &rl), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_new(twice, 2, name, &rl), RLOCK_EINVAL);
    print_message("      same client twice: %s\n", rlock_last_error());
    H_ASSERT_RC(rlock_redlock_new(same_server, 2, name, &rl), RLOCK_EINVAL);
    print_message("      one server twice: %s\n", rlock_last_error());
    assert_null(rl);
    H_ASSERT_RC(rlock_redlock_new(c, 3, name, &rl), RLOCK_OK);
    H_ASSERT_RC(rlock_redlock_try_lock(rl, 0, RLOCK_LEASE_WATCHDOG, &validity), RLOCK_EINVAL);
    print_message("      watchdog lease: %s\n", rlock_last_error());
    H_ASSERT_RC(rlock_redlock_lock(rl, 2, &validity), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_try_lock(rl, 0, 0, &validity), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_try_lock(rl, 0, RLOCK_MAX_LEASE_MS + 1, &validity), RLOCK_EINVAL);
    assert_int_equal(validity, 12345); /* untouched on failure */
    H_ASSERT_RC(rlock_redlock_try_lock(NULL, 0, 1000, &validity), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_unlock(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_redlock_unlock(rl), RLOCK_ENOTOWNER); /* never held */
    H_ASSERT_RC(rlock_redlock_try_lock(rl, 0, 1000, NULL), RLOCK_OK); /* validity optional */
    H_ASSERT_RC(rlock_redlock_unlock(rl), RLOCK_OK);
    rlock_redlock_free(NULL);
    /* A closed client: every call says so; free still works. */
    rlock_client_close(c[2]);
    H_ASSERT_RC(rlock_redlock_try_lock(rl, 0, 1000, &validity), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_redlock_unlock(rl), RLOCK_ECLOSED);
    rlock_redlock_free(rl);
    rlock_client_close(same_server[1]);
    rlock_client_close(c[0]);
    rlock_client_close(c[1]);
}

/* Asserts the thread's last error is status, names the server of srv[i] and carries text. */
static void assert_refusal(int status, int i, const char *text) {
    rlock_error_info info;
    char port[16];
    rlock_last_error_info(&info);
    snprintf(port, sizeof port, ":%d", h_server_port(srv[i]));
    print_message("      %s (redis_error \"%s\")\n", info.message, info.redis_error);
    assert_int_equal(info.status, status);
    assert_non_null(strstr(info.message, port));
    assert_non_null(strstr(info.message, text));
    assert_non_null(strstr(info.redis_error, text));
}

/*
 * Masters that refuse (out of memory, ACL): more than a quorum can spare
 * make the call fail with the first refusing master's status, and the
 * detail -- message, Redis's text, the master's address -- is that master's.
 */
static void test_refusals_named(void **state) {
    const char *name = h_unique_name("redlock-refused");
    char url[160];
    rlock_client *c[3];
    rlock_redlock *rl;
    long long validity;
    redisContext *r[3];
    (void)state;
    for (int i = 0; i < 3; i++)
        r[i] = h_server_redis(srv[i]);
    for (int i = 1; i < 3; i++)
        h_cmd_ok(r[i], "ACL SETUSER refusing on >pw ~* &* +@all");
    c[0] = h_open_url(h_server_url(srv[0]), 30000, (int)H_MS(REPLY_BOUND_MS));
    for (int i = 1; i < 3; i++)
        c[i] = h_open_url(h_url_auth(url, sizeof url, h_server_url(srv[i]), "refusing", "pw"),
                          30000, (int)H_MS(REPLY_BOUND_MS));
    H_ASSERT_RC(rlock_redlock_new(c, 3, name, &rl), RLOCK_OK);
    /* Acquiring: master 0 out of memory, master 2 may not touch the key. */
    h_cmd_ok(r[0], "CONFIG SET maxmemory 1");
    h_cmd_ok(r[2], "ACL SETUSER refusing resetkeys ~other:*");
    H_ASSERT_RC(rlock_redlock_try_lock(rl, 0, 5000, &validity), RLOCK_EREDIS);
    assert_refusal(RLOCK_EREDIS, 0, "OOM");
    h_cmd_ok(r[0], "CONFIG SET maxmemory 0");
    h_cmd_ok(r[2], "ACL SETUSER refusing resetkeys ~*");
    /* Unlocking: master 1 may not touch the key, master 2's key is no lock any more. */
    H_ASSERT_RC(rlock_redlock_try_lock(rl, 0, 5000, &validity), RLOCK_OK);
    h_cmd_ok(r[1], "ACL SETUSER refusing resetkeys ~other:*");
    h_cmd_int(r[2], "DEL %s", name);
    h_cmd_ok(r[2], "SET %s not-a-lock", name);
    int status = rlock_redlock_unlock(rl);
    assert_int_equal(status, RLOCK_ENOPERM);
    assert_refusal(RLOCK_ENOPERM, 1, "NOPERM");
    h_cmd_ok(r[1], "ACL SETUSER refusing resetkeys ~*");
    h_cmd_int(r[2], "DEL %s", name);
    /* Unlocking again completes it: master 1 released now; master 0 was released before, so
       it is held on fewer than a quorum now. */
    H_ASSERT_RC(rlock_redlock_unlock(rl), RLOCK_ENOTOWNER);
    assert_master(1, name, c[1], 0);
    rlock_redlock_free(rl);
    for (int i = 0; i < 3; i++) {
        rlock_client_close(c[i]);
        if (i > 0)
            h_cmd_ok(r[i], "ACL DELUSER refusing");
        redisFree(r[i]);
    }
}

/*
 * One server is one master, however it is reached: through two of its
 * databases, or through two spellings of its address. Counted twice, one
 * crash would cost two votes ("3 masters tolerate one failure" would not
 * hold).
 */
static void test_one_server_twice(void **state) {
    char db0[96], db1[96], by_name[96];
    const char *name = h_unique_name("redlock-one-server");
    rlock_redlock *rl = NULL;
    (void)state;
    snprintf(db0, sizeof db0, "%s/0", h_server_url(srv[0]));
    snprintf(db1, sizeof db1, "%s/1", h_server_url(srv[0]));
    snprintf(by_name, sizeof by_name, "redis://localhost:%d", h_server_port(srv[0]));
    rlock_client *c0 = h_open_url(db0, 30000, 1000), *c1 = h_open_url(db1, 30000, 1000);
    rlock_client *named = h_open_url(by_name, 30000, 1000);
    rlock_client *other = h_open_url(h_server_url(srv[1]), 30000, 1000);
    rlock_client *two_dbs[3] = {c0, other, c1}, *two_names[3] = {c0, other, named};
    H_ASSERT_RC(rlock_redlock_new(two_dbs, 3, name, &rl), RLOCK_EINVAL);
    print_message("      two databases of one server: %s\n", rlock_last_error());
    H_ASSERT_RC(rlock_redlock_new(two_names, 3, name, &rl), RLOCK_EINVAL);
    print_message("      one server by two names: %s\n", rlock_last_error());
    assert_null(rl);
    rlock_client_close(c0);
    rlock_client_close(c1);
    rlock_client_close(named);
    rlock_client_close(other);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_and_validity),
        cmocka_unit_test(test_validity_then_expiry),
        cmocka_unit_test(test_quorum_against_other_holders),
        cmocka_unit_test(test_two_redlocks),
        cmocka_unit_test(test_reentrancy),
        cmocka_unit_test(test_reentrant_lost_on_majority),
        cmocka_unit_test(test_explicit_owner),
        cmocka_unit_test(test_masters_down_at_start),
        cmocka_unit_test(test_paused_master),
        cmocka_unit_test(test_unawaited_replies_read_past),
        cmocka_unit_test(test_stats_balanced),
        cmocka_unit_test(test_short_lease_bound_named),
        cmocka_unit_test(test_cancelled_waiter),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_one_server_twice),
        cmocka_unit_test(test_refusals_named),
    };
    return cmocka_run_group_tests(tests, start_servers, stop_servers);
}
