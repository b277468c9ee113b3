/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fenced.c - the fenced lock (rlock_get_fenced, Redisson's
 * getFencedLock) and the resource helper (rlock_fenced_set):
 *
 *   tokens       strictly increase across acquisitions: reentrant ones,
 *                plain rlock_lock on a fenced handle, other threads, other
 *                clients, other processes, in-process hand-offs, the same
 *                owner again while Redis still keeps its ended hold
 *   layout       Redisson's: the counter "redisson_lock_token:{name}" with no
 *                TTL, the lock hash as any lock's
 *   fenced_set   accepts tokens >= the highest seen, refuses lower ones
 *                (RLOCK_ESTALE, nothing written), compares 64-bit tokens
 *                exactly, refuses bad input
 *   sigstop      a holder process SIGSTOPped past its lease; another takes
 *                the lock and writes; the first resumes and its write is
 *                refused -- with a lease lock and with a watchdog lock
 *   restart      the counter survives a restart with AOF (appendfsync
 *                always); with RDB only it goes back to the last snapshot,
 *                and without persistence to 0: what a resource then does
 *
 * The holder processes are this program exec'd again ("--holder"), so that
 * they start clean (no inherited threads: TSan and valgrind run them too).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "kind/kind.h" /* the scripts' text, for the re-send test */

static char self_path[PATH_MAX]; /* this program, for the holder processes */

static rlock *fenced(rlock_client *c, const char *name) {
    rlock *l = NULL;
    H_ASSERT_RC(rlock_get_fenced(c, name, &l), RLOCK_OK);
    return l;
}

/* GET of the counter (0 if absent). */
static long long counter(redisContext *r, const char *name) {
    char *v = h_cmd_str(r, "GET redisson_lock_token:{%s}", name);
    long long t = v != NULL ? atoll(v) : 0;
    free(v);
    return t;
}

/* ---- tokens -------------------------------------------------------------------------- */

static long long op_lock_fenced(void *arg) {
    long long token = 0;
    int rc = rlock_lock_fenced(arg, RLOCK_LEASE_WATCHDOG, &token);
    return rc == RLOCK_OK ? token : rc;
}

struct holder_args {
    const char *name, *key;
    long long lease_ms, watchdog_ms;
};
static int exec_holder(void *arg, int in_fd, int out_fd);

