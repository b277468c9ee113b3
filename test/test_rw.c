/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rw.c - the read-write lock (rlock_get_rw, Redisson's
 * getReadWriteLock) on one server:
 *
 *   layout       Redisson's hash (mode, reader and writer fields), the
 *                per-hold keys "{name}:<id>:<thread>:rwlock_timeout:<k>" and
 *                their TTLs, for a plain and a '{tagged}' name
 *   sharing      readers of two clients share; the writer excludes both ways;
 *                reentrancy on both handles; a downgrade (writer reads, then
 *                releases the write lock and still reads)
 *   misuse       an upgrade is RLOCK_EDEADLK at once (from the holds table,
 *                and from Redis when the table does not know); unlocking with
 *                the wrong handle is RLOCK_ENOTOWNER with the hash untouched;
 *                a plain or fair handle of the name, used by the reader (or
 *                downgrading writer) itself, is RLOCK_ENOTLOCK, untouched
 *   watchdog     many readers of one client renewed past several leases, one
 *                script entry re-arming the hash once for all of them; a
 *                reader whose hold key is lost, or whose lock is forced
 *                away, is reported lost exactly once
 *   wake-up      a write unlock wakes every waiting reader of every client at
 *                once; the last read unlock wakes a writer; try_lock timeouts
 *   writers      rlock's waiting-writers set: a waiting writer holds new
 *                readers back (not re-entering ones), leaves the set when it
 *                gives up; a writer is not starved by churning readers (it
 *                gets in after the readers holding when it asked)
 *   exclusion    readers and writers of several clients and processes: a
 *                writer never overlaps anyone, readers do overlap, the
 *                counter is exact
 *   input        bad arguments, a closed client, a forked child
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* ---- helpers ---------------------------------------------------------------- */

static void get_rw(rlock_client *c, const char *name, rlock **r, rlock **w) {
    H_ASSERT_RC(rlock_get_rw(c, name, r, w), RLOCK_OK);
}

/* Up to three clients, each with the read and write handles of one name, and a raw connection. */
typedef struct rw_set {
    int n;
    const char *name;
    rlock_client *c[3];
    rlock *rd[3], *wr[3];
    redisContext *redis;
} rw_set;

/* The first client with watchdog timeout wd and rec (h_lossrec_init'ed here) as its
 * recorder of losses, unless rec is NULL; the others with a 30 s watchdog. */
static rw_set rw_open_recorded(int n, const char *name, long long wd, struct h_lossrec *rec) {
    rw_set s = {.n = n, .name = name, .redis = h_redis()};
    for (int i = 0; i < n; i++) {
        if (i == 0 && rec != NULL) {
            h_lossrec_init(rec);
            s.c[i] = h_lossrec_open(NULL, wd, rec);
        } else {
            s.c[i] = h_open(30000, 0);
        }
        get_rw(s.c[i], name, &s.rd[i], &s.wr[i]);
    }
    return s;
}

static rw_set rw_open(int n, const char *name) {
    return rw_open_recorded(n, name, 0, NULL);
}

static void rw_close(rw_set *s) {
    for (int i = 0; i < s->n; i++) {
        rlock_free(s->rd[i]);
        rlock_free(s->wr[i]);
        rlock_client_close(s->c[i]);
    }
    redisFree(s->redis);
}

/* "{name}:field:rwlock_timeout:k" (name as it is when it has '{'), malloc'd. */
static char *hold_key(const char *name, const char *field, int k) {
    char *key = NULL;
    int tagged = strchr(name, '{') != NULL;
    if (asprintf(&key, "%s%s%s:%s:rwlock_timeout:%d", tagged ? "" : "{", name, tagged ? "" : "}",
                 field, k) < 0)
        abort();
    return key;
}

static char *writers_key(const char *name) {
    char *key = NULL;
    int tagged = strchr(name, '{') != NULL;
    if (asprintf(&key, "rlock_rwlock_writers:%s%s%s", tagged ? "" : "{", name, tagged ? "" : "}") <
        0)
        abort();
    return key;
}

/* The lock's mode field ("read", "write"), or "" if none; static storage. */
static const char *mode_of(redisContext *r, const char *name) {
    static char mode[16];
    char *v = h_cmd_str(r, "HGET %s mode", name);
    snprintf(mode, sizeof mode, "%s", v != NULL ? v : "");
    free(v);
    return mode;
}

static long long hlen(redisContext *r, const char *name) {
    return h_cmd_int(r, "HLEN %s", name);
}

/*
 * The reader field "<id>:<thread>" of client id in name's hash (the first
 * such field; malloc'd), or NULL. A writer field ends in ":write".
 */
static char *reader_field(redisContext *r, const char *name, const char *id) {
    redisReply *rep = h_cmd(r, "HKEYS %s", name);
    char *found = NULL;
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements && !found; i++) {
        const char *f = rep->element[i]->str;
        if (strncmp(f, id, 36) == 0 && strstr(f, ":write") == NULL)
            found = strdup(f);
    }
    freeReplyObject(rep);
    return found;
}

static long long key_pttl(redisContext *r, const char *key) {
    return h_pttl(r, key, strlen(key));
}

/* An actor's rlock_try_lock, timed: post it, then h_actor_wait for the status. */
static long long op_try_timed(void *arg) {
    struct h_try *t = arg;
    return rlock_try_lock(t->lock, t->wait_ms, t->lease_ms);
}

/* ---- layout ------------------------------------------------------------------ */

static void check_layout(const char *name) {
    rlock_client *c = h_open(30000, 0);
    rlock *rd, *wr;
    redisContext *r = h_redis();
    const char *id = rlock_client_id(c);
    get_rw(c, name, &rd, &wr);
    assert_string_equal(rlock_name(rd), name);
    assert_string_equal(rlock_name(wr), name);

    /* Two read holds, leases 10 s and 20 s: one key each, the hash lives for the longest. */
    H_ASSERT_RC(rlock_lock_lease(rd, 10000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(rd, 20000), RLOCK_OK);
    char *field = reader_field(r, name, id);
    assert_non_null(field);
    assert_string_equal(mode_of(r, name), "read");
    assert_int_equal(hlen(r, name), 2);
    assert_int_equal(h_hget_int(r, name, field), 2);
    char *k1 = hold_key(name, field, 1), *k2 = hold_key(name, field, 2);
    char *v = h_cmd_str(r, "GET %s", k1);
    assert_string_equal(v, "1");
    free(v);
    H_ASSERT_BETWEEN(key_pttl(r, k1), 9000, 10000);
    H_ASSERT_BETWEEN(key_pttl(r, k2), 19000, 20000);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 19000, 20000);
    H_ASSERT_RC(rlock_hold_count(rd), 2);
    H_ASSERT_RC(rlock_hold_count(wr), 0);
    H_ASSERT_RC(rlock_is_locked(rd), 1);
    H_ASSERT_RC(rlock_is_locked(wr), 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(rd), 1);
    H_ASSERT_RC(rlock_is_held_by_current_thread(wr), 0);
    long long ttl = 0;
    H_ASSERT_RC(rlock_remain_ttl(wr, &ttl), RLOCK_OK);
    H_ASSERT_BETWEEN(ttl, 19000, 20000);

    /* Releasing the 20 s hold: its key goes, and the hash's TTL becomes the 10 s one's left. */
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    assert_int_equal(h_exists(r, k2, strlen(k2)), 0);
    assert_int_equal(h_hget_int(r, name, field), 1);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 8000, 10000);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(h_exists(r, k1, strlen(k1)), 0);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_ENOTOWNER);

    /* The write lock: "<id>:<thread>:write" -> count, TTL = the lease (watchdog). */
    H_ASSERT_RC(rlock_lock(wr), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(wr), RLOCK_OK);
    char wfield[128];
    snprintf(wfield, sizeof wfield, "%s:write", field);
    assert_string_equal(mode_of(r, name), "write");
    assert_int_equal(hlen(r, name), 2);
    assert_int_equal(h_hget_int(r, name, wfield), 2);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 28000, 30000);
    H_ASSERT_RC(rlock_hold_count(wr), 2);
    H_ASSERT_RC(rlock_hold_count(rd), 0);
    H_ASSERT_RC(rlock_is_locked(wr), 1);
    H_ASSERT_RC(rlock_is_locked(rd), 0);
    H_ASSERT_RC(rlock_unlock(wr), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(wr), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_is_locked(wr), 0);
    H_ASSERT_RC(rlock_remain_ttl(rd, &ttl), RLOCK_OK);
    assert_int_equal(ttl, -2);

    free(k1);
    free(k2);
    free(field);
    rlock_free(rd);
    rlock_free(wr);
    redisFree(r);
    rlock_client_close(c);
}

