/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_owner.c - explicit owners (the _as calls): an owner that is not the
 * calling thread. Reentrancy and the owner field in Redis; two owners on
 * one thread exclude each other; one owner used from two threads in turn
 * (a held lock handed to another thread); a thread's exit never drops an
 * explicit owner's hold, and the watchdog keeps renewing it; a loss is
 * reported once, with the owner in the event; owner ids never equal thread
 * ids; every lock kind; bad input and overlapping calls for one owner;
 * owners whose lease ran out and who never call again leave nothing behind
 * in the client (an event loop makes one owner per request).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "api/api.h" /* the client's holds table: what an owner leaves behind */

/* "<client uuid>:<owner>": the field an owner's hold is in Redis. */
static void owner_field(rlock_client *c, uint64_t owner, char *buf, size_t size) {
    snprintf(buf, size, "%s:%" PRIu64, rlock_client_id(c), owner);
}

/* HGET of owner's field: its hold count in Redis (0: none). */
static long long redis_count(redisContext *r, rlock_client *c, const char *name, uint64_t owner) {
    char field[128];
    owner_field(c, owner, field, sizeof field);
    char *v = h_cmd_str(r, "HGET %s %s", name, field);
    long long count = v != NULL ? atoll(v) : 0;
    free(v);
    return count;
}

/* An _as call for an actor. */
struct as_call {
    rlock *lock;
    uint64_t owner;
    long long wait_ms;
    long long lease_ms;
};

static long long op_lock_as(void *arg) {
    struct as_call *a = arg;
    return rlock_lock_as(a->lock, a->owner, a->lease_ms);
}

static long long op_try_lock_as(void *arg) {
    struct as_call *a = arg;
    return rlock_try_lock_as(a->lock, a->owner, a->wait_ms, a->lease_ms);
}

static long long op_unlock_as(void *arg) {
    struct as_call *a = arg;
    return rlock_unlock_as(a->lock, a->owner);
}

static long long op_thread_owner(void *arg) {
    (void)arg;
    return (long long)rlock_thread_owner();
}

/* ---- reentrancy, and the owner is not the thread ------------------------------- */