static void test_tokens_increase(void **state) {
    rlock_client *c = h_open(30000, 0), *c2 = h_open(30000, 0);
    const char *name = h_unique_name("fence-tok");
    rlock *l = fenced(c, name), *l2 = fenced(c2, name), *plain = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *a = h_actor_start();
    long long t[8] = {0}, before;
    (void)state;

    /* No acquisition yet: token 0, no counter key. */
    H_ASSERT_RC(rlock_fence_token(l, &t[0]), RLOCK_OK);
    assert_int_equal(t[0], 0);

    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, RLOCK_LEASE_WATCHDOG, &t[1]), RLOCK_OK);
    assert_int_equal(t[1], 1);
    /* Reentrant: a new, larger token each time (Redisson INCRs on every acquisition). */
    H_ASSERT_RC(rlock_lock_fenced(l, 20000, &t[2]), RLOCK_OK);
    assert_int_equal(t[2], 2);
    /* A plain lock on the fenced handle counts too. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_fence_token(l, &t[3]), RLOCK_OK);
    assert_int_equal(t[3], 3);
    assert_int_equal(counter(r, name), 3);
    H_ASSERT_RC(rlock_hold_count(l), 3);
    /* Others are refused meanwhile, and take no token. */
    H_ASSERT_RC(rlock_try_lock_fenced(l2, 0, -1, &t[4]), RLOCK_BUSY);
    assert_int_equal(counter(r, name), 3);
    for (int i = 0; i < 3; i++)
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(counter(r, name), 3); /* the counter outlives the lock */

    /* Another thread, another client, another process. */
    t[4] = h_actor_call(a, op_lock_fenced, l);
    assert_int_equal(t[4], 4);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_fenced(l2, 0, -1, &t[5]), RLOCK_OK);
    assert_int_equal(t[5], 5);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    const char *key = h_unique_name("fence-tok-res");
    struct holder_args args = {name, key, RLOCK_LEASE_WATCHDOG, 30000};
    h_child ch;
    char line[128];
    int rc = -100;
    h_child_start(&ch, exec_holder, &args);
    h_child_recv(&ch, line, sizeof line, 10000);
    assert_int_equal(sscanf(line, "HELD %d %lld", &rc, &t[6]), 2);
    H_ASSERT_RC(rc, RLOCK_OK);
    assert_int_equal(t[6], 6);
    h_child_send(&ch, "WRITE");
    h_child_recv(&ch, line, sizeof line, 10000);
    assert_string_equal(line, "WROTE 0");
    h_child_recv(&ch, line, sizeof line, 10000);
    assert_string_equal(line, "UNLOCKED 0");
    assert_int_equal(h_child_finish(&ch, 10000), 0);
    h_cmd_ok(r, "DEL %s rlock_fence:{%s}", key, key);

    /* A plain handle of the same name is the same lock, but takes no token. */
    H_ASSERT_RC(rlock_lock(plain), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_fenced(l2, 0, -1, &t[7]), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock(plain), RLOCK_OK);
    assert_int_equal(counter(r, name), 6);

    /* A failed acquisition takes none either; the token of an error return is untouched. */
    before = counter(r, name);
    h_foreign_lock(r, name, 20000);
    t[7] = -5;
    H_ASSERT_RC(rlock_try_lock_fenced(l, H_MS(100), -1, &t[7]), RLOCK_BUSY);
    assert_int_equal(t[7], -5);
    assert_int_equal(counter(r, name), before);
    h_cmd_ok(r, "DEL %s", name);

    h_actor_stop(a);
    rlock_free(plain);
    rlock_free(l);
    rlock_free(l2);
    redisFree(r);
    rlock_client_close(c);
    rlock_client_close(c2);
}

/* ---- layout ---------------------------------------------------------------------------- */

static void test_layout(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *base = h_unique_name("fence-lay");
    char braced[256];
    redisContext *r = h_redis();
    long long token = 0;
    (void)state;

    rlock *l = fenced(c, base);
    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, 20000, &token), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, base, rlock_client_id(c), 1); /* the ordinary lock hash */
    char *v = h_cmd_str(r, "GET redisson_lock_token:{%s}", base);
    assert_non_null(v);
    assert_int_equal(atoll(v), token);
    free(v);
    assert_int_equal(h_cmd_int(r, "PTTL redisson_lock_token:{%s}", base), -1); /* no TTL */
    /* force_unlock deletes the lock, not the counter. */
    H_ASSERT_RC(rlock_force_unlock(l), 1);
    assert_int_equal(counter(r, base), token);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);

    /* A name with '{' is used as it is: "redisson_lock_token:<name>" (Redisson's prefixName). */
    snprintf(braced, sizeof braced, "{%s}x", base);
    l = fenced(c, braced);
    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, 20000, &token), RLOCK_OK);
    assert_int_equal(token, 1);
    v = h_cmd_str(r, "GET redisson_lock_token:%s", braced);
    assert_non_null(v);
    assert_string_equal(v, "1");
    free(v);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);

    redisFree(r);
    rlock_client_close(c);
}

/* ---- the token through an in-process hand-off, and a re-sent acquisition ------------------- */

struct fenced_try {
    rlock *lock;
    long long wait_ms, token;
};

static long long op_try_fenced(void *arg) {
    struct fenced_try *t = arg;
    return rlock_try_lock_fenced(t->lock, t->wait_ms, RLOCK_LEASE_WATCHDOG, &t->token);
}

