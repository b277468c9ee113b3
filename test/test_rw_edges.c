/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rw_edges.c - the read-write lock (rlock_get_rw) at its edges, on one
 * server (test_rw.c has the main behaviour):
 *
 *   TTL rule     the hash outlives every read hold's key: also a downgrade's
 *                read hold with a lease longer than the write hold's
 *                renewals, after the write unlock
 *   stale field  a read hold whose lease ran out (its key gone, its field
 *                kept by other readers) is no read hold: asking for the write
 *                lock waits, it is no upgrade (RLOCK_EDEADLK); its unlock is
 *                RLOCK_ENOTOWNER and takes the field out, its hold count 0
 *   unlock cost  a read unlock reads a bounded number of hold keys, however
 *                many readers hold the lock, and unwinding a hold 1000 deep
 *                costs linear work; counts exact on the way
 *   leavers      a reader SIGKILLed while holding: a writer gets in within
 *                its lease; a writer SIGKILLed while waiting in the writers'
 *                set holds new readers back for at most the set's TTL; a
 *                writer cancelled while waiting leaves the set at once;
 *                nothing is left in Redis after everyone left
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "harness/cancel_skip.h"

/* ---- helpers ---------------------------------------------------------------- */

/*
 * Client a (watchdog timeout wd_a) and client b (30 s, unless NULL: not
 * opened), each with the read and write handles of name (two_open: a new
 * name with prefix), and a raw connection.
 */
typedef struct two {
    const char *name;
    rlock_client *a, *b;
    rlock *ar, *aw, *br, *bw;
    redisContext *r;
} two;

static two two_open_as(const char *name, long long wd_a, int with_b) {
    two t = {.name = name, .a = h_open(wd_a, 0), .r = h_redis()};
    H_ASSERT_RC(rlock_get_rw(t.a, t.name, &t.ar, &t.aw), RLOCK_OK);
    if (with_b) {
        t.b = h_open(30000, 0);
        H_ASSERT_RC(rlock_get_rw(t.b, t.name, &t.br, &t.bw), RLOCK_OK);
    }
    return t;
}

static two two_open(const char *prefix, long long wd_a, int with_b) {
    return two_open_as(h_unique_name(prefix), wd_a, with_b);
}

static void two_close(two *t) {
    rlock_free(t->ar);
    rlock_free(t->aw);
    rlock_free(t->br);
    rlock_free(t->bw);
    redisFree(t->r);
    rlock_client_close(t->a);
    rlock_client_close(t->b);
}

/* The keys of name's lock that Redis has: the hash, hold keys, the writers' set. */
static long long lock_keys(redisContext *r, const char *name) {
    redisReply *rep = h_cmd(r, "KEYS *%s*", name);
    long long n = (long long)rep->elements;
    for (size_t i = 0; i < rep->elements; i++)
        printf("      left: %s (PTTL %lld)\n", rep->element[i]->str,
               h_pttl(r, rep->element[i]->str, rep->element[i]->len));
    freeReplyObject(rep);
    return n;
}

/* The calling thread's reader field of c in a lock's hash (static storage). */
static const char *my_field(rlock_client *c) {
    static char field[128];
    snprintf(field, sizeof field, "%s:%llu", rlock_client_id(c),
             (unsigned long long)rlock_thread_owner());
    return field;
}

/* ---- the TTL rule ------------------------------------------------------------- */

/*
 * A writer (watchdog lease wd) takes the read lock too, with a lease of
 * 5 wd, then releases the write lock (a downgrade). Its read hold must
 * last its lease: the write hold's renewals must not cut the hash's TTL
 * below the read hold's key, or the lock vanishes under the reader and
 * another client's writer gets in.
 */