static void test_layout(void **state) {
    char tagged[200];
    (void)state;
    check_layout(h_unique_name("rw-layout"));
    snprintf(tagged, sizeof tagged, "{%s}:rw", h_unique_name("tag"));
    check_layout(tagged);
}

/*
 * Redisson's TTL rule for readers: the hash lives as long as its longest
 * read hold's key. A reader leaving with the longest lease shrinks it to the
 * next; the last live reader leaving frees it -- also when other readers'
 * fields are left whose keys are gone (they died): "0" is published then.
 */
static void test_read_release_ttl(void **state) {
    rw_set s = rw_open(3, h_unique_name("rw-ttl"));
    const char *name = s.name;
    rlock_client *b = s.c[1];
    rlock *ar = s.rd[0], *br = s.rd[1], *cr = s.rd[2];
    redisContext *r = s.redis;
    (void)state;

    H_ASSERT_RC(rlock_lock_lease(ar, 20000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(br, 10000), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 19000, 20000);
    H_ASSERT_RC(rlock_unlock(ar), RLOCK_OK); /* the longest: the TTL falls to b's */
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 9000, 10000);
    H_ASSERT_RC(rlock_lock_lease(ar, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(ar), RLOCK_OK); /* not the longest: b's TTL stands */
    H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 9000, 10000);

    /* c reads; b "dies": its hold key is gone, its field stays. c's unlock frees the lock. */
    H_ASSERT_RC(rlock_lock_lease(cr, 15000), RLOCK_OK);
    char *bfield = reader_field(r, name, rlock_client_id(b));
    char *bkey = hold_key(name, bfield, 1);
    h_cmd_ok(r, "DEL %s", bkey);
    redisContext *sub = h_redis();
    char channel[300];
    snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", name);
    redisReply *rep = redisCommand(sub, "SUBSCRIBE %s", channel);
    freeReplyObject(rep);
    H_ASSERT_RC(rlock_unlock(cr), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(redisGetReply(sub, (void **)&rep), REDIS_OK);
    assert_int_equal((int)rep->elements, 3);
    assert_string_equal(rep->element[2]->str, "0");
    freeReplyObject(rep);
    redisFree(sub);
    H_ASSERT_RC(rlock_unlock(br), RLOCK_ENOTOWNER); /* its hold went with the lock */

    free(bfield);
    free(bkey);
    rw_close(&s);
}

/* ---- sharing, exclusion, reentrancy, downgrade ---------------------------------- */

static void test_shared_readers_exclusive_writer(void **state) {
    rw_set s = rw_open(3, h_unique_name("rw-share"));
    const char *name = s.name;
    rlock *ar = s.rd[0], *aw = s.wr[0], *br = s.rd[1], *bw = s.wr[1], *cw = s.wr[2];
    redisContext *r = s.redis;
    (void)state;

    /* Readers of two clients at once; a third client's writer is refused. */
    H_ASSERT_RC(rlock_try_lock(ar, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(br, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    assert_int_equal(hlen(r, name), 3);
    H_ASSERT_RC(rlock_try_lock(cw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock(cw, H_MS(200), RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock(ar), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(cw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY); /* b still reads */
    H_ASSERT_RC(rlock_unlock(br), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* The writer excludes readers and writers of the other clients. */
    H_ASSERT_RC(rlock_try_lock(cw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(ar, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock(bw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock(br, H_MS(200), RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_is_locked(ar), 0);
    H_ASSERT_RC(rlock_is_locked(aw), 1);
    H_ASSERT_RC(rlock_unlock(cw), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(bw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(bw), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rw_close(&s);
}

/* Readers of ONE client (two threads) share too: two fields, one per thread. */
static void test_readers_of_one_client(void **state) {
    rw_set s = rw_open(1, h_unique_name("rw-onecl"));
    const char *name = s.name;
    rlock *rd = s.rd[0], *wr = s.wr[0];
    redisContext *r = s.redis;
    h_actor *t = h_actor_start();
    (void)state;

    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    H_ASSERT_RC(h_actor_call(t, h_op_lock, rd), RLOCK_OK);
    assert_int_equal(hlen(r, name), 3);
    struct h_try tw = {.lock = wr, .wait_ms = 0, .lease_ms = RLOCK_LEASE_WATCHDOG};
    H_ASSERT_RC(h_actor_call(t, op_try_timed, &tw), RLOCK_EDEADLK); /* t reads too */
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    H_ASSERT_RC(h_actor_call(t, h_op_unlock, rd), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    h_actor_stop(t);
    rw_close(&s);
}

static void test_reentrancy_and_downgrade(void **state) {
    rw_set s = rw_open(2, h_unique_name("rw-down"));
    const char *name = s.name;
    rlock *ar = s.rd[0], *aw = s.wr[0], *br = s.rd[1], *bw = s.wr[1];
    redisContext *r = s.redis;
    (void)state;

    /* Write twice, then read twice (a downgrade): both kinds of holds, one thread. */
    H_ASSERT_RC(rlock_lock(aw), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(aw), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(ar), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(ar, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(aw), 2);
    H_ASSERT_RC(rlock_hold_count(ar), 2);
    assert_string_equal(mode_of(r, name), "write");
    assert_int_equal(hlen(r, name), 3);
    H_ASSERT_RC(rlock_is_locked(ar), 1); /* write mode, the writer also reads */
    H_ASSERT_RC(rlock_is_locked(aw), 1);
    /* A writer that also reads may re-enter its write lock: no deadlock. */
    H_ASSERT_RC(rlock_try_lock(aw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(aw), RLOCK_OK);
    /* Others see a write-held lock. */
    H_ASSERT_RC(rlock_try_lock(br, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock(bw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);

    /* The write lock goes, the read holds stay: the lock is in read mode now. */
    H_ASSERT_RC(rlock_unlock(aw), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(aw), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(aw), RLOCK_ENOTOWNER);
    assert_string_equal(mode_of(r, name), "read");
    assert_int_equal(hlen(r, name), 2);
    H_ASSERT_RC(rlock_hold_count(ar), 2);
    H_ASSERT_RC(rlock_is_locked(aw), 0);
    H_ASSERT_RC(rlock_try_lock(br, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK); /* shared now */
    H_ASSERT_RC(rlock_try_lock(bw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_EDEADLK);
    H_ASSERT_RC(rlock_unlock(br), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(bw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock(ar), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(ar), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_try_lock(bw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(bw), RLOCK_OK);

    rw_close(&s);
}

/*
 * A writer with a reader of its own client waiting takes the read lock at
 * once (it does not queue behind that waiter, which waits for it), and its
 * write unlock lets the waiter share the read lock with it.
 */
static void test_downgrade_with_local_waiter(void **state) {
    rw_set s = rw_open(1, h_unique_name("rw-downwait"));
    const char *name = s.name;
    rlock *rd = s.rd[0], *wr = s.wr[0];
    redisContext *r = s.redis;
    h_actor *t = h_actor_start();
    struct h_try tr;
    (void)state;
    tr = (struct h_try){.lock = rd, .wait_ms = H_MS(10000), .lease_ms = RLOCK_LEASE_WATCHDOG};

    H_ASSERT_RC(rlock_lock(wr), RLOCK_OK);
    h_actor_post(t, op_try_timed, &tr);
    h_scripts_quiet(r, 150, 5000); /* the reader waits */
    long long start = h_now_ms();
    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    assert_true(h_now_ms() - start < H_MS(50));
    assert_false(h_actor_done(t));
    H_ASSERT_RC(rlock_unlock(wr), RLOCK_OK); /* "1": the waiter reads too */
    H_ASSERT_RC(h_actor_wait(t, 2000), RLOCK_OK);
    assert_string_equal(mode_of(r, name), "read");
    assert_int_equal(hlen(r, name), 3);
    H_ASSERT_RC(h_actor_call(t, h_op_unlock, rd), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    h_actor_stop(t);
    rw_close(&s);
}

/*
 * Explicit owners (the _as calls) on read-write handles, from one thread:
 * two owners share the read lock, a third's writer waits for both, an owner
 * that reads gets RLOCK_EDEADLK for the write lock (named in the message),
 * and one owner's unlock never releases another's hold.
 */
static void test_explicit_owners(void **state) {
    rw_set s = rw_open(1, h_unique_name("rw-owners"));
    rlock *rd = s.rd[0], *wr = s.wr[0];
    uint64_t o1 = rlock_owner_new(), o2 = rlock_owner_new(), o3 = rlock_owner_new();
    (void)state;

    H_ASSERT_RC(rlock_lock_as(rd, o1, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(rd, o2, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    assert_int_equal(hlen(s.redis, s.name), 3);
    H_ASSERT_RC(rlock_try_lock_as(wr, o3, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock_as(wr, o1, H_MS(1000), RLOCK_LEASE_WATCHDOG), RLOCK_EDEADLK);
    assert_non_null(strstr(rlock_last_error(), "owner "));
    H_ASSERT_RC(rlock_try_lock(wr, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY); /* the thread is another owner */
    H_ASSERT_RC(rlock_hold_count_as(rd, o2), 1);
    H_ASSERT_RC(rlock_is_held_by(wr, o1), 0);
    H_ASSERT_RC(rlock_unlock_as(wr, o1), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_unlock_as(rd, o3), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_unlock_as(rd, o1), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(wr, o3, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY); /* o2 reads */
    H_ASSERT_RC(rlock_unlock_as(rd, o2), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(wr, o3, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_as(rd, o3, RLOCK_LEASE_WATCHDOG), RLOCK_OK); /* its downgrade */
    H_ASSERT_RC(rlock_unlock_as(wr, o3), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(rd, o3), RLOCK_OK);
    assert_int_equal(h_exists(s.redis, s.name, strlen(s.name)), 0);

    rw_close(&s);
}

/* ---- misuse ------------------------------------------------------------------------ */

/* Copies of name's hash and PTTL, to check a refused call left them alone. */
typedef struct snapshot {
    char *fields;
    long long pttl;
} snapshot;

static snapshot snap(redisContext *r, const char *name) {
    redisReply *rep = h_cmd(r, "HGETALL %s", name);
    size_t size = 1;
    for (size_t i = 0; i < rep->elements; i++)
        size += rep->element[i]->len + 1;
    snapshot s = {.fields = calloc(1, size), .pttl = h_pttl(r, name, strlen(name))};
    for (size_t i = 0; i < rep->elements; i++) {
        strcat(s.fields, rep->element[i]->str);
        strcat(s.fields, "|");
    }
    freeReplyObject(rep);
    return s;
}

static void assert_unchanged(redisContext *r, const char *name, snapshot *before) {
    snapshot after = snap(r, name);
    assert_string_equal(after.fields, before->fields);
    assert_true(after.pttl <= before->pttl && after.pttl > before->pttl - H_MS(1000));
    free(after.fields);
    free(before->fields);
}

static void test_upgrade_is_edeadlk(void **state) {
    rw_set s = rw_open(1, h_unique_name("rw-upgrade"));
    const char *name = s.name;
    rlock_client *a = s.c[0];
    rlock *rd = s.rd[0], *wr = s.wr[0];
    redisContext *r = s.redis;
    (void)state;

    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    long long calls = h_script_calls(r);
    long long start = h_now_ms();
    snapshot before = snap(r, name);
    H_ASSERT_RC(rlock_lock(wr), RLOCK_EDEADLK); /* Redisson: waits for ever */
    H_ASSERT_RC(rlock_try_lock(wr, H_MS(5000), RLOCK_LEASE_WATCHDOG), RLOCK_EDEADLK);
    H_ASSERT_RC(rlock_try_lock(wr, 0, 1000), RLOCK_EDEADLK);
    assert_true(h_now_ms() - start < H_MS(500));
    assert_int_equal(h_script_calls(r), calls); /* told by the holds table: no round trip */
    assert_non_null(strstr(rlock_last_error(), "read lock"));
    assert_unchanged(r, name, &before);
    H_ASSERT_RC(rlock_hold_count(rd), 1);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);

    /*
     * A read hold the holds table does not know of (an acquisition whose
     * reply never came, as it looks to this thread): Redis says so.
     */
    H_ASSERT_RC(rlock_lock_lease(rd, 30000), RLOCK_OK);
    char *field = reader_field(r, name, rlock_client_id(a));
    char *key = hold_key(name, field, 1);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    h_cmd_ok(r, "HSET %s mode read", name);
    h_cmd_ok(r, "HSET %s %s 1", name, field);
    h_cmd_ok(r, "PEXPIRE %s 30000", name);
    h_cmd_ok(r, "SET %s 1 PX 30000", key);
    start = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(wr, H_MS(5000), RLOCK_LEASE_WATCHDOG), RLOCK_EDEADLK);
    assert_true(h_now_ms() - start < H_MS(500));
    assert_string_equal(mode_of(r, name), "read");
    /* Its unlock (nothing known: Redis decides) gives the adopted hold back. */
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(h_exists(r, key, strlen(key)), 0);

    free(field);
    free(key);
    rw_close(&s);
}

static void test_wrong_handle_unlock(void **state) {
    rw_set s = rw_open(1, h_unique_name("rw-wrong"));
    const char *name = s.name;
    rlock *rd = s.rd[0], *wr = s.wr[0];
    redisContext *r = s.redis;
    (void)state;

    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    snapshot before = snap(r, name);
    H_ASSERT_RC(rlock_unlock(wr), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_force_unlock(wr), 0); /* not in write mode: Redisson's rule */
    assert_unchanged(r, name, &before);
    H_ASSERT_RC(rlock_hold_count(rd), 1);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);

    H_ASSERT_RC(rlock_lock(wr), RLOCK_OK);
    before = snap(r, name);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_force_unlock(rd), 0);
    assert_unchanged(r, name, &before);
    H_ASSERT_RC(rlock_unlock(wr), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rw_close(&s);
}

/* A plain lock (rlock_get) of the same name: the read-write handles wait, never touch it. */
static void test_other_kind_same_name(void **state) {
    rw_set s = rw_open(1, h_unique_name("rw-mixed"));
    const char *name = s.name;
    rlock_client *a = h_open(30000, 0);
    rlock *plain = h_get(a, name), *rd = s.rd[0], *wr = s.wr[0];
    redisContext *r = s.redis;
    (void)state;

    H_ASSERT_RC(rlock_lock(plain), RLOCK_OK);
    snapshot before = snap(r, name);
    H_ASSERT_RC(rlock_try_lock(rd, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock(wr, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_force_unlock(rd), 0);
    assert_unchanged(r, name, &before);
    H_ASSERT_RC(rlock_unlock(plain), RLOCK_OK);

    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(plain, 0, RLOCK_LEASE_WATCHDOG), RLOCK_ENOTLOCK);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    h_cmd_ok(r, "HSET %s somebody data", name); /* not a lock at all */
    H_ASSERT_RC(rlock_try_lock(rd, 0, RLOCK_LEASE_WATCHDOG), RLOCK_ENOTLOCK);
    H_ASSERT_RC(rlock_try_lock(wr, 0, RLOCK_LEASE_WATCHDOG), RLOCK_ENOTLOCK);
    H_ASSERT_RC(rlock_force_unlock(wr), RLOCK_ENOTLOCK);
    assert_int_equal(hlen(r, name), 1);
    h_cmd_ok(r, "DEL %s", name);

    rlock_free(plain);
    rw_close(&s);
    rlock_client_close(a);
}

/* Every key of name's lock in Redis (the hash, hold keys, the writers' set). */
static long long keys_of(redisContext *r, const char *name) {
    redisReply *rep = h_cmd(r, "KEYS *%s*", name);
    long long n = (long long)rep->elements;
    freeReplyObject(rep);
    return n;
}

/*
 * other (a plain or fair handle of the name, same client) while this thread
 * holds the read-write lock: its reader field "<uuid>:<thread>" is the field
 * other would own, but the hash is a read-write lock's. Acquire, unlock and
 * force_unlock answer RLOCK_ENOTLOCK and change nothing.
 */
static void check_refused_by_own_rw(redisContext *r, const char *name, rlock *other) {
    snapshot before = snap(r, name);
    H_ASSERT_RC(rlock_try_lock(other, 0, RLOCK_LEASE_WATCHDOG), RLOCK_ENOTLOCK);
    H_ASSERT_RC(rlock_try_lock(other, H_MS(200), 30000), RLOCK_ENOTLOCK);
    H_ASSERT_RC(rlock_hold_count(other), 0);
    /* Nothing known to the holds table: Redis decides, and it is not other's kind. */
    H_ASSERT_RC(rlock_unlock(other), RLOCK_ENOTLOCK);
    H_ASSERT_RC(rlock_force_unlock(other), RLOCK_ENOTLOCK);
    assert_unchanged(r, name, &before);
}

/*
 * The same thread holds the read lock (or the write and read locks: a
 * downgrade) and uses a plain and a fair handle of the name: the other
 * kinds' scripts must not take the reader's field for their own (they did:
 * the plain try_lock "re-entered", its unlock deleted the read-write hash and
 * the reader's hold was lost). Then a plain watchdog hold whose hash was
 * replaced by this thread's read-write lock: its renewal must not renew the
 * reader's field as its own (it is lost, once), and the read hold lives.
 */
static void test_other_kind_same_owner(void **state) {
    struct h_lossrec rec;
    long long wd = H_MS(900);
    rw_set s = rw_open_recorded(1, h_unique_name("rw-mixown"), wd, &rec);
    const char *name = s.name;
    rlock *rd = s.rd[0], *wr = s.wr[0], *plain = h_get(s.c[0], name), *fair = NULL;
    redisContext *r = s.redis;
    (void)state;
    H_ASSERT_RC(rlock_get_fair(s.c[0], name, &fair), RLOCK_OK);

    /* Read mode. */
    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    check_refused_by_own_rw(r, name, plain);
    check_refused_by_own_rw(r, name, fair);
    H_ASSERT_RC(rlock_hold_count(rd), 1);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    assert_int_equal(keys_of(r, name), 0);

    /* A downgrade: write mode, the writer reads too. */
    H_ASSERT_RC(rlock_lock(wr), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    check_refused_by_own_rw(r, name, plain);
    check_refused_by_own_rw(r, name, fair);
    assert_string_equal(mode_of(r, name), "write");
    H_ASSERT_RC(rlock_unlock(wr), RLOCK_OK);
    assert_string_equal(mode_of(r, name), "read");
    check_refused_by_own_rw(r, name, plain);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    assert_int_equal(keys_of(r, name), 0);
    h_sleep_ms(wd); /* a renewal round or more: nothing was lost */
    assert_int_equal(h_lossrec_lost(&rec, name) + h_lossrec_others(&rec, name), 0);

    /* A plain hold whose hash went (deleted behind its back) while the thread reads. */
    H_ASSERT_RC(rlock_lock(plain), RLOCK_OK);
    h_cmd_ok(r, "DEL %s", name);
    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    H_WAIT_FOR(h_lossrec_lost(&rec, name) == 1, 3 * wd); /* the plain hold's, at its renewal */
    h_sleep_ms(wd);
    assert_int_equal(h_lossrec_lost(&rec, name), 1);
    assert_string_equal(mode_of(r, name), "read");
    H_ASSERT_RC(rlock_unlock(plain), RLOCK_ENOTOWNER); /* lost, told already */
    H_ASSERT_RC(rlock_hold_count(rd), 1);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    assert_int_equal(keys_of(r, name), 0);
    assert_int_equal(h_lossrec_lost(&rec, name), 1);
    assert_int_equal(h_lossrec_others(&rec, name), 0);

    rlock_free(plain);
    rlock_free(fair);
    rw_close(&s);
}

/* ---- watchdog ------------------------------------------------------------------------ */

#define READERS 8

/*
 * READERS reader threads of one client hold the lock for several leases:
 * nothing is lost, every hold key lives, and each renewal round is one
 * script that re-arms the hash once for all of them (INFO commandstats:
 * READERS + 1 PEXPIREs per script).
 */
static void test_watchdog_renews_readers(void **state) {
    struct h_lossrec rec;
    long long wd = H_MS(900);
    rlock_client *c;
    const char *name = h_unique_name("rw-wd");
    rlock *rd, *wr;
    redisContext *r = h_redis();
    h_actor *t[READERS];
    (void)state;
    h_lossrec_init(&rec);
    h_register_clients = 0; /* its rewrites are PEXPIREs too (test_observe.c covers them) */
    c = h_lossrec_open(NULL, wd, &rec);
    h_register_clients = 1;
    get_rw(c, name, &rd, &wr);

    for (int i = 0; i < READERS; i++) {
        t[i] = h_actor_start();
        H_ASSERT_RC(h_actor_call(t[i], h_op_lock, rd), RLOCK_OK);
    }
    assert_int_equal(hlen(r, name), READERS + 1);
    /* Quiet: only renewals run now. Count over about three rounds. */
    h_sleep_ms(wd / 3 / 2);
    long long scripts0 = h_script_calls(r), pexpire0 = h_commandstat_calls(r, "pexpire");
    h_sleep_ms(3 * wd);
    long long scripts = h_script_calls(r) - scripts0;
    long long pexpires = h_commandstat_calls(r, "pexpire") - pexpire0;
    printf("      %d readers, %lld renewal scripts, %lld PEXPIREs (%.1f per script)\n", READERS,
           scripts, pexpires, scripts > 0 ? (double)pexpires / scripts : 0.0);
    assert_true(scripts >= 2);
    assert_int_equal(pexpires, scripts * (READERS + 1));

    assert_int_equal(hlen(r, name), READERS + 1);
    assert_true(h_pttl(r, name, strlen(name)) > wd / 2);
    redisReply *keys = h_cmd(r, "HKEYS %s", name);
    for (size_t i = 0; i < keys->elements; i++) {
        if (strcmp(keys->element[i]->str, "mode") == 0)
            continue;
        char *key = hold_key(name, keys->element[i]->str, 1);
        assert_true(key_pttl(r, key) > wd / 2);
        free(key);
    }
    freeReplyObject(keys);
    assert_int_equal(h_lossrec_lost(&rec, name) + h_lossrec_others(&rec, name), 0);
    for (int i = 0; i < READERS; i++) {
        H_ASSERT_RC(h_actor_call(t[i], h_op_unlock, rd), RLOCK_OK);
        h_actor_stop(t[i]);
    }
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rlock_free(rd);
    rlock_free(wr);
    redisFree(r);
    rlock_client_close(c);
}

/* A reader whose hold key vanishes (its lease ran out in Redis) is told once, at the next round. */
static void test_reader_key_lost(void **state) {
    struct h_lossrec rec;
    long long wd = H_MS(900);
    rw_set s = rw_open_recorded(2, h_unique_name("rw-keylost"), wd, &rec);
    const char *name = s.name;
    rlock_client *c = s.c[0];
    rlock *rd = s.rd[0], *ord = s.rd[1];
    redisContext *r = s.redis;
    (void)state;

    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(ord), RLOCK_OK); /* keeps the lock alive meanwhile */
    char *field = reader_field(r, name, rlock_client_id(c));
    char *key = hold_key(name, field, 1);
    h_cmd_ok(r, "DEL %s", key);
    H_WAIT_FOR(h_lossrec_lost(&rec, name) == 1, 3 * wd);
    h_sleep_ms(2 * wd); /* more rounds: still once */
    assert_int_equal(h_lossrec_lost(&rec, name), 1);
    assert_int_equal(h_lossrec_lost_events(&rec, name), 1);
    H_ASSERT_RC(rlock_is_held_by_current_thread(rd), 0);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_ENOTOWNER); /* its last hold: it holds nothing, as wanted */
    /* Afresh: a read hold of count 1, with its key. */
    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count(rd), 1);
    assert_true(key_pttl(r, key) > 0);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(ord), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    assert_int_equal(h_lossrec_lost(&rec, name), 1);

    free(field);
    free(key);
    rw_close(&s);
}

/* A read lock forced away (another client's read handle) is told once; two holds: ELOST. */
static void test_reader_forced(void **state) {
    struct h_lossrec rec;
    long long wd = H_MS(900);
    rw_set s = rw_open_recorded(2, h_unique_name("rw-forced"), wd, &rec);
    const char *name = s.name;
    rlock *rd = s.rd[0], *ord = s.rd[1], *owr = s.wr[1];
    redisContext *r = s.redis;
    (void)state;

    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    H_ASSERT_RC(rlock_force_unlock(owr), 0); /* the write handle: not in write mode */
    H_ASSERT_RC(rlock_force_unlock(ord), 1);
    H_WAIT_FOR(h_lossrec_lost(&rec, name) == 1, 3 * wd);
    H_ASSERT_RC(rlock_try_lock(owr, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK); /* somebody else's now */
    h_sleep_ms(2 * wd);
    assert_int_equal(h_lossrec_lost(&rec, name), 1);
    assert_int_equal(h_lossrec_lost_events(&rec, name), 1);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_ELOST); /* it believed in two holds */
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_ENOTOWNER);
    assert_string_equal(mode_of(r, name), "write"); /* the new writer's, untouched */
    H_ASSERT_RC(rlock_unlock(owr), RLOCK_OK);
    assert_int_equal(h_lossrec_lost(&rec, name), 1);

    rw_close(&s);
}

/* ---- wake-up ------------------------------------------------------------------------- */

#define WAITING_READERS 4

/* Every reader waiting behind a writer -- four threads in each of two clients -- goes at its unlock. */
static void test_write_unlock_wakes_all_readers(void **state) {
    rw_set s = rw_open(3, h_unique_name("rw-wakeall"));
    const char *name = s.name;
    rlock *aw = s.wr[0], *br = s.rd[1], *cr = s.rd[2];
    redisContext *r = s.redis;
    h_actor *t[2 * WAITING_READERS];
    struct h_try tries[2 * WAITING_READERS];
    (void)state;

    H_ASSERT_RC(rlock_lock(aw), RLOCK_OK);
    for (int i = 0; i < 2 * WAITING_READERS; i++) {
        t[i] = h_actor_start();
        tries[i] = (struct h_try){.lock = i % 2 ? cr : br, .wait_ms = H_MS(20000),
                                  .lease_ms = RLOCK_LEASE_WATCHDOG};
        h_actor_post(t[i], op_try_timed, &tries[i]);
    }
    h_scripts_quiet(r, 150, 5000); /* every reader tried and sleeps */
    long long unlocked = h_now_ms();
    H_ASSERT_RC(rlock_unlock(aw), RLOCK_OK);
    long long last = 0;
    for (int i = 0; i < 2 * WAITING_READERS; i++) {
        H_ASSERT_RC(h_actor_wait(t[i], 5000), RLOCK_OK);
        long long took = h_actor_finished_ms(t[i]) - unlocked;
        last = took > last ? took : last;
    }
    printf("      %d readers of two clients acquired, the last %lld ms after the write unlock\n",
           2 * WAITING_READERS, last);
    assert_true(last < H_MS(1000)); /* not a lease (30 s) or a poll later */
    assert_string_equal(mode_of(r, name), "read");
    assert_int_equal(hlen(r, name), 2 * WAITING_READERS + 1);
    for (int i = 0; i < 2 * WAITING_READERS; i++) {
        H_ASSERT_RC(h_actor_call(t[i], h_op_unlock, tries[i].lock), RLOCK_OK);
        h_actor_stop(t[i]);
    }
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rw_close(&s);
}

/* A writer waits for the last of two readers, and gets the lock at its unlock. */
static void test_last_read_unlock_wakes_writer(void **state) {
    rw_set s = rw_open(3, h_unique_name("rw-wakewriter"));
    const char *name = s.name;
    rlock *ar = s.rd[0], *br = s.rd[1], *cw = s.wr[2];
    redisContext *r = s.redis;
    h_actor *t = h_actor_start();
    struct h_try tw;
    (void)state;
    tw = (struct h_try){.lock = cw, .wait_ms = H_MS(20000), .lease_ms = RLOCK_LEASE_WATCHDOG};

    H_ASSERT_RC(rlock_lock(ar), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(br), RLOCK_OK);
    h_actor_post(t, op_try_timed, &tw);
    h_scripts_quiet(r, 150, 5000);
    H_ASSERT_RC(rlock_unlock(ar), RLOCK_OK);
    h_sleep_ms(100);
    assert_false(h_actor_done(t)); /* b still reads */
    long long unlocked = h_now_ms();
    H_ASSERT_RC(rlock_unlock(br), RLOCK_OK);
    H_ASSERT_RC(h_actor_wait(t, 5000), RLOCK_OK);
    long long took = h_actor_finished_ms(t) - unlocked;
    printf("      the writer acquired %lld ms after the last read unlock\n", took);
    assert_true(took < H_MS(1000));
    assert_string_equal(mode_of(r, name), "write");
    H_ASSERT_RC(h_actor_call(t, h_op_unlock, cw), RLOCK_OK);
    h_actor_stop(t);

    rw_close(&s);
}

/* ---- rlock's waiting writers ------------------------------------------------------------ */

/*
 * A writer that waits is in the writers' set (with a short TTL), which holds
 * new readers back -- not a reader that re-enters -- and leaves it when it
 * gives up; a set left by a writer that died holds readers back no longer
 * than its TTL.
 */
static void test_waiting_writer_holds_readers_back(void **state) {
    rw_set s = rw_open(3, h_unique_name("rw-writers"));
    const char *name = s.name;
    rlock *ar = s.rd[0], *br = s.rd[1], *cw = s.wr[2];
    redisContext *r = s.redis;
    char *writers = writers_key(name);
    h_actor *t = h_actor_start();
    struct h_try tw;
    (void)state;

    H_ASSERT_RC(rlock_lock(ar), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(cw, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    assert_int_equal(h_exists(r, writers, strlen(writers)), 0); /* try_lock(0) never waits */
    tw = (struct h_try){.lock = cw, .wait_ms = H_MS(1500), .lease_ms = RLOCK_LEASE_WATCHDOG};
    h_actor_post(t, op_try_timed, &tw);
    H_WAIT_FOR(h_exists(r, writers, strlen(writers)) == 1, 2000);
    assert_int_equal(h_cmd_int(r, "SCARD %s", writers), 1);
    H_ASSERT_BETWEEN(key_pttl(r, writers), 1, 1000);
    H_ASSERT_RC(rlock_try_lock(br, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY); /* a new reader waits */
    H_ASSERT_RC(rlock_try_lock(ar, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);   /* a re-entry goes */
    H_ASSERT_RC(rlock_unlock(ar), RLOCK_OK);
    /* The writer gives up: out of the set, and the held-back reader goes. */
    H_ASSERT_RC(h_actor_wait(t, 5000), RLOCK_BUSY);
    assert_int_equal(h_exists(r, writers, strlen(writers)), 0);
    H_ASSERT_RC(rlock_try_lock(br, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(br), RLOCK_OK);

    /* A waiting writer that gets the lock leaves the set too. */
    tw.wait_ms = H_MS(10000);
    h_actor_post(t, op_try_timed, &tw);
    H_WAIT_FOR(h_exists(r, writers, strlen(writers)) == 1, 2000);
    H_ASSERT_RC(rlock_unlock(ar), RLOCK_OK);
    H_ASSERT_RC(h_actor_wait(t, 5000), RLOCK_OK);
    assert_int_equal(h_exists(r, writers, strlen(writers)), 0);
    H_ASSERT_RC(h_actor_call(t, h_op_unlock, cw), RLOCK_OK);

    /* A dead writer's entry: readers wait until the set's TTL ends, no longer. */
    h_cmd_ok(r, "SADD %s 00000000-0000-0000-0000-000000000000:5:write", writers);
    h_cmd_ok(r, "PEXPIRE %s %d", writers, (int)H_MS(800));
    long long start = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(br, H_MS(5000), RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    long long took = h_now_ms() - start;
    printf("      a reader held back by a dead writer's entry (TTL %lld ms) waited %lld ms\n",
           H_MS(800), took);
    H_ASSERT_BETWEEN(took, H_MS(800) - 100, H_MS(800) + H_MS(500));
    H_ASSERT_RC(rlock_unlock(br), RLOCK_OK);

    free(writers);
    h_actor_stop(t);
    rw_close(&s);
}

/* ---- churning readers and a writer ----------------------------------------------------- */

#define CHURN_READERS 6
#define CHURN_WRITES 10

typedef struct churn {
    rlock *lock;
    atomic_int *stop;
    long reads;
    int rc;
} churn;

/* A reader that reads again as soon as it unlocks: with two or more, the lock is never free. */
static void *churn_main(void *arg) {
    churn *ch = arg;
    while (!atomic_load(ch->stop) && ch->rc == RLOCK_OK) {
        if ((ch->rc = rlock_try_lock(ch->lock, H_MS(20000), RLOCK_LEASE_WATCHDOG)) != RLOCK_OK)
            break;
        ch->reads++;
        h_sleep_ms(2);
        ch->rc = rlock_unlock(ch->lock);
    }
    return NULL;
}

static int cmp_ll(const void *x, const void *y) {
    long long a = *(const long long *)x, b = *(const long long *)y;
    return (a > b) - (a < b);
}

/*
 * What rlock guarantees a writer among rlock readers: once it waits, no
 * reader that holds nothing yet starts a hold, so it waits for the readers
 * that held when it asked (a generation: here each holds ~2 ms) and no
 * later ones. Six readers of two clients overlap without pause (the read
 * lock is never free between them); a writer of a third client still gets
 * the lock, CHURN_WRITES times, each within a generation plus wake-ups --
 * and the readers keep reading between the writes.
 */
static void test_writer_not_starved(void **state) {
    rw_set s = rw_open(3, h_unique_name("rw-churn"));
    rlock *ar = s.rd[0], *br = s.rd[1], *cw = s.wr[2];
    atomic_int stop = 0;
    churn readers[CHURN_READERS];
    pthread_t th[CHURN_READERS];
    long long waits[CHURN_WRITES];
    (void)state;

    for (int i = 0; i < CHURN_READERS; i++) {
        readers[i] = (churn){.lock = i % 2 ? br : ar, .stop = &stop, .rc = RLOCK_OK};
        assert_int_equal(pthread_create(&th[i], NULL, churn_main, &readers[i]), 0);
    }
    h_sleep_ms(200);
    for (int k = 0; k < CHURN_WRITES; k++) {
        long long start = h_now_ms();
        H_ASSERT_RC(rlock_try_lock(cw, H_MS(10000), RLOCK_LEASE_WATCHDOG), RLOCK_OK);
        waits[k] = h_now_ms() - start;
        H_ASSERT_RC(rlock_unlock(cw), RLOCK_OK);
        h_sleep_ms(30); /* the readers' turn */
    }
    atomic_store(&stop, 1);
    long reads = 0;
    for (int i = 0; i < CHURN_READERS; i++) {
        pthread_join(th[i], NULL);
        H_ASSERT_RC(readers[i].rc, RLOCK_OK);
        assert_true(readers[i].reads > CHURN_WRITES); /* readers read between the writes */
        reads += readers[i].reads;
    }
    qsort(waits, CHURN_WRITES, sizeof waits[0], cmp_ll);
    printf("      writer waits among %d churning readers (%ld reads): p50 %lld ms, max %lld ms\n",
           CHURN_READERS, reads, waits[CHURN_WRITES / 2], waits[CHURN_WRITES - 1]);
    assert_true(waits[CHURN_WRITES - 1] < H_MS(1000));

    rw_close(&s);
}

/* ---- exclusion under contention ------------------------------------------------------------ */

#define EXCL_CLIENTS 3
#define EXCL_THREADS 4 /* per client: half readers, half writers */

/* What every contender of every process checks, in shared memory. */
typedef struct excl_shared {
    atomic_int writers_in;    /* writers inside (must be 0 or 1) */
    atomic_int readers_in;    /* readers inside */
    atomic_int overlaps;      /* a writer found anyone inside, or a reader found a writer */
    atomic_int max_readers;   /* most readers inside at once (> 1: they did share) */
    atomic_long reads, writes;
    long counter;             /* written by writers only, with a pause: exact if exclusive */
    atomic_int failures;
    atomic_int stop;
} excl_shared;

typedef struct excl_thread {
    excl_shared *sh;
    rlock *lock;
    int writer;
} excl_thread;

static void *excl_main(void *arg) {
    excl_thread *t = arg;
    excl_shared *sh = t->sh;
    while (!atomic_load(&sh->stop)) {
        if (rlock_try_lock(t->lock, H_MS(20000), RLOCK_LEASE_WATCHDOG) != RLOCK_OK) {
            atomic_fetch_add(&sh->failures, 1);
            return NULL;
        }
        if (t->writer) {
            if (atomic_fetch_add(&sh->writers_in, 1) != 0 || atomic_load(&sh->readers_in) != 0)
                atomic_fetch_add(&sh->overlaps, 1);
            long v = sh->counter;
            usleep(200);
            sh->counter = v + 1;
            atomic_fetch_add(&sh->writes, 1);
            atomic_fetch_sub(&sh->writers_in, 1);
        } else {
            int in = atomic_fetch_add(&sh->readers_in, 1) + 1;
            for (int m = atomic_load(&sh->max_readers); in > m &&
                 !atomic_compare_exchange_weak(&sh->max_readers, &m, in);)
                ;
            if (atomic_load(&sh->writers_in) != 0)
                atomic_fetch_add(&sh->overlaps, 1);
            usleep(300);
            atomic_fetch_add(&sh->reads, 1);
            atomic_fetch_sub(&sh->readers_in, 1);
        }
        if (rlock_unlock(t->lock) != RLOCK_OK) {
            atomic_fetch_add(&sh->failures, 1);
            return NULL;
        }
    }
    return NULL;
}

/* EXCL_THREADS threads of one client (its own) contend on name until sh->stop. */
static int excl_client(excl_shared *sh, const char *name) {
    rlock_config cfg;
    rlock_client *c;
    rlock *rd, *wr;
    excl_thread t[EXCL_THREADS];
    pthread_t th[EXCL_THREADS];
    h_config(&cfg);
    if (rlock_client_open(&cfg, &c) != RLOCK_OK || rlock_get_rw(c, name, &rd, &wr) != RLOCK_OK)
        return 1;
    for (int i = 0; i < EXCL_THREADS; i++) {
        t[i] = (excl_thread){.sh = sh, .lock = i % 2 ? wr : rd, .writer = i % 2};
        if (pthread_create(&th[i], NULL, excl_main, &t[i]) != 0)
            return 2;
    }
    for (int i = 0; i < EXCL_THREADS; i++)
        pthread_join(th[i], NULL);
    rlock_free(rd);
    rlock_free(wr);
    rlock_client_close(c);
    return 0;
}

static void *excl_client_main(void *arg) {
    void **args = arg;
    excl_client(args[0], args[1]);
    return NULL;
}

static void check_exclusion(excl_shared *sh, const char *name) {
    redisContext *r = h_redis();
    printf("      %ld reads (up to %d at once), %ld writes, counter %ld, %d overlaps\n",
           atomic_load(&sh->reads), atomic_load(&sh->max_readers), atomic_load(&sh->writes),
           sh->counter, atomic_load(&sh->overlaps));
    assert_int_equal(atomic_load(&sh->failures), 0);
    assert_int_equal(atomic_load(&sh->overlaps), 0);
    assert_int_equal(sh->counter, atomic_load(&sh->writes));
    assert_true(atomic_load(&sh->writes) > 0);
    assert_true(atomic_load(&sh->reads) > 0);
    assert_true(atomic_load(&sh->max_readers) > 1);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    redisFree(r);
}

/* Clients of this process (threads): runs under TSan too. */
static void test_exclusion_clients(void **state) {
    const char *name = h_unique_name("rw-excl");
    excl_shared sh = {0};
    void *args[] = {&sh, (void *)name};
    pthread_t th[EXCL_CLIENTS];
    (void)state;
    for (int i = 0; i < EXCL_CLIENTS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, excl_client_main, args), 0);
    h_sleep_ms(H_MS(3000));
    atomic_store(&sh.stop, 1);
    for (int i = 0; i < EXCL_CLIENTS; i++)
        pthread_join(th[i], NULL);
    check_exclusion(&sh, name);
}

/* Processes (forked before any client opens). Skipped under TSan (threads in a forked child). */
static void test_exclusion_processes(void **state) {
    const char *name = h_unique_name("rw-exclp");
    pid_t pid[EXCL_CLIENTS];
    (void)state;
#if defined(__SANITIZE_THREAD__)
    print_message("      skipped under TSan (threads in a forked child)\n");
    skip();
#endif
    excl_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                           -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    for (int i = 0; i < EXCL_CLIENTS; i++) {
        pid[i] = fork();
        assert_true(pid[i] >= 0);
        if (pid[i] == 0)
            h_child_exit(excl_client(sh, name));
    }
    h_sleep_ms(H_MS(3000));
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < EXCL_CLIENTS; i++)
        assert_int_equal(h_child_code(h_wait_child(pid[i], 30000)), 0);
    check_exclusion(sh, name);
    munmap(sh, sizeof *sh);
}

/* ---- least privilege -------------------------------------------------------------------------- */

/*
 * The ACL of docs/failure-modes.md for read-write locks is enough: its key
 * patterns cover the hash, the read holds' keys and the writers' set, and a
 * reader, a waiting writer, both unlocks, the queries and a forced unlock
 * all work.
 */
static void test_least_privilege_acl(void **state) {
    char user[64], name[128], url[256];
    redisContext *r = h_redis();
    rlock *ar, *aw, *br, *bw;
    h_actor *t = h_actor_start();
    struct h_try tw;
    (void)state;
    snprintf(user, sizeof user, "rwlocker%d", (int)getpid());
    h_cmd_ok(r, "ACL SETUSER %s on >secret ~locks:* ~{locks:* ~rlock_rwlock_writers:{locks:* "
                "resetchannels &redisson_rwlock:* +evalsha +eval +script|load +hget +hexists +hlen +pttl +select "
                "+ping +subscribe +unsubscribe +publish +hincrby +hset +pexpire +del +exists +type "
                "+hkeys +hgetall +hdel +set +sadd +srem", user);
    snprintf(name, sizeof name, "locks:%s", h_unique_name("rw"));
    h_url_auth(url, sizeof url, h_url(), user, "secret");
    rlock_client *a = h_open_url(url, 30000, 0), *b = h_open_url(url, 30000, 0);
    get_rw(a, name, &ar, &aw);
    get_rw(b, name, &br, &bw);
    tw = (struct h_try){.lock = bw, .wait_ms = H_MS(5000), .lease_ms = RLOCK_LEASE_WATCHDOG};

    H_ASSERT_RC(rlock_lock(ar), RLOCK_OK);
    h_actor_post(t, op_try_timed, &tw);
    char *writers = writers_key(name);
    H_WAIT_FOR(h_exists(r, writers, strlen(writers)) == 1, 2000);
    H_ASSERT_RC(rlock_is_locked(ar), 1);
    H_ASSERT_RC(rlock_unlock(ar), RLOCK_OK);
    H_ASSERT_RC(h_actor_wait(t, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_is_locked(aw), 1);
    H_ASSERT_RC(h_actor_call(t, h_op_unlock, bw), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(ar), RLOCK_OK);
    H_ASSERT_RC(rlock_force_unlock(br), 1);
    H_ASSERT_RC(rlock_unlock(ar), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    free(writers);
    h_actor_stop(t);
    rlock_free(ar);
    rlock_free(aw);
    rlock_free(br);
    rlock_free(bw);
    rlock_client_close(a);
    rlock_client_close(b);
    h_cmd_ok(r, "ACL DELUSER %s", user);
    redisFree(r);
}

/* ---- bad input ----------------------------------------------------------------------------- */

static void test_bad_input(void **state) {
    rlock_client *c = h_open(30000, 0);
    rlock *rd = (rlock *)&rd, *wr = (rlock *)&wr;
    (void)state;

    H_ASSERT_RC(rlock_get_rw(c, "x", NULL, &wr), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get_rw(c, "x", &rd, NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get_rw(c, "x", &rd, &rd), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_get_rw(NULL, "x", &rd, &wr), RLOCK_EINVAL);
    assert_null(rd);
    assert_null(wr);
    rd = wr = (rlock *)&rd;
    H_ASSERT_RC(rlock_get_rw(c, NULL, &rd, &wr), RLOCK_EINVAL);
    assert_null(rd);
    assert_null(wr);
    H_ASSERT_RC(rlock_get_rw(c, "", &rd, &wr), RLOCK_EINVAL);
    {
        char *long_name = malloc(RLOCK_MAX_NAME_LEN + 2);
        assert_non_null(long_name);
        memset(long_name, 'n', RLOCK_MAX_NAME_LEN + 1);
        long_name[RLOCK_MAX_NAME_LEN + 1] = '\0';
        H_ASSERT_RC(rlock_get_rw(c, long_name, &rd, &wr), RLOCK_EINVAL);
        assert_null(rd);
        assert_null(wr);
        free(long_name);
    }
    H_ASSERT_RC(rlock_strerror(RLOCK_EDEADLK) != NULL, 1);
    assert_string_equal(rlock_status_name(RLOCK_EDEADLK), "RLOCK_EDEADLK");
    assert_int_equal(RLOCK_EDEADLK, -12);
    /* Not a Cluster client: names that would span slots in a Cluster are fine here. */
    H_ASSERT_RC(rlock_get_rw(c, "a}b", &rd, &wr), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_ENOTOWNER); /* holds nothing */
    H_ASSERT_RC(rlock_unlock(wr), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_try_lock(rd, 0, -5), RLOCK_EINVAL); /* a bad lease */
    /* A forked child gets RLOCK_ECLOSED from what it inherited, and touches nothing. */
    H_ASSERT_RC(rlock_lock(rd), RLOCK_OK);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        rlock *x = NULL, *y = NULL;
        H_CHILD_CHECK(rlock_get_rw(c, "x", &x, &y) == RLOCK_ECLOSED, 10);
        H_CHILD_CHECK(x == NULL && y == NULL, 11);
        H_CHILD_CHECK(rlock_unlock(rd) == RLOCK_ECLOSED, 12);
        H_CHILD_CHECK(rlock_try_lock(wr, 0, RLOCK_LEASE_WATCHDOG) == RLOCK_ECLOSED, 13);
        H_CHILD_CHECK(rlock_force_unlock(rd) == RLOCK_ECLOSED, 14);
        rlock_free(rd);
        rlock_free(wr);
        rlock_client_close(c);
        h_child_exit(0);
    }
    assert_int_equal(h_child_code(h_wait_child(pid, 10000)), 0);
    H_ASSERT_RC(rlock_hold_count(rd), 1); /* the parent's hold is intact */
    H_ASSERT_RC(rlock_unlock(rd), RLOCK_OK);
    rlock_client_close(c);
    H_ASSERT_RC(rlock_lock(rd), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_try_lock(wr, 0, RLOCK_LEASE_WATCHDOG), RLOCK_ECLOSED);
    rlock *x = NULL, *y = NULL;
    H_ASSERT_RC(rlock_get_rw(c, "x", &x, &y), RLOCK_ECLOSED);
    assert_null(x);
    assert_null(y);
    rlock_free(rd); /* keeps the closed client's struct alive until the last */
    rlock_free(wr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_read_release_ttl),
        cmocka_unit_test(test_shared_readers_exclusive_writer),
        cmocka_unit_test(test_readers_of_one_client),
        cmocka_unit_test(test_reentrancy_and_downgrade),
        cmocka_unit_test(test_downgrade_with_local_waiter),
        cmocka_unit_test(test_explicit_owners),
        cmocka_unit_test(test_upgrade_is_edeadlk),
        cmocka_unit_test(test_wrong_handle_unlock),
        cmocka_unit_test(test_other_kind_same_name),
        cmocka_unit_test(test_other_kind_same_owner),
        cmocka_unit_test(test_watchdog_renews_readers),
        cmocka_unit_test(test_reader_key_lost),
        cmocka_unit_test(test_reader_forced),
        cmocka_unit_test(test_write_unlock_wakes_all_readers),
        cmocka_unit_test(test_last_read_unlock_wakes_writer),
        cmocka_unit_test(test_waiting_writer_holds_readers_back),
        cmocka_unit_test(test_writer_not_starved),
        cmocka_unit_test(test_exclusion_clients),
        cmocka_unit_test(test_exclusion_processes),
        cmocka_unit_test(test_least_privilege_acl),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