static void test_handoff_token(void **state) {
    rlock_client *c = h_open_handoffs(30000, 4);
    const char *name = h_unique_name("fence-handoff");
    rlock *l = fenced(c, name);
    redisContext *r = h_redis();
    h_actor *a = h_actor_start();
    struct fenced_try waiter = {l, H_MS(10000), 0};
    long long mine = 0;
    (void)state;

    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, -1, &mine), RLOCK_OK);
    h_actor_post(a, op_try_fenced, &waiter);
    h_scripts_quiet(r, H_MS(100), H_MS(5000));
    long long published = h_commandstat_calls(r, "publish");
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(a, 5000), RLOCK_OK);
    assert_int_equal(h_commandstat_calls(r, "publish"), published); /* handed over */
    /* The receiver's own acquisition: a new token, the counter's. */
    assert_true(waiter.token > mine);
    assert_int_equal(waiter.token, counter(r, name));
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_OK);

    h_actor_stop(a);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/*
 * Issue 22, item 7: thread P holds the lock through a plain handle (rlock_get) of the
 * name, thread F waits in rlock_try_lock_fenced on a fenced handle of it. P's unlock
 * hands the lock to F in-process (no PUBLISH); F's acquisition still draws a new token
 * from the counter (it got 0 and the counter stayed when the transfer was the plain
 * handle's). A plain waiter handed the lock by a fenced holder draws none.
 */
static void test_handoff_token_from_plain_holder(void **state) {
    rlock_client *c = h_open_handoffs(30000, 4);
    const char *name = h_unique_name("fence-mixed");
    rlock *l = fenced(c, name), *plain = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *a = h_actor_start();
    struct fenced_try waiter = {l, H_MS(10000), 0};
    long long first = 0;
    (void)state;

    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, -1, &first), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(plain), RLOCK_OK);
    h_actor_post(a, op_try_fenced, &waiter);
    h_scripts_quiet(r, H_MS(100), H_MS(5000));
    long long published = h_commandstat_calls(r, "publish");
    H_ASSERT_RC(rlock_unlock(plain), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(a, 5000), RLOCK_OK);
    assert_int_equal(h_commandstat_calls(r, "publish"), published); /* handed over */
    assert_int_equal(waiter.token, first + 1);
    assert_int_equal(counter(r, name), first + 1);

    /* The reverse: the plain waiter takes no token, the counter stays. */
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, -1, &first), RLOCK_OK);
    h_actor_post(a, h_op_lock, plain);
    h_scripts_quiet(r, H_MS(100), H_MS(5000));
    published = h_commandstat_calls(r, "publish");
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(a, 5000), RLOCK_OK);
    assert_int_equal(h_commandstat_calls(r, "publish"), published);
    assert_int_equal(counter(r, name), first);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, plain), RLOCK_OK);

    h_actor_stop(a);
    rlock_free(plain);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- the same owner again, right after its lease ended ------------------------------------- */

/*
 * The client's clock ends a lease at send time + lease; Redis's TTL runs
 * from when the script ran, later. An acquisition Redis ran late (here a
 * CLIENT PAUSE of writes) leaves a window in which the owner knows its hold
 * is over while Redis still keeps its field: an acquisition then must still
 * draw a new token, not answer the ended hold's one.
 */