static void test_downgrade_outlives_write_renewal(void **state) {
    long long wd = H_MS(600), lease = 5 * wd;
    two t = two_open("rwe-down", wd, 1);
    (void)state;

    H_ASSERT_RC(rlock_lock(t.aw), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(t.ar, lease), RLOCK_OK);
    h_sleep_ms(wd); /* two renewals of the write hold */
    long long hash_ttl = h_pttl(t.r, t.name, strlen(t.name));
    printf("      write hold renewed: the hash's TTL %lld ms, the read hold's lease %lld ms\n",
           hash_ttl, lease);
    assert_true(hash_ttl > lease - 2 * wd);
    H_ASSERT_RC(rlock_unlock(t.aw), RLOCK_OK);
    h_sleep_ms(2 * wd); /* past the write hold's lease */
    H_ASSERT_RC(rlock_is_held_by_current_thread(t.ar), 1);
    H_ASSERT_RC(rlock_try_lock(t.bw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock(t.ar), RLOCK_OK);
    assert_int_equal(lock_keys(t.r, t.name), 0);
    two_close(&t);
}

/* ---- a stale reader field ------------------------------------------------------ */

/* An actor call: waits 300 ms, then unlocks the lock (arg). */
static long long op_unlock_later(void *lock) {
    h_sleep_ms(300);
    return rlock_unlock(lock);
}

/*
 * A's read hold has a short lease that runs out while B reads on: A's key
 * goes, its field stays (B keeps the hash). A holds no read lock: asking for
 * the write lock is no upgrade (not RLOCK_EDEADLK): it waits for B, and gets
 * it when B leaves.
 */
static void test_expired_read_hold_is_no_upgrade(void **state) {
    two t = two_open("rwe-stale", 30000, 1);
    h_actor *act = h_actor_start();
    (void)state;

    H_ASSERT_RC(h_actor_call(act, h_op_lock, t.br), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(t.ar, 200), RLOCK_OK);
    assert_int_equal(h_hget_int(t.r, t.name, my_field(t.a)), 1);
    h_sleep_ms(400);
    assert_int_equal(h_hget_int(t.r, t.name, my_field(t.a)), 1); /* the field stays */
    H_ASSERT_RC(rlock_is_locked(t.ar), 1);
    H_ASSERT_RC(rlock_try_lock(t.aw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    h_actor_post(act, op_unlock_later, t.br);
    long long start = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(t.aw, H_MS(5000), RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    printf("      the write lock came %lld ms after the ask (B left after 300 ms)\n",
           h_now_ms() - start);
    H_ASSERT_RC(h_actor_wait(act, 5000), RLOCK_OK);
    assert_int_equal(h_hget_int(t.r, t.name, my_field(t.a)), 0);
    H_ASSERT_RC(rlock_unlock(t.aw), RLOCK_OK);
    assert_int_equal(lock_keys(t.r, t.name), 0);
    h_actor_stop(act);
    two_close(&t);
}

/*
 * One client's read and write handles of a fresh name, an on_lock_lost
 * recorder, a second thread of the client (b) and a Redis connection: the
 * expired-lease tests below.
 */
typedef struct lease_case {
    const char *name;
    struct h_lost lost;
    rlock_client *c;
    redisContext *r;
    rlock *rd, *wr;
    h_actor *b;
} lease_case;

static void lease_case_open(lease_case *t, const char *prefix, long long wd) {
    t->name = h_unique_name(prefix);
    t->c = h_open_retries(h_url(), wd, 0, -1, -1, &t->lost);
    t->r = h_redis();
    t->b = h_actor_start();
    H_ASSERT_RC(rlock_get_rw(t->c, t->name, &t->rd, &t->wr), RLOCK_OK);
}

/* Nothing of the lock is left in Redis and nobody was told of a loss; then closes. */
static void lease_case_close(lease_case *t) {
    assert_int_equal(lock_keys(t->r, t->name), 0);
    assert_int_equal(h_lost_count(&t->lost), 0);
    h_actor_stop(t->b);
    rlock_free(t->rd);
    rlock_free(t->wr);
    redisFree(t->r);
    rlock_client_close(t->c);
}

/*
 * The probe of an unlock after a lease ran out: threads A and B of one
 * client read through one handle, B with the watchdog, A with a 200 ms
 * lease that runs out while B keeps the hash. A's unlock is RLOCK_ENOTOWNER
 * (its lease ran out), found by the client's clock (round 1: nothing asked
 * before) and by Redis (round 2: rlock_is_held_by_current_thread dropped the
 * table's entry first, so the unlock asks Redis, which finds A's field with
 * no hold key left); A's hold count is 0; either way A's stale field is
 * taken out of the hash. B's hold is untouched: held, renewed, never
 * reported lost, and its unlock leaves nothing in Redis.
 */
static void test_expired_read_hold_unlock(void **state) {
    long long wd = H_MS(900);
    lease_case t;
    char field[128];
    (void)state;
    lease_case_open(&t, "rwe-lease", wd);
    snprintf(field, sizeof field, "%s", my_field(t.c));

    H_ASSERT_RC(h_actor_call(t.b, h_op_lock, t.rd), RLOCK_OK);
    for (int round = 1; round <= 2; round++) {
        H_ASSERT_RC(rlock_lock_lease(t.rd, 200), RLOCK_OK);
        assert_int_equal(h_hget_int(t.r, t.name, field), 1);
        H_ASSERT_RC(rlock_hold_count(t.rd), 1);
        h_sleep_ms(400);
        assert_int_equal(h_hget_int(t.r, t.name, field), 1); /* B keeps the hash, A's field in it */
        if (round == 2) {
            H_ASSERT_RC(rlock_is_held_by_current_thread(t.rd), 0);
            H_ASSERT_RC(rlock_hold_count(t.rd), 0);
            H_ASSERT_RC(rlock_is_held_by_current_thread(t.rd), 0); /* asked of Redis now */
        }
        H_ASSERT_RC(rlock_unlock(t.rd), RLOCK_ENOTOWNER);
        assert_int_equal(h_hget_int(t.r, t.name, field), 0); /* the stale field is gone */
        H_ASSERT_RC(rlock_hold_count(t.rd), 0);
        H_ASSERT_RC(rlock_unlock(t.rd), RLOCK_ENOTOWNER);
        H_ASSERT_RC(h_actor_call(t.b, h_op_is_held, t.rd), 1);
        H_ASSERT_RC(h_actor_call(t.b, h_op_hold_count, t.rd), 1);
    }
    H_ASSERT_RC(rlock_is_locked(t.rd), 1);
    h_sleep_ms(wd); /* B's hold renewed: a stale field beside it is no loss of B's */
    H_ASSERT_RC(h_actor_call(t.b, h_op_is_held, t.rd), 1);
    H_ASSERT_RC(h_actor_call(t.b, h_op_unlock, t.rd), RLOCK_OK);
    lease_case_close(&t);
}

/*
 * A writer with a lease that downgrades (takes the read lock, watchdog): its read holds
 * keep the hash, so Redis keeps its writer field past the write lease. Its unlock of the
 * write lock after the lease says RLOCK_ENOTOWNER and takes the field out: the lock is
 * left in read mode to its read hold, other readers share it, and nothing is left after
 * the read unlock (before, the writer field stayed and held the lock in write mode for
 * up to a watchdog timeout after everything was unlocked).
 */
static void test_expired_write_hold_after_downgrade(void **state) {
    lease_case t;
    char writer[160];
    struct h_try now;
    (void)state;
    lease_case_open(&t, "rwe-wlease", H_MS(3000));
    snprintf(writer, sizeof writer, "%s:write", my_field(t.c));

    H_ASSERT_RC(rlock_try_lock(t.wr, 0, 200), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(t.rd), RLOCK_OK); /* the downgrade, renewed by the watchdog */
    h_sleep_ms(400);
    assert_int_equal(h_hget_int(t.r, t.name, writer), 1); /* Redis cannot expire one field */
    H_ASSERT_RC(rlock_unlock(t.wr), RLOCK_ENOTOWNER);       /* its lease ran out */
    assert_int_equal(h_hget_int(t.r, t.name, writer), 0);
    now = (struct h_try){t.rd, 0, RLOCK_LEASE_WATCHDOG};
    H_ASSERT_RC(h_actor_call(t.b, h_op_try_lock, &now), RLOCK_OK); /* read mode: shared */
    H_ASSERT_RC(h_actor_call(t.b, h_op_unlock, t.rd), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(t.rd), RLOCK_OK);
    lease_case_close(&t);
}

/*
 * The same writer asks about its write hold after the lease, several times (issue 22,
 * item 6): not held, hold count 0, each time -- its field is still in Redis, but the
 * first query no longer drops what the client knows, so the next one does not read the
 * field as a hold, nor does the unlock (RLOCK_ENOTOWNER, the field goes). A write lock
 * taken again after the lease (the read hold gone, the stale field left) starts afresh
 * at one hold (the script takes the field of count 1 for it): its unlock leaves nothing.
 * Meanwhile an ended write hold is no hold for an attempt either: with the read hold
 * kept, asking for the write lock is an upgrade (RLOCK_EDEADLK at once); waiting for
 * another thread's write lock, the attempts expect no hold of the owner's.
 */
static void test_expired_write_hold_queries(void **state) {
    lease_case t;
    char writer[160];
    (void)state;
    lease_case_open(&t, "rwe-wquery", H_MS(3000));
    snprintf(writer, sizeof writer, "%s:write", my_field(t.c));

    H_ASSERT_RC(rlock_try_lock(t.wr, 0, 200), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(t.rd), RLOCK_OK); /* the downgrade */
    h_sleep_ms(400);
    assert_int_equal(h_hget_int(t.r, t.name, writer), 1);
    for (int i = 0; i < 2; i++) {
        H_ASSERT_RC(rlock_is_held_by_current_thread(t.wr), 0);
        H_ASSERT_RC(rlock_hold_count(t.wr), 0);
    }
    /* It holds the read lock only: the write lock is an upgrade, refused at once. */
    H_ASSERT_RC(rlock_try_lock(t.wr, H_MS(2000), RLOCK_LEASE_WATCHDOG), RLOCK_EDEADLK);
    H_ASSERT_RC(rlock_is_held_by_current_thread(t.wr), 0);
    H_ASSERT_RC(rlock_unlock(t.wr), RLOCK_ENOTOWNER);
    assert_int_equal(h_hget_int(t.r, t.name, writer), 0);
    H_ASSERT_RC(rlock_unlock(t.wr), RLOCK_ENOTOWNER);

    H_ASSERT_RC(rlock_unlock(t.rd), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(t.wr, 0, 200), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(t.rd), RLOCK_OK);
    h_sleep_ms(400);
    H_ASSERT_RC(rlock_hold_count(t.wr), 0);
    H_ASSERT_RC(rlock_unlock(t.rd), RLOCK_OK); /* the stale writer field stays */
    assert_int_equal(h_hget_int(t.r, t.name, writer), 1);
    H_ASSERT_RC(rlock_try_lock(t.wr, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK); /* afresh */
    H_ASSERT_RC(rlock_hold_count(t.wr), 1);
    assert_int_equal(h_hget_int(t.r, t.name, writer), 1);
    H_ASSERT_RC(rlock_unlock(t.wr), RLOCK_OK);
    assert_int_equal(h_hget_int(t.r, t.name, writer), 0);

    /* An ended write lease (no downgrade: gone in Redis too) counts nothing for a wait:
     * the lock is taken afresh after thread B's write unlock, never "lost". */
    H_ASSERT_RC(rlock_try_lock(t.wr, 0, 200), RLOCK_OK);
    h_sleep_ms(400);
    H_ASSERT_RC(h_actor_call(t.b, h_op_lock, t.wr), RLOCK_OK);
    h_actor_post(t.b, op_unlock_later, t.wr);
    H_ASSERT_RC(rlock_try_lock(t.wr, H_MS(5000), RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(t.b, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(t.wr), 1);
    H_ASSERT_RC(rlock_unlock(t.wr), RLOCK_OK);
    lease_case_close(&t);
}

/* ---- the cost of a read unlock ------------------------------------------------------ */

#define MANY_READERS 16
#define CYCLES 50

/*
 * MANY_READERS threads of client A hold the read lock; a reader of client B
 * takes and releases it CYCLES times. Each of B's unlocks may be the longest
 * hold (its key was set last): it reads another reader's key and keeps the
 * TTL -- a bounded number of PTTLs per cycle, not one per reader (Redisson
 * reads every reader's keys at every unlock).
 */
static void test_read_unlock_cost_is_flat(void **state) {
    two t = two_open("rwe-flat", 30000, 1);
    h_actor *act[MANY_READERS];
    (void)state;
    for (int i = 0; i < MANY_READERS; i++) {
        act[i] = h_actor_start();
        H_ASSERT_RC(h_actor_call(act[i], h_op_lock, t.ar), RLOCK_OK);
    }
    long long pttl0 = h_commandstat_calls(t.r, "pttl");
    for (int i = 0; i < CYCLES; i++) {
        H_ASSERT_RC(rlock_lock(t.br), RLOCK_OK);
        H_ASSERT_RC(rlock_unlock(t.br), RLOCK_OK);
    }
    long long pttls = h_commandstat_calls(t.r, "pttl") - pttl0;
    printf("      %d readers holding: %.1f PTTLs per read lock + unlock of another reader\n",
           MANY_READERS, (double)pttls / CYCLES);
    assert_true(pttls <= 4 * CYCLES);
    assert_true(h_pttl(t.r, t.name, strlen(t.name)) > 25000); /* the others hold on: kept */
    for (int i = 0; i < MANY_READERS; i++) {
        H_ASSERT_RC(h_actor_call(act[i], h_op_unlock, t.ar), RLOCK_OK);
        h_actor_stop(act[i]);
    }
    assert_int_equal(lock_keys(t.r, t.name), 0);
    two_close(&t);
}

#define DEEP 1000

/* The hold count in Redis and the client's, and hold key n there, n + 1 not. */
static void check_depth(const two *t, const char *field, int n) {
    char key[512];
    assert_int_equal(h_hget_int(t->r, t->name, field), n);
    H_ASSERT_RC(rlock_hold_count(t->ar), n);
    snprintf(key, sizeof key, "{%s}:%s:rwlock_timeout:%d", t->name, field, n + 1);
    assert_int_equal(h_exists(t->r, key, strlen(key)), 0);
    if (n > 0) {
        snprintf(key, sizeof key, "{%s}:%s:rwlock_timeout:%d", t->name, field, n);
        assert_int_equal(h_exists(t->r, key, strlen(key)), 1);
    }
}

/*
 * Reentrancy DEEP holds deep: read holds (one key each), then a writer's
 * DEEP write holds and DEEP read holds (a downgrade), released write first.
 * The counts agree with Redis on the way; nothing is left in Redis. The
 * first read holds have leases growing by 1 ms, so that each unlock
 * releases the longest hold: a bounded number of PTTLs per unlock (Java
 * Redisson's unlock reads every key left: quadratic in the depth).
 */
static void test_deep_reentrancy(void **state) {
    two t = two_open("rwe-deep", 30000, 0);
    char field[128], wfield[160];
    (void)state;
    snprintf(field, sizeof field, "%s", my_field(t.a));
    snprintf(wfield, sizeof wfield, "%s:write", field);

    for (int i = 1; i <= DEEP; i++)
        H_ASSERT_RC(rlock_lock_lease(t.ar, 20000 + i), RLOCK_OK);
    check_depth(&t, field, DEEP);
    long long pttl0 = h_commandstat_calls(t.r, "pttl");
    for (int i = DEEP; i > 0; i--) {
        if (i % 250 == 0)
            check_depth(&t, field, i);
        H_ASSERT_RC(rlock_unlock(t.ar), RLOCK_OK);
    }
    long long pttls = h_commandstat_calls(t.r, "pttl") - pttl0;
    printf("      %d read holds unwound with %lld PTTLs\n", DEEP, pttls);
    assert_true(pttls <= 4 * DEEP);
    assert_int_equal(lock_keys(t.r, t.name), 0);

    for (int i = 0; i < DEEP; i++)
        H_ASSERT_RC(rlock_lock(t.aw), RLOCK_OK);
    for (int i = 0; i < DEEP; i++)
        H_ASSERT_RC(rlock_lock(t.ar), RLOCK_OK);
    assert_int_equal(h_hget_int(t.r, t.name, wfield), DEEP);
    check_depth(&t, field, DEEP);
    H_ASSERT_RC(rlock_hold_count(t.aw), DEEP);
    for (int i = 0; i < DEEP; i++)
        H_ASSERT_RC(rlock_unlock(t.aw), RLOCK_OK);
    char *mode = h_cmd_str(t.r, "HGET %s mode", t.name);
    assert_string_equal(mode, "read");
    free(mode);
    assert_int_equal(h_hget_int(t.r, t.name, wfield), 0);
    check_depth(&t, field, DEEP);
    for (int i = DEEP; i > 0; i--)
        H_ASSERT_RC(rlock_unlock(t.ar), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(t.ar), RLOCK_ENOTOWNER);
    assert_int_equal(lock_keys(t.r, t.name), 0);
    two_close(&t);
}

/* ---- leavers: killed, cancelled ------------------------------------------------------- */

struct child_args {
    const char *name;
    long long wd_ms;
    int writer; /* 0: takes the read lock (twice); 1: waits for the write lock */
};

/*
 * Child: opens its own client, takes the read lock twice (then says
 * "READING") or, told "go", asks for the write lock (says "WAITING" first:
 * it waits behind the test's reader), then waits to be killed. It is forked
 * before the test opens clients of its own: a fork beside their threads could
 * copy a lock one of them held inside the allocator (ASan's has no fork
 * handler), and the child would hang.
 */
static int child_main(void *arg, int in, int out) {
    struct child_args *a = arg;
    rlock_config cfg;
    rlock_client *c;
    rlock *rd, *wr;
    char line[64];
    h_config(&cfg);
    cfg.watchdog_timeout_ms = a->wd_ms;
    if (rlock_client_open(&cfg, &c) != RLOCK_OK || rlock_get_rw(c, a->name, &rd, &wr) != RLOCK_OK)
        return 2;
    if (a->writer) {
        h_line_recv(in, line, sizeof line, 600000); /* "go": the test reads */
        h_line_send(out, "WAITING");
        rlock_lock(wr); /* the test kills us meanwhile */
        return 3;
    }
    if (rlock_lock(rd) != RLOCK_OK || rlock_lock(rd) != RLOCK_OK)
        return 4;
    h_line_send(out, "READING");
    h_line_recv(in, line, sizeof line, 600000);
    return 0;
}

/* Waits for the child's next line, which must be `says`. */
static void child_says(h_child *ch, const char *says) {
    char line[64];
    h_child_recv(ch, line, sizeof line, 10000);
    assert_string_equal(line, says);
}

/*
 * A reader (two holds, watchdog lease wd) is SIGKILLed: a writer gets in
 * within about one lease, and its hold keys expire with it.
 */
static void test_reader_killed(void **state) {
    long long wd = H_MS(1500);
    struct child_args args = {h_unique_name("rwe-rkill"), wd, 0};
    h_child ch;
    (void)state;

    h_child_start(&ch, child_main, &args);
    child_says(&ch, "READING");
    two t = two_open_as(args.name, 30000, 0);
    h_sleep_ms(wd / 2); /* a renewal */
    h_child_kill(&ch);
    long long start = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(t.aw, H_MS(10000), RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    long long took = h_now_ms() - start;
    printf("      a writer got in %lld ms after the reader's kill (its lease %lld ms)\n", took,
           wd);
    assert_true(took <= wd + H_MS(500));
    H_ASSERT_RC(rlock_unlock(t.aw), RLOCK_OK);
    assert_int_equal(lock_keys(t.r, t.name), 0);
    two_close(&t);
}

/* "rlock_rwlock_writers:{name}" into buf (names without braces). */
static const char *writers_key(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "rlock_rwlock_writers:{%s}", name);
    return buf;
}

/*
 * A writer SIGKILLed while it waits (in the writers' set): new readers are
 * held back until the set's TTL (1 s) ends, no longer; the lock is then
 * theirs, and nothing of the writer's is left.
 */
static void test_waiting_writer_killed(void **state) {
    struct child_args args = {h_unique_name("rwe-wkill"), 30000, 1};
    h_child ch;
    char buf[256];
    (void)state;

    h_child_start(&ch, child_main, &args);
    two t = two_open_as(args.name, 30000, 1);
    const char *writers = writers_key(buf, sizeof buf, t.name);
    H_ASSERT_RC(rlock_lock(t.ar), RLOCK_OK);
    h_child_send(&ch, "go");
    child_says(&ch, "WAITING");
    H_WAIT_FOR(h_exists(t.r, writers, strlen(writers)) == 1, 5000);
    h_child_kill(&ch);
    long long start = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(t.br, H_MS(10000), RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    long long took = h_now_ms() - start;
    printf("      a new reader got in %lld ms after the waiting writer's kill\n", took);
    assert_true(took <= 1000 + H_MS(500));
    assert_int_equal(h_exists(t.r, writers, strlen(writers)), 0);
    H_ASSERT_RC(rlock_unlock(t.br), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(t.ar), RLOCK_OK);
    assert_int_equal(lock_keys(t.r, t.name), 0);
    two_close(&t);
}

static void *lock_main(void *lock) {
    (void)rlock_lock(lock);
    return NULL;
}

/*
 * A writer cancelled (pthread_cancel) while it waits leaves the writers'
 * set at once, and the reader it held back goes at once.
 */
static void test_waiting_writer_cancelled(void **state) {
    (void)state;
    H_SKIP_CANCEL_UNDER_ASAN();
    two t = two_open("rwe-cancel", 30000, 1);
    char buf[256];
    const char *writers = writers_key(buf, sizeof buf, t.name);
    pthread_t th;

    H_ASSERT_RC(rlock_lock(t.ar), RLOCK_OK);
    assert_int_equal(pthread_create(&th, NULL, lock_main, t.bw), 0);
    H_WAIT_FOR(h_exists(t.r, writers, strlen(writers)) == 1, 5000);
    H_ASSERT_RC(rlock_try_lock(t.br, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    assert_int_equal(pthread_cancel(th), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(h_exists(t.r, writers, strlen(writers)), 0);
    H_ASSERT_RC(rlock_try_lock(t.br, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(t.br), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(t.ar), RLOCK_OK);
    assert_int_equal(lock_keys(t.r, t.name), 0);
    two_close(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_downgrade_outlives_write_renewal),
        cmocka_unit_test(test_expired_read_hold_is_no_upgrade),
        cmocka_unit_test(test_expired_read_hold_unlock),
        cmocka_unit_test(test_expired_write_hold_after_downgrade),
        cmocka_unit_test(test_expired_write_hold_queries),
        cmocka_unit_test(test_read_unlock_cost_is_flat),
        cmocka_unit_test(test_deep_reentrancy),
        cmocka_unit_test(test_reader_killed),
        cmocka_unit_test(test_waiting_writer_killed),
        cmocka_unit_test(test_waiting_writer_cancelled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