static void test_reentrant_owner(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("own-reent");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    uint64_t o = rlock_owner_new();
    (void)state;

    H_ASSERT_RC(rlock_lock_as(l, o, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(l, o, 0, 20000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_as(l, o, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    /* The field is "<uuid>:<owner>", the count the owner's. */
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 3);
    assert_int_equal(redis_count(r, c, name, o), 3);
    H_ASSERT_RC(rlock_hold_count_as(l, o), 3);
    H_ASSERT_RC(rlock_is_held_by(l, o), 1);

    /* The calling thread is another owner: it neither holds nor may release it. */
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_RC(rlock_hold_count(l), 0);
    H_ASSERT_RC(rlock_is_held_by(l, rlock_thread_owner()), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_BUSY);
    assert_int_equal(redis_count(r, c, name, o), 3);

    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count_as(l, o), 1);
    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_is_held_by(l, o), 0);

    /* An id the application picks itself (above everything rlock hands out). */
    uint64_t mine = RLOCK_OWNER_CALLER_MIN + 42;
    H_ASSERT_RC(rlock_lock_as(l, mine, 20000), RLOCK_OK);
    assert_int_equal(redis_count(r, c, name, mine), 1);
    H_ASSERT_RC(rlock_unlock_as(l, mine), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    redisFree(r);
    rlock_free(l);
    rlock_client_close(c);
}

/* ---- two owners on one thread ----------------------------------------------------- */

static void test_two_owners_one_thread(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("own-two");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    uint64_t o1 = rlock_owner_new(), o2 = rlock_owner_new();
    (void)state;

    H_ASSERT_RC(rlock_lock_as(l, o1, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(l, o2, 0, -1), RLOCK_BUSY);
    long long t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock_as(l, o2, H_MS(200), -1), RLOCK_BUSY);
    assert_true(h_now_ms() - t0 >= H_MS(200) - 5);
    H_ASSERT_RC(rlock_unlock_as(l, o2), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_is_held_by(l, o2), 0);
    assert_int_equal(redis_count(r, c, name, o1), 1);

    H_ASSERT_RC(rlock_unlock_as(l, o1), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(l, o2, 0, -1), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(l, o1, 0, -1), RLOCK_BUSY);
    /* The thread itself is a third owner. */
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock_as(l, o2), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(l, o1, 0, -1), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    redisFree(r);
    rlock_free(l);
    rlock_client_close(c);
}

/* ---- one owner, two threads in turn --------------------------------------------------- */

static void test_owner_handed_between_threads(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("own-hand");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *a = h_actor_start();
    uint64_t o = rlock_owner_new();
    struct as_call call = {l, o, 0, RLOCK_LEASE_WATCHDOG};
    (void)state;

    /* Taken on the actor, re-entered on the main thread, released on both. */
    H_ASSERT_RC((int)h_actor_call(a, op_lock_as, &call), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_as(l, o, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    assert_int_equal(redis_count(r, c, name, o), 2);
    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(a, op_unlock_as, &call), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* Taken on the main thread, released on the actor. */
    H_ASSERT_RC(rlock_lock_as(l, o, 20000), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(a, op_unlock_as, &call), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* A thread's own hold, released by another thread under its id while it lives. */
    uint64_t actor_id = (uint64_t)h_actor_call(a, op_thread_owner, NULL);
    assert_int_not_equal(actor_id, rlock_thread_owner());
    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
    H_ASSERT_RC(rlock_is_held_by(l, actor_id), 1);
    H_ASSERT_RC(rlock_hold_count_as(l, actor_id), 1);
    H_ASSERT_RC(rlock_unlock_as(l, actor_id), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC((int)h_actor_call(a, h_op_is_held, l), 0);

    h_actor_stop(a);
    redisFree(r);
    rlock_free(l);
    rlock_client_close(c);
}

/* ---- a thread's exit keeps an explicit owner's hold; the watchdog renews it ----------- */

struct exiting {
    rlock *owned, *own;
    uint64_t owner;
    int rc_owned, rc_own;
};

static void *lock_and_exit(void *arg) {
    struct exiting *x = arg;
    x->rc_owned = rlock_lock_as(x->owned, x->owner, RLOCK_LEASE_WATCHDOG);
    x->rc_own = rlock_lock(x->own); /* the thread's own: dropped at its exit */
    return NULL;
}

static void test_thread_exit_keeps_owner(void **state) {
    const long long wd = 1000;
    rlock_client *c = h_open(wd, 0);
    const char *owned = h_unique_name("own-exit"), *own = h_unique_name("thr-exit");
    rlock *lo = h_get(c, owned), *lt = h_get(c, own);
    redisContext *r = h_redis();
    struct exiting x = {lo, lt, rlock_owner_new(), -100, -100};
    pthread_t th;
    (void)state;

    assert_int_equal(pthread_create(&th, NULL, lock_and_exit, &x), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    H_ASSERT_RC(x.rc_owned, RLOCK_OK);
    H_ASSERT_RC(x.rc_own, RLOCK_OK);

    /* The thread's own lock expires unrenewed within the watchdog timeout; the
     * owner's is renewed on and on (three renewals: three timeouts past the exit). */
    H_WAIT_FOR(!h_exists(r, own, strlen(own)), H_MS(3 * wd));
    for (int i = 0; i < 3; i++)
        h_wait_renewal(r, owned, wd / 10, H_MS(2 * wd));
    assert_int_equal(redis_count(r, c, owned, x.owner), 1);
    H_ASSERT_RC(rlock_is_held_by(lo, x.owner), 1);

    /* Any thread may release it. */
    H_ASSERT_RC(rlock_unlock_as(lo, x.owner), RLOCK_OK);
    assert_int_equal(h_exists(r, owned, strlen(owned)), 0);

    redisFree(r);
    rlock_free(lo);
    rlock_free(lt);
    rlock_client_close(c);
}

/* ---- a loss: reported once, naming the owner ----------------------------------------- */

static void test_loss_reported_once_with_owner(void **state) {
    struct h_evlog ev;
    const char *name = h_unique_name("own-lost"), *tname = h_unique_name("thr-lost");
    redisContext *r = h_redis();
    uint64_t o = rlock_owner_new();
    (void)state;

    h_evlog_init(&ev);
    rlock_client *c = h_evlog_open(h_url(), 1000, 0, &ev);
    rlock *l = h_get(c, name), *lt = h_get(c, tname);
    H_ASSERT_RC(rlock_lock_as(l, o, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_as(l, o, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(lt), RLOCK_OK);
    h_cmd_ok(r, "DEL %s", name);
    h_cmd_ok(r, "DEL %s", tname);

    /* The watchdog finds both gone within a round; one event each, naming its owner. */
    H_WAIT_FOR(h_evlog_count(&ev, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL) == 1 &&
                   h_evlog_count(&ev, RLOCK_EVENT_LOCK_LOST, tname, NULL, NULL) == 1,
               H_MS(3000));
    int idx = -1, tidx = -1;
    h_evlog_count(&ev, RLOCK_EVENT_LOCK_LOST, name, NULL, &idx);
    h_evlog_count(&ev, RLOCK_EVENT_LOCK_LOST, tname, NULL, &tidx);
    assert_true(h_evlog_get(&ev, idx).owner == o);
    assert_true(h_evlog_get(&ev, tidx).owner == rlock_thread_owner());
    H_WAIT_FOR(h_evlog_lost_count(&ev, name) == 1, H_MS(1000));

    /* The owner learns of it once: ELOST, then it starts afresh. */
    H_ASSERT_RC(rlock_is_held_by(l, o), 0);
    H_ASSERT_RC(rlock_try_lock_as(l, o, 0, -1), RLOCK_ELOST);
    H_ASSERT_RC(rlock_try_lock_as(l, o, 0, -1), RLOCK_OK);
    H_ASSERT_RC(rlock_hold_count_as(l, o), 1);
    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(lt), RLOCK_ENOTOWNER);

    /* A loss an unlock finds (held twice, deleted before the watchdog looks). */
    H_ASSERT_RC(rlock_lock_as(l, o, 20000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_as(l, o, 20000), RLOCK_OK);
    h_cmd_ok(r, "DEL %s", name);
    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_ELOST);
    assert_non_null(strstr(rlock_last_error(), "owner "));
    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_ENOTOWNER);
    H_WAIT_FOR(h_evlog_count(&ev, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL) == 2, H_MS(1000));
    h_sleep_ms(H_MS(300));
    assert_int_equal(h_evlog_count(&ev, RLOCK_EVENT_LOCK_LOST, name, NULL, NULL), 2);
    assert_int_equal(h_evlog_lost_count(&ev, name), 2);
    for (int i = 0; i < h_evlog_n(&ev); i++)
        if (h_evlog_get(&ev, i).kind == RLOCK_EVENT_LOCK_LOST &&
            strcmp(h_evlog_get(&ev, i).name, name) == 0)
            assert_true(h_evlog_get(&ev, i).owner == o);

    rlock_free(l);
    rlock_free(lt);
    rlock_client_close(c);
    h_evlog_destroy(&ev);
    redisFree(r);
}

/* ---- ids ---------------------------------------------------------------------------------- */

#define ID_THREADS 4

static void *thread_id_main(void *arg) {
    *(uint64_t *)arg = rlock_thread_owner();
    return NULL;
}

static int seen(const uint64_t *ids, int n, uint64_t id) {
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

static void test_owner_ids(void **state) {
    uint64_t ids[ID_THREADS * 3 + 1];
    int n = 0;
    (void)state;
    ids[n++] = rlock_thread_owner();
    assert_true(rlock_thread_owner() == ids[0]); /* fixed for the thread */
    for (int round = 0; round < ID_THREADS; round++) {
        pthread_t th;
        uint64_t tid = 0, a = rlock_owner_new(), b;
        assert_int_equal(pthread_create(&th, NULL, thread_id_main, &tid), 0);
        b = rlock_owner_new();
        assert_int_equal(pthread_join(th, NULL), 0);
        uint64_t round_ids[] = {a, b, tid};
        for (int i = 0; i < 3; i++) {
            assert_true(round_ids[i] != 0 && round_ids[i] < RLOCK_OWNER_CALLER_MIN);
            assert_false(seen(ids, n, round_ids[i]));
            ids[n++] = round_ids[i];
        }
    }
}

/* ---- every lock kind ------------------------------------------------------------------------ */

static void test_owner_every_kind(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("own-kinds");
    redisContext *r = h_redis();
    rlock *fair, *fenced;
    uint64_t o1 = rlock_owner_new(), o2 = rlock_owner_new();
    long long t1 = 0, t2 = 0;
    char fair_name[256];
    (void)state;

    snprintf(fair_name, sizeof fair_name, "%s:fair", name);
    H_ASSERT_RC(rlock_get_fair(c, fair_name, &fair), RLOCK_OK);
    H_ASSERT_RC(rlock_get_fenced(c, name, &fenced), RLOCK_OK);

    H_ASSERT_RC(rlock_lock_as(fair, o1, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_as(fair, o1, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(fair, o2, 0, -1), RLOCK_BUSY);
    assert_int_equal(redis_count(r, c, fair_name, o1), 2);
    H_ASSERT_RC(rlock_unlock_as(fair, o1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(fair, o1), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(fair, o2, 0, -1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(fair, o2), RLOCK_OK);

    H_ASSERT_RC(rlock_try_lock_fenced_as(fenced, o1, 0, -1, &t1), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_fenced_as(fenced, o1, 0, -1, &t2), RLOCK_OK);
    assert_true(t2 > t1);
    H_ASSERT_RC(rlock_try_lock_fenced_as(fenced, o2, 0, -1, &t2), RLOCK_BUSY);
    assert_int_equal(redis_count(r, c, name, o1), 2);
    H_ASSERT_RC(rlock_unlock_as(fenced, o1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(fenced, o1), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rlock_free(fair);
    rlock_free(fenced);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- in-process hand-off between explicit owners ---------------------------------------- */

static void test_owner_handoff(void **state) {
    rlock_client *c = h_open_handoffs(30000, 4);
    const char *name = h_unique_name("own-handoff");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *a = h_actor_start();
    uint64_t o1 = rlock_owner_new(), o2 = rlock_owner_new();
    struct as_call waiter = {l, o2, H_MS(10000), RLOCK_LEASE_WATCHDOG};
    (void)state;

    H_ASSERT_RC(rlock_lock_as(l, o1, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    h_actor_post(a, op_try_lock_as, &waiter);
    h_scripts_quiet(r, H_MS(100), H_MS(5000)); /* o2 waits, asleep */
    long long published = h_commandstat_calls(r, "publish");
    H_ASSERT_RC(rlock_unlock_as(l, o1), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_wait(a, 5000), RLOCK_OK);
    /* Handed over in one script: nothing published. */
    assert_int_equal(h_commandstat_calls(r, "publish"), published);
    assert_int_equal(redis_count(r, c, name, o2), 1);
    assert_int_equal(redis_count(r, c, name, o1), 0);
    H_ASSERT_RC(rlock_is_held_by(l, o2), 1);
    H_ASSERT_RC(rlock_unlock_as(l, o2), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    h_actor_stop(a);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- owners that never call again ---------------------------------------------------- */

/* Entries in the client's holds table (one per lock and owner it knows of). */
static size_t holds_entries(rlock_client *c) {
    pthread_mutex_lock(&c->engine.holds.mutex);
    size_t n = c->engine.holds.count;
    pthread_mutex_unlock(&c->engine.holds.mutex);
    return n;
}

/*
 * An event loop gives each request an owner of its own; a request that
 * takes a lease lock and lets the lease end (no unlock) never calls again.
 * The client must not keep an entry per such owner for its whole life:
 * 2400 owners leave at most a table's worth of entries.
 */
static void test_owner_expired_leases_forgotten(void **state) {
    enum { NAMES = 16, ROUNDS = 150 };
    rlock_client *c = h_open(30000, 0);
    rlock *l[NAMES];
    uint64_t last = 0;
    (void)state;

    for (int i = 0; i < NAMES; i++)
        l[i] = h_get(c, h_unique_name("own-expire"));
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < NAMES; i++) {
            last = rlock_owner_new();
            H_ASSERT_RC(rlock_try_lock_as(l[i], last, 0, 1), RLOCK_OK);
        }
        h_sleep_ms(3); /* every 1 ms lease ends, in Redis too */
    }
    size_t left = holds_entries(c);
    printf("      %d owners with ended leases: %zu entries left\n", NAMES * ROUNDS, left);
    assert_true(left <= 4 * NAMES);
    /* An owner whose lease ended still gets the answer it always got. */
    H_ASSERT_RC(rlock_unlock_as(l[NAMES - 1], last), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_try_lock_as(l[NAMES - 1], last, 0, 1), RLOCK_OK);

    for (int i = 0; i < NAMES; i++)
        rlock_free(l[i]);
    rlock_client_close(c);
}

/* ---- bad input --------------------------------------------------------------------------------- */

static void test_owner_bad_input(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("own-bad");
    rlock *l = h_get(c, name), *other = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *a = h_actor_start();
    uint64_t o = rlock_owner_new(), o2 = rlock_owner_new();
    struct as_call blocked = {other, o, H_MS(1500), -1};
    (void)state;

    /* Owner 0 is nobody. */
    H_ASSERT_RC(rlock_lock_as(l, 0, -1), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock_as(l, 0, 0, -1), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_unlock_as(l, 0), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_is_held_by(l, 0), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_hold_count_as(l, 0), RLOCK_EINVAL);
    /* NULL handle, bad lease. */
    H_ASSERT_RC(rlock_lock_as(NULL, o, -1), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_unlock_as(NULL, o), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_is_held_by(NULL, o), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_try_lock_as(l, o, 0, 0), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_lock_as(l, o, RLOCK_MAX_LEASE_MS + 1), RLOCK_EINVAL);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* One call at a time per owner and lock: o waits on the actor (o2 holds it),
     * and o's calls on that lock -- through any handle -- are refused meanwhile. */
    H_ASSERT_RC(rlock_lock_as(l, o2, -1), RLOCK_OK);
    h_actor_post(a, op_try_lock_as, &blocked);
    h_scripts_quiet(r, H_MS(100), H_MS(5000));
    H_ASSERT_RC(rlock_try_lock_as(l, o, 0, -1), RLOCK_EINVAL);
    assert_non_null(strstr(rlock_last_error(), "already has a call in progress"));
    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_EINVAL);
    /* Queries are not calls that change anything: allowed. */
    H_ASSERT_RC(rlock_is_held_by(l, o), 0);
    /* Another owner, or the same owner on another lock, is not refused. */
    rlock *third = h_get(c, h_unique_name("own-bad-other"));
    H_ASSERT_RC(rlock_try_lock_as(third, o, 0, -1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(third, o), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(l, o2, 0, -1), RLOCK_OK); /* o2 re-enters */
    H_ASSERT_RC((int)h_actor_wait(a, 5000), RLOCK_BUSY);
    /* Once the call ended, o may call again. */
    H_ASSERT_RC(rlock_try_lock_as(l, o, 0, -1), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock_as(l, o2), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(l, o2), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock_as(l, o, 0, -1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_OK);

    /* Use after close. */
    h_actor_stop(a);
    rlock_client_close(c);
    H_ASSERT_RC(rlock_lock_as(l, o, -1), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_unlock_as(l, o), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_is_held_by(l, o), RLOCK_ECLOSED);
    rlock_free(third);
    rlock_free(l);
    rlock_free(other);
    redisFree(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reentrant_owner),
        cmocka_unit_test(test_two_owners_one_thread),
        cmocka_unit_test(test_owner_handed_between_threads),
        cmocka_unit_test(test_thread_exit_keeps_owner),
        cmocka_unit_test(test_loss_reported_once_with_owner),
        cmocka_unit_test(test_owner_ids),
        cmocka_unit_test(test_owner_every_kind),
        cmocka_unit_test(test_owner_handoff),
        cmocka_unit_test(test_owner_expired_leases_forgotten),
        cmocka_unit_test(test_owner_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