static void test_reacquire_after_lease(void **state) {
    rlock_client *c = h_open(30000, (int)H_MS(5000));
    const char *name = h_unique_name("fence-again");
    rlock *l = fenced(c, name);
    redisContext *r = h_redis();
    long long first = 0, again = 0, pause = H_MS(400), lease = H_MS(500);
    (void)state;

    h_cmd_ok(r, "CLIENT PAUSE %lld WRITE", pause);
    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, lease, &first), RLOCK_OK);
    /* Returned after ~pause; the client's lease ends at send + lease, Redis's ~pause later. */
    h_sleep_ms(pause / 2 + (lease - pause));
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    assert_true(h_cmd_int(r, "PTTL %s", name) > 0); /* the window: Redis still has the field */
    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, lease, &again), RLOCK_OK);
    printf("      token %lld, then %lld for the acquisition after the lease ended\n", first, again);
    assert_true(again > first);
    assert_int_equal(counter(r, name), again);
    H_ASSERT_RC(rlock_hold_count(l), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- a re-sent acquisition: one hold, and a token of its own ---------------------------------- */

/* EVAL of an rlock script with 2 keys and 3 arguments (ACQUIRE: and the lock's channel and
 * "publish", which it asks the ACL about); the reply (an array of >= n). */
static redisReply *eval_script(redisContext *r, int script, const char *k1, const char *k2,
                               const char *a1, const char *a2, const char *a3, size_t n) {
    redisReply *rep =
        script == RLOCK__SCRIPT_ACQUIRE
            ? h_cmd(r, "EVAL %s 2 %s %s %s %s %s redisson_lock__channel:{%s} publish",
                    rlock__script_body(script), k1, k2, a1, a2, a3, k1)
            : h_cmd(r, "EVAL %s 2 %s %s %s %s %s", rlock__script_body(script), k1, k2, a1, a2, a3);
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < n)
        H_FAIL("unexpected reply (type %d): %s", rep->type, rep->str ? rep->str : "");
    return rep;
}

static long long elem(const redisReply *rep, size_t i) {
    const redisReply *e = rep->element[i];
    return e->type == REDIS_REPLY_INTEGER ? e->integer : atoll(e->str);
}

/* A fenced ACQUIRE as rlock sends it: the token it answers; *count the hold count. */
static long long acquire_sent(redisContext *r, const char *name, const char *token_key,
                              const char *owner, const char *expected, long long *count) {
    redisReply *rep =
        eval_script(r, RLOCK__SCRIPT_ACQUIRE, name, token_key, "20000", owner, expected, 3);
    long long token = elem(rep, 2);
    assert_int_equal(elem(rep, 0), 1);
    *count = elem(rep, 1);
    freeReplyObject(rep);
    return token;
}

/* A fenced TRANSFER as rlock sends it: the receiver's token. */
static long long transfer_sent(redisContext *r, const char *name, const char *token_key,
                               const char *from, const char *to) {
    redisReply *rep = eval_script(r, RLOCK__SCRIPT_TRANSFER, name, token_key, from, to, "20000", 2);
    long long token = elem(rep, 1);
    assert_int_equal(elem(rep, 0), 1);
    freeReplyObject(rep);
    return token;
}

/*
 * What rlock re-sends after a lost reply is the same command: ACQUIRE sees
 * the hold already applied (Redis has expected + 1) and counts it once --
 * but draws a new token (the lost reply's was never seen; the same answer
 * meets an owner acquiring again while Redis keeps its ended hold, whose
 * token was seen: test_reacquire_after_lease). A re-sent TRANSFER draws
 * none: its receiver is still asleep, waiting for this unlock's outcome.
 */
static void test_resend_idempotent(void **state) {
    const char *name = h_unique_name("fence-resend");
    char token_key[256];
    const char *owner = "0b0b0b0b-0000-4000-8000-000000000001:7";
    const char *other = "0b0b0b0b-0000-4000-8000-000000000001:8";
    redisContext *r = h_redis();
    long long count = 0;
    (void)state;

    snprintf(token_key, sizeof token_key, "redisson_lock_token:{%s}", name);
    assert_int_equal(acquire_sent(r, name, token_key, owner, "0", &count), 1);
    assert_int_equal(count, 1);
    assert_int_equal(acquire_sent(r, name, token_key, owner, "0", &count), 2); /* re-sent */
    assert_int_equal(count, 1);
    assert_int_equal(acquire_sent(r, name, token_key, owner, "1", &count), 3); /* re-entry */
    assert_int_equal(count, 2);
    assert_int_equal(acquire_sent(r, name, token_key, owner, "1", &count), 4); /* re-sent */
    assert_int_equal(count, 2);
    assert_int_equal(counter(r, name), 4);
    H_ASSERT_LOCK_IS(r, name, "0b0b0b0b-0000-4000-8000-000000000001", 2);
    h_cmd_ok(r, "HSET %s %s 1", name, owner);
    /* A hand-off to another owner: one INCR, also when the TRANSFER is re-sent. */
    assert_int_equal(transfer_sent(r, name, token_key, owner, other), 5);
    assert_int_equal(transfer_sent(r, name, token_key, owner, other), 5);
    assert_int_equal(counter(r, name), 5);
    H_ASSERT_LOCK_IS(r, name, "0b0b0b0b-0000-4000-8000-000000000001", 1);

    h_cmd_ok(r, "DEL %s %s", name, token_key);
    redisFree(r);
}

/* ---- rlock_fenced_set ----------------------------------------------------------------------- */

static void test_fenced_set(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *key = h_unique_name("fence-res");
    redisContext *r = h_redis();
    const char bin[] = {'a', 0, 'b'};
    (void)state;

    H_ASSERT_RC(rlock_fenced_set(c, key, 5, "five", 4), RLOCK_OK);
    char *v = h_cmd_str(r, "GET %s", key);
    assert_string_equal(v, "five");
    free(v);
    v = h_cmd_str(r, "GET rlock_fence:{%s}", key);
    assert_string_equal(v, "5");
    free(v);
    assert_int_equal(h_cmd_int(r, "PTTL rlock_fence:{%s}", key), -1);
    /* Equal: accepted (a holder writes again). Lower: refused, nothing written. */
    H_ASSERT_RC(rlock_fenced_set(c, key, 5, "five again", 10), RLOCK_OK);
    H_ASSERT_RC(rlock_fenced_set(c, key, 4, "four", 4), RLOCK_ESTALE);
    assert_non_null(strstr(rlock_last_error(), "4 is below 5"));
    v = h_cmd_str(r, "GET %s", key);
    assert_string_equal(v, "five again");
    free(v);
    H_ASSERT_RC(rlock_fenced_set(c, key, 7, bin, sizeof bin), RLOCK_OK);
    redisReply *got = h_cmd(r, "GET %s", key);
    assert_int_equal(got->len, 3);
    assert_memory_equal(got->str, bin, 3);
    freeReplyObject(got);
    H_ASSERT_RC(rlock_fenced_set(c, key, 6, "six", 3), RLOCK_ESTALE);
    H_ASSERT_RC(rlock_fenced_set(c, key, 8, NULL, 0), RLOCK_OK); /* empty value */
    v = h_cmd_str(r, "GET %s", key);
    assert_string_equal(v, "");
    free(v);

    /* 64-bit tokens compare exactly: 2^53 and 2^53 + 1 are one double. */
    h_cmd_ok(r, "SET rlock_fence:{%s} 9007199254740993", key);
    H_ASSERT_RC(rlock_fenced_set(c, key, 9007199254740992LL, "x", 1), RLOCK_ESTALE);
    H_ASSERT_RC(rlock_fenced_set(c, key, 9007199254740993LL, "y", 1), RLOCK_OK);
    H_ASSERT_RC(rlock_fenced_set(c, key, LLONG_MAX, "z", 1), RLOCK_OK);
    H_ASSERT_RC(rlock_fenced_set(c, key, LLONG_MAX - 1, "w", 1), RLOCK_ESTALE);

    /* Somebody's data in the fence key: refused, nothing written. */
    h_cmd_ok(r, "SET rlock_fence:{%s} hello", key);
    H_ASSERT_RC(rlock_fenced_set(c, key, 9, "nine", 4), RLOCK_EREDIS);
    assert_non_null(strstr(rlock_last_error(), "NOTAFENCE"));
    h_cmd_ok(r, "DEL rlock_fence:{%s}", key);
    h_cmd_ok(r, "HSET rlock_fence:{%s} a b", key);
    H_ASSERT_RC(rlock_fenced_set(c, key, 9, "nine", 4), RLOCK_EREDIS);
    v = h_cmd_str(r, "GET %s", key);
    assert_string_equal(v, "z");
    free(v);
    h_cmd_ok(r, "DEL rlock_fence:{%s}", key);

    /* Bad input. */
    H_ASSERT_RC(rlock_fenced_set(NULL, key, 1, "a", 1), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_fenced_set(c, NULL, 1, "a", 1), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_fenced_set(c, "", 1, "a", 1), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_fenced_set(c, key, 0, "a", 1), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_fenced_set(c, key, -3, "a", 1), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_fenced_set(c, key, 1, NULL, 1), RLOCK_EINVAL);
    assert_int_equal(h_cmd_int(r, "EXISTS rlock_fence:{%s}", key), 0);

    /* Closed (a handle keeps the client's struct alive). */
    rlock *keep = h_get(c, key);
    rlock_client_close(c);
    H_ASSERT_RC(rlock_fenced_set(c, key, 1, "a", 1), RLOCK_ECLOSED);
    rlock_free(keep);
    h_cmd_ok(r, "DEL %s", key);
    redisFree(r);
}

static void test_bad_input(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("fence-bad");
    rlock *plain = h_get(c, name), *l = fenced(c, name), *out = (rlock *)&out;
    redisContext *r = h_redis();
    long long token = -7;
    (void)state;

    H_ASSERT_RC(rlock_get_fenced(NULL, name, &out), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get_fenced(c, NULL, &out), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get_fenced(c, "", &out), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get_fenced(c, name, NULL), RLOCK_EINVAL);
    /* Token calls on a handle that is not fenced, or without a token. */
    H_ASSERT_RC(rlock_try_lock_fenced(plain, 0, -1, &token), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "rlock_get_fenced"));
    H_ASSERT_RC(rlock_lock_fenced(plain, -1, &token), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_fence_token(plain, &token), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, -1, NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_fence_token(l, NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock_fenced(NULL, 0, -1, &token), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, 0, &token), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock_fenced_as(l, 0, 0, -1, &token), RLOCK_EINVAL);
    assert_int_equal(token, -7);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* A counter that is not an integer: the acquisition fails, the lock untouched. */
    h_cmd_ok(r, "SET redisson_lock_token:{%s} junk", name);
    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, -1, &token), RLOCK_EREDIS);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_fence_token(l, &token), RLOCK_EREDIS);
    assert_int_equal(token, -7);
    h_cmd_ok(r, "DEL redisson_lock_token:{%s}", name);
    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, -1, &token), RLOCK_OK);
    assert_int_equal(token, 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    rlock_client_close(c);
    H_ASSERT_RC(rlock_try_lock_fenced(l, 0, -1, &token), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_fence_token(l, &token), RLOCK_ECLOSED);
    rlock_free(plain);
    rlock_free(l);
    redisFree(r);
}

/* ---- a holder paused past its lease -------------------------------------------------------- */

/*
 * The holder process (this program, exec'd with --holder NAME KEY LEASE_MS
 * WATCHDOG_MS): takes the fenced lock, says "HELD <rc> <token>", waits for a
 * line "WRITE", writes "holder" to KEY with its token, says "WROTE <rc>",
 * unlocks, says "UNLOCKED <rc>".
 */
static int holder_main(char **argv) {
    rlock_config cfg;
    rlock_client *c;
    rlock *l;
    long long token = 0;
    char line[32];
    h_config(&cfg);
    cfg.watchdog_timeout_ms = atoll(argv[4]);
    if (rlock_client_open(&cfg, &c) != RLOCK_OK || rlock_get_fenced(c, argv[1], &l) != RLOCK_OK)
        return 1;
    int rc = rlock_try_lock_fenced(l, 0, atoll(argv[3]), &token);
    h_line_send(1, "HELD %d %lld", rc, token);
    if (h_line_recv(0, line, sizeof line, H_MS(60000)) < 0 || strcmp(line, "WRITE") != 0)
        return 2;
    rc = rlock_fenced_set(c, argv[2], token, "holder", 6);
    h_line_send(1, "WROTE %d", rc);
    rc = rlock_unlock(l);
    h_line_send(1, "UNLOCKED %d", rc);
    rlock_free(l);
    rlock_client_close(c);
    return 0;
}

/* In the forked child: becomes the holder process (stdin/stdout = the pipes). */
static int exec_holder(void *arg, int in_fd, int out_fd) {
    struct holder_args *h = arg;
    char lease[24], wd[24];
    snprintf(lease, sizeof lease, "%lld", h->lease_ms);
    snprintf(wd, sizeof wd, "%lld", h->watchdog_ms);
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0)
        return 3;
    char *const argv[] = {self_path, (char *)"--holder", (char *)h->name, (char *)h->key,
                          lease, wd, NULL};
    execv(self_path, argv);
    return 4;
}

static void paused_holder(long long lease_ms, long long watchdog_ms) {
    const char *name = h_unique_name("fence-stop"), *key = h_unique_name("fence-stop-res");
    struct holder_args args = {name, key, lease_ms, watchdog_ms};
    rlock_client *c = h_open(30000, 0);
    rlock *l = fenced(c, name);
    redisContext *r = h_redis();
    h_child ch;
    char line[128];
    int rc = -100;
    long long holder_token = 0, token = 0;

    h_child_start(&ch, exec_holder, &args);
    h_child_recv(&ch, line, sizeof line, 10000);
    assert_int_equal(sscanf(line, "HELD %d %lld", &rc, &holder_token), 2);
    H_ASSERT_RC(rc, RLOCK_OK);
    assert_true(holder_token >= 1);

    /* The holder stops (a GC pause, a swapped-out VM) and its lease runs out. */
    assert_int_equal(kill(ch.pid, SIGSTOP), 0);
    H_WAIT_FOR(h_proc_stopped(ch.pid), H_MS(5000));
    long long stopped_at = h_now_ms();
    H_ASSERT_RC(rlock_try_lock_fenced(l, H_MS(10000), RLOCK_LEASE_WATCHDOG, &token), RLOCK_OK);
    printf("      holder stopped; lock taken over %lld ms later, token %lld after %lld\n",
           h_now_ms() - stopped_at, token, holder_token);
    assert_true(h_proc_stopped(ch.pid)); /* still stopped: its lease ran out, not its unlock */
    assert_true(token > holder_token);
    H_ASSERT_RC(rlock_fenced_set(c, key, token, "parent", 6), RLOCK_OK);

    /* It resumes and writes, believing it holds the lock: refused. */
    h_child_send(&ch, "WRITE");
    assert_int_equal(kill(ch.pid, SIGCONT), 0);
    h_child_recv(&ch, line, sizeof line, 10000);
    assert_int_equal(sscanf(line, "WROTE %d", &rc), 1);
    H_ASSERT_RC(rc, RLOCK_ESTALE);
    char *v = h_cmd_str(r, "GET %s", key);
    assert_string_equal(v, "parent");
    free(v);
    v = h_cmd_str(r, "GET rlock_fence:{%s}", key);
    assert_int_equal(atoll(v), token);
    free(v);
    /* Its unlock touches nothing of ours. */
    h_child_recv(&ch, line, sizeof line, 10000);
    assert_int_equal(sscanf(line, "UNLOCKED %d", &rc), 1);
    H_ASSERT_RC(rc, RLOCK_ENOTOWNER);
    assert_int_equal(h_child_finish(&ch, 10000), 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    h_cmd_ok(r, "DEL %s rlock_fence:{%s}", key, key);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

static void test_sigstop_lease(void **state) {
    (void)state;
    paused_holder(H_MS(500), 30000);
}

static void test_sigstop_watchdog(void **state) {
    (void)state;
    paused_holder(RLOCK_LEASE_WATCHDOG, H_MS(600));
}

/* ---- restarts -------------------------------------------------------------------------------- */

/* n acquisitions (and unlocks) of name on c; the last token. */
static long long acquire_n(rlock_client *c, const char *name, int n) {
    rlock *l = fenced(c, name);
    long long token = 0;
    for (int i = 0; i < n; i++) {
        H_ASSERT_RC(rlock_try_lock_fenced(l, H_MS(5000), -1, &token), RLOCK_OK);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    }
    rlock_free(l);
    return token;
}

/* The next token of name on c, once the restarted server answers. */
static long long next_token(rlock_client *c, const char *name) {
    rlock *l = fenced(c, name);
    long long token = 0;
    H_ASSERT_RC(rlock_try_lock_fenced(l, H_MS(10000), -1, &token), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    return token;
}

static void test_restart_aof(void **state) {
    static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    h_server *s = h_server_start_args(aof);
    rlock_client *c = h_open_retries(h_server_url(s), 30000, 0, 20, 250, NULL);
    const char *name = h_unique_name("fence-aof");
    (void)state;

    long long before = acquire_n(c, name, 5);
    assert_int_equal(before, 5);
    h_server_restart(s); /* SIGKILL: no shutdown save; the AOF has every INCR */
    long long after = next_token(c, name);
    printf("      AOF (appendfsync always): %lld before the crash, %lld after\n", before, after);
    assert_int_equal(after, before + 1);

    rlock_client_close(c);
    h_server_stop(s);
}

static void test_restart_rdb(void **state) {
    h_server *s = h_server_start();
    rlock_client *c = h_open_retries(h_server_url(s), 30000, 0, 20, 250, NULL);
    const char *name = h_unique_name("fence-rdb");
    redisContext *r = h_server_redis(s);
    (void)state;

    long long saved = acquire_n(c, name, 3);
    h_cmd_ok(r, "SAVE"); /* a snapshot; then more INCRs that no snapshot has */
    long long before = acquire_n(c, name, 4);
    assert_int_equal(before, saved + 4);
    redisFree(r);
    h_server_restart(s);
    long long after = next_token(c, name);
    printf("      RDB only: snapshot at %lld, %lld before the crash, %lld after: backwards\n",
           saved, before, after);
    assert_int_equal(after, saved + 1);
    assert_true(after < before);

    rlock_client_close(c);
    h_server_stop(s);
}

/*
 * Without persistence the counter starts again at 1. A resource that kept its
 * highest token (here in another, surviving Redis) then refuses the new
 * holders, and still accepts the old token of a holder that did not notice.
 */
static void test_restart_no_persistence(void **state) {
    h_server *s = h_server_start();
    rlock_client *c = h_open_retries(h_server_url(s), 30000, 0, 20, 250, NULL);
    rlock_client *res = h_open(30000, 0); /* the resource's Redis: the suite's server */
    const char *name = h_unique_name("fence-nopersist"), *key = h_unique_name("fence-np-res");
    redisContext *r = h_redis();
    (void)state;

    long long old = acquire_n(c, name, 3);
    H_ASSERT_RC(rlock_fenced_set(res, key, old, "old holder", 10), RLOCK_OK);
    h_server_restart(s);
    long long fresh = next_token(c, name);
    printf("      no persistence: %lld before the restart, %lld after\n", old, fresh);
    assert_int_equal(fresh, 1);
    H_ASSERT_RC(rlock_fenced_set(res, key, fresh, "new holder", 10), RLOCK_ESTALE);
    H_ASSERT_RC(rlock_fenced_set(res, key, old, "old again", 9), RLOCK_OK);

    h_cmd_ok(r, "DEL %s rlock_fence:{%s}", key, key);
    redisFree(r);
    rlock_client_close(res);
    rlock_client_close(c);
    h_server_stop(s);
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[1], "--holder") == 0)
        return holder_main(argv + 1);
    if (realpath(argv[0], self_path) == NULL) {
        perror("realpath");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_increase),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_handoff_token),
        cmocka_unit_test(test_handoff_token_from_plain_holder),
        cmocka_unit_test(test_reacquire_after_lease),
        cmocka_unit_test(test_resend_idempotent),
        cmocka_unit_test(test_fenced_set),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_sigstop_lease),
        cmocka_unit_test(test_sigstop_watchdog),
        cmocka_unit_test(test_restart_aof),
        cmocka_unit_test(test_restart_rdb),
        cmocka_unit_test(test_restart_no_persistence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
