/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_multi.c - the multi-lock (rlock_multi_*): all or nothing over locks
 * of several clients and servers, a busy or unreachable member rolling back
 * what was taken, the lease (every member's runs from the end of the call;
 * a member renewed before stays renewed), reentrancy per member, a fair
 * member, a member lost earlier (RLOCK_ELOST, nothing taken), a cancelled
 * waiter giving back what it held, bad input -- and no deadlock between
 * multi-locks over overlapping sets given in opposite orders by several
 * processes (one name on two servers among them), with exclusion checked
 * per lock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#include "harness/cancel_skip.h"

/* Two servers of the test's own, besides the suite's (h_url()). */
static h_server *extra[2];

static int start_servers(void **state) {
    (void)state;
    h_servers_start(2, extra);
    return 0;
}

static int stop_servers(void **state) {
    (void)state;
    h_servers_stop(2, extra);
    return 0;
}

static rlock_multi *multi(rlock *const *locks, size_t n) {
    rlock_multi *m = NULL;
    H_ASSERT_RC(rlock_multi_new(locks, n, &m), RLOCK_OK);
    return m;
}

/* The calling thread's holds of name by client c (0: none), on redis r. */
static long long holds(redisContext *r, const char *name, rlock_client *c) {
    long long count = 0;
    return h_own_fields(r, name, rlock_client_id(c), &count) ? count : 0;
}

static void test_all_or_nothing(void **state) {
    rlock_client *c1 = h_open(30000, 0), *c2 = h_open(30000, 0);
    rlock_client *c3 = h_open_url(h_server_url(extra[0]), 30000, 1000);
    redisContext *r = h_redis(), *r3 = h_server_redis(extra[0]);
    const char *a = h_unique_name("multi-a"), *b = h_unique_name("multi-b");
    const char *c = h_unique_name("multi-c"), *d = h_unique_name("multi-d");
    rlock *locks[] = {h_get(c1, a), h_get(c1, b), h_get(c2, c), h_get(c3, d)};
    (void)state;
    rlock_multi *m = multi(locks, 4);
    H_ASSERT_RC(rlock_multi_lock(m), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, a, rlock_client_id(c1), 1);
    H_ASSERT_LOCK_IS(r, b, rlock_client_id(c1), 1);
    H_ASSERT_LOCK_IS(r, c, rlock_client_id(c2), 1);
    H_ASSERT_LOCK_IS(r3, d, rlock_client_id(c3), 1);
    H_ASSERT_BETWEEN(h_pttl(r, a, strlen(a)), 29000, 30000); /* watchdog locks */
    for (int i = 0; i < 4; i++)
        H_ASSERT_RC(rlock_is_held_by_current_thread(locks[i]), 1);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_OK);
    assert_int_equal(h_exists(r, a, strlen(a)) + h_exists(r, b, strlen(b)) +
                         h_exists(r, c, strlen(c)) + h_exists(r3, d, strlen(d)),
                     0);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_ENOTOWNER);
    rlock_multi_free(m);
    for (int i = 0; i < 4; i++)
        rlock_free(locks[i]);
    redisFree(r3);
    redisFree(r);
    rlock_client_close(c1);
    rlock_client_close(c2);
    rlock_client_close(c3);
}

/* Releases a foreign holder's lock after a delay, on a thread of its own. */
typedef struct delayed_unlock {
    const char *name;
    long long after_ms;
} delayed_unlock;

static void *delayed_unlock_main(void *arg) {
    delayed_unlock *d = arg;
    redisContext *r = h_redis();
    h_sleep_ms(d->after_ms);
    h_foreign_unlock(r, d->name);
    redisFree(r);
    return NULL;
}

/* A member another owner holds: nothing taken at all, for wait 0 and for a wait that ends. */
static void test_busy_member_rolls_back(void **state) {
    rlock_client *c1 = h_open(30000, 0), *c2 = h_open(30000, 0);
    redisContext *r = h_redis();
    const char *a = h_unique_name("multi-a"), *b = h_unique_name("multi-b");
    const char *c = h_unique_name("multi-c");
    rlock *locks[] = {h_get(c1, c), h_get(c2, b), h_get(c1, a)};
    (void)state;
    rlock_multi *m = multi(locks, 3);
    h_foreign_lock(r, b, 10000);
    H_ASSERT_RC(rlock_multi_try_lock(m, 0, RLOCK_LEASE_WATCHDOG), RLOCK_BUSY);
    assert_int_equal(h_exists(r, a, strlen(a)) + h_exists(r, c, strlen(c)), 0);
    long long before = h_now_ms();
    H_ASSERT_RC(rlock_multi_try_lock(m, 300, 5000), RLOCK_BUSY);
    H_ASSERT_BETWEEN(h_now_ms() - before, 300, H_MS(1500));
    assert_int_equal(h_exists(r, a, strlen(a)) + h_exists(r, c, strlen(c)), 0);
    /* Freed during the wait: all taken. */
    delayed_unlock d = {b, 300};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, delayed_unlock_main, &d), 0);
    H_ASSERT_RC(rlock_multi_try_lock(m, 5000, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    pthread_join(th, NULL);
    H_ASSERT_LOCK_IS(r, a, rlock_client_id(c1), 1);
    H_ASSERT_LOCK_IS(r, b, rlock_client_id(c2), 1);
    H_ASSERT_LOCK_IS(r, c, rlock_client_id(c1), 1);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_OK);
    rlock_multi_free(m);
    for (int i = 0; i < 3; i++)
        rlock_free(locks[i]);
    redisFree(r);
    rlock_client_close(c1);
    rlock_client_close(c2);
}

/* A member whose server is down: RLOCK_EIO and nothing taken elsewhere; fine once it is back. */
static void test_unreachable_member_rolls_back(void **state) {
    rlock_client *c1 = h_open(30000, 0);
    rlock_client *c2 = h_open_url(h_server_url(extra[1]), 30000, 500);
    redisContext *r = h_redis();
    const char *a = h_unique_name("multi-a"), *z = h_unique_name("multi-z");
    rlock *locks[] = {h_get(c1, a), h_get(c2, z)};
    (void)state;
    rlock_multi *m = multi(locks, 2);
    h_server_kill(extra[1]);
    H_ASSERT_RC(rlock_multi_try_lock(m, 0, 5000), RLOCK_EIO);
    print_message("      %s\n", rlock_last_error());
    assert_int_equal(h_exists(r, a, strlen(a)), 0);
    H_ASSERT_RC(rlock_multi_try_lock(m, 500, RLOCK_LEASE_WATCHDOG), RLOCK_EIO);
    assert_int_equal(h_exists(r, a, strlen(a)), 0);
    h_server_restart(extra[1]);
    H_ASSERT_RC(rlock_multi_try_lock(m, 2000, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_OK);
    rlock_multi_free(m);
    rlock_free(locks[0]);
    rlock_free(locks[1]);
    redisFree(r);
    rlock_client_close(c1);
    rlock_client_close(c2);
}

/*
 * A fixed lease runs from the end of the call for every member, also for
 * those taken before a later one was waited for; a member the thread held
 * with the watchdog before stays renewed.
 */
static void test_lease_from_the_end(void **state) {
    rlock_client *c = h_open(1500, 0);
    redisContext *r = h_redis();
    const char *a = h_unique_name("multi-a"), *b = h_unique_name("multi-b");
    const char *w = h_unique_name("multi-w");
    rlock *locks[] = {h_get(c, a), h_get(c, b), h_get(c, w)};
    (void)state;
    rlock_multi *m = multi(locks, 3);
    H_ASSERT_RC(rlock_lock(locks[2]), RLOCK_OK); /* w: held before, watchdog */
    h_foreign_lock(r, b, 600);                   /* b: busy for 600 ms */
    H_ASSERT_RC(rlock_multi_try_lock(m, 5000, 1000), RLOCK_OK);
    long long got = h_now_ms();
    H_ASSERT_BETWEEN(h_pttl(r, a, strlen(a)), 800, 1000); /* a was taken 600 ms earlier */
    H_ASSERT_BETWEEN(h_pttl(r, b, strlen(b)), 800, 1000);
    H_ASSERT_LOCK_IS(r, w, rlock_client_id(c), 2);
    /* Past the lease: a and b are gone (not renewed), w is still held (renewed). */
    h_sleep_ms(got + 1000 + 300 - h_now_ms());
    h_sleep_ms(1000 - 300); /* and past a whole watchdog period */
    assert_int_equal(h_exists(r, a, strlen(a)) + h_exists(r, b, strlen(b)), 0);
    H_ASSERT_LOCK_IS(r, w, rlock_client_id(c), 2);
    H_ASSERT_RC(rlock_unlock(locks[2]), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(locks[2]), RLOCK_OK);
    assert_int_equal(h_exists(r, w, strlen(w)), 0);
    /* Uncontended, the members share one send time: each TTL is the lease. */
    H_ASSERT_RC(rlock_multi_try_lock(m, 0, 700), RLOCK_OK);
    for (int i = 0; i < 3; i++) {
        const char *n = rlock_name(locks[i]);
        H_ASSERT_BETWEEN(h_pttl(r, n, strlen(n)), 500, 700);
    }
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_OK);
    rlock_multi_free(m);
    for (int i = 0; i < 3; i++)
        rlock_free(locks[i]);
    redisFree(r);
    rlock_client_close(c);
}

/* Reentrancy is per member: a hold more on each, one fewer per unlock. */
static void test_reentrancy(void **state) {
    rlock_client *c = h_open(30000, 0);
    redisContext *r = h_redis();
    const char *a = h_unique_name("multi-a"), *b = h_unique_name("multi-b");
    rlock *locks[] = {h_get(c, a), h_get(c, b)};
    (void)state;
    rlock_multi *m = multi(locks, 2);
    H_ASSERT_RC(rlock_lock(locks[0]), RLOCK_OK);
    H_ASSERT_RC(rlock_multi_lock(m), RLOCK_OK);
    H_ASSERT_RC(rlock_multi_lock_lease(m, 20000), RLOCK_OK);
    assert_int_equal(holds(r, a, c), 3);
    assert_int_equal(holds(r, b, c), 2);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_OK);
    assert_int_equal(holds(r, a, c), 2);
    assert_int_equal(holds(r, b, c), 1);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_OK);
    assert_int_equal(holds(r, a, c), 1);
    assert_int_equal(h_exists(r, b, strlen(b)), 0);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_ENOTOWNER); /* b: not held; a: its last hold goes */
    assert_int_equal(h_exists(r, a, strlen(a)), 0);
    rlock_multi_free(m);
    rlock_free(locks[0]);
    rlock_free(locks[1]);
    redisFree(r);
    rlock_client_close(c);
}

/* An explicit owner's multi-lock: the caller's field at each member, taken on one thread and
 * released on another; the thread's own calls do not see it as theirs; one call at a time. */
struct as_call {
    rlock_multi *m;
    uint64_t owner;
    long long wait_ms;
};

static long long op_multi_try_as(void *arg) {
    struct as_call *a = arg;
    return rlock_multi_try_lock_as(a->m, a->owner, a->wait_ms, 20000);
}

static long long op_multi_unlock_as(void *arg) {
    struct as_call *a = arg;
    return rlock_multi_unlock_as(a->m, a->owner);
}

static void test_explicit_owner(void **state) {
    rlock_client *c = h_open(30000, 0);
    redisContext *r = h_redis();
    const char *a = h_unique_name("multi-as-a"), *b = h_unique_name("multi-as-b");
    rlock *locks[] = {h_get(c, a), h_get(c, b)};
    uint64_t owner = rlock_owner_new(), other = rlock_owner_new();
    char field[200];
    h_actor *actor = h_actor_start();
    (void)state;
    rlock_multi *m = multi(locks, 2);
    struct as_call call = {m, owner, 0};
    snprintf(field, sizeof field, "%s:%llu", rlock_client_id(c), (unsigned long long)owner);

    assert_int_equal(h_actor_call(actor, op_multi_try_as, &call), RLOCK_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(h_hget_int(r, rlock_name(locks[i]), field), 1);
        assert_int_equal(rlock_is_held_by(locks[i], owner), 1);
        assert_int_equal(rlock_is_held_by_current_thread(locks[i]), 0);
    }
    H_ASSERT_RC(rlock_multi_try_lock(m, 0, 5000), RLOCK_BUSY);        /* this thread: another owner */
    H_ASSERT_RC(rlock_multi_try_lock_as(m, other, 0, 5000), RLOCK_BUSY);
    H_ASSERT_RC(rlock_multi_try_lock_as(m, owner, 0, 5000), RLOCK_OK); /* reentrant */
    assert_int_equal(rlock_hold_count_as(locks[1], owner), 2);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_ENOTOWNER);               /* not this thread's */
    assert_int_equal(rlock_hold_count_as(locks[0], owner), 2);
    H_ASSERT_RC(rlock_multi_unlock_as(m, owner), RLOCK_OK);            /* from this thread */
    assert_int_equal(h_actor_call(actor, op_multi_unlock_as, &call), RLOCK_OK);
    assert_int_equal(h_exists(r, a, strlen(a)), 0);
    assert_int_equal(h_exists(r, b, strlen(b)), 0);
    H_ASSERT_RC(rlock_multi_unlock_as(m, owner), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_multi_try_lock_as(m, 0, 0, 5000), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_unlock_as(m, 0), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_try_lock_as(NULL, owner, 0, 5000), RLOCK_EINVAL);

    /* One call at a time: while owner waits for b on the actor (holding a: the walk takes
     * the members in order and waits for b alone), its second call is refused. */
    H_ASSERT_RC(rlock_lock(locks[1]), RLOCK_OK);
    call.wait_ms = H_MS(20000);
    h_actor_post(actor, op_multi_try_as, &call);
    H_WAIT_FOR(h_hget_int(r, a, field) == 1, 10000);
    H_ASSERT_RC(rlock_multi_try_lock_as(m, owner, 0, 5000), RLOCK_EINVAL);
    assert_int_equal(h_actor_done(actor), 0);
    H_ASSERT_RC(rlock_unlock(locks[1]), RLOCK_OK);
    assert_int_equal(h_actor_wait(actor, 20000), RLOCK_OK);
    H_ASSERT_RC(rlock_multi_unlock_as(m, owner), RLOCK_OK);
    assert_int_equal(h_exists(r, b, strlen(b)), 0);

    h_actor_stop(actor);
    rlock_multi_free(m);
    rlock_free(locks[0]);
    rlock_free(locks[1]);
    redisFree(r);
    rlock_client_close(c);
}

/* A fair lock is a member like any other. */
static void test_fair_member(void **state) {
    rlock_client *c = h_open(30000, 0);
    redisContext *r = h_redis();
    const char *f = h_unique_name("multi-fair"), *p = h_unique_name("multi-plain");
    rlock *fair = NULL;
    H_ASSERT_RC(rlock_get_fair(c, f, &fair), RLOCK_OK);
    rlock *locks[] = {fair, h_get(c, p)};
    (void)state;
    rlock_multi *m = multi(locks, 2);
    H_ASSERT_RC(rlock_multi_try_lock(m, 1000, 5000), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, f, rlock_client_id(c), 1);
    H_ASSERT_LOCK_IS(r, p, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_OK);
    assert_int_equal(h_exists(r, f, strlen(f)) + h_exists(r, p, strlen(p)), 0);
    rlock_multi_free(m);
    rlock_free(locks[0]);
    rlock_free(locks[1]);
    redisFree(r);
    rlock_client_close(c);
}

/* A member's hold lost since the last call: told (RLOCK_ELOST), and nothing else taken. */
static void test_lost_member(void **state) {
    struct h_lost lost;
    rlock_client *c = h_open_retries(h_url(), 600, 0, -1, -1, &lost);
    redisContext *r = h_redis();
    const char *a = h_unique_name("multi-a"), *b = h_unique_name("multi-b");
    rlock *locks[] = {h_get(c, a), h_get(c, b)};
    (void)state;
    rlock_multi *m = multi(locks, 2);
    H_ASSERT_RC(rlock_multi_lock(m), RLOCK_OK);
    h_cmd_int(r, "DEL %s", a);
    H_WAIT_FOR(h_lost_count(&lost) == 1, 3000);
    H_ASSERT_RC(rlock_multi_lock(m), RLOCK_ELOST);
    print_message("      %s\n", rlock_last_error());
    assert_int_equal(h_exists(r, a, strlen(a)), 0);
    assert_int_equal(holds(r, b, c), 1); /* not a second hold */
    H_ASSERT_RC(rlock_multi_lock(m), RLOCK_OK); /* the next call starts afresh */
    assert_int_equal(holds(r, a, c), 1);
    assert_int_equal(holds(r, b, c), 2);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_OK);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_ENOTOWNER); /* a: gone; b: its last hold */
    assert_int_equal(h_exists(r, a, strlen(a)) + h_exists(r, b, strlen(b)), 0);
    rlock_multi_free(m);
    rlock_free(locks[0]);
    rlock_free(locks[1]);
    redisFree(r);
    rlock_client_close(c);
}

static void *multi_lock_main(void *arg) {
    rlock_multi_lock(arg);
    return NULL; /* never reached: cancelled while it waits */
}

/* A thread cancelled while it waits for a member gives back the members it took. */
static void test_cancelled_gives_back(void **state) {
    H_SKIP_CANCEL_UNDER_ASAN();
    rlock_client *c = h_open(30000, 0);
    redisContext *r = h_redis();
    const char *a = h_unique_name("multi-a"), *b = h_unique_name("multi-b");
    rlock *locks[] = {h_get(c, a), h_get(c, b)};
    pthread_t th;
    (void)state;
    rlock_multi *m = multi(locks, 2);
    h_foreign_lock(r, b, 30000);
    assert_int_equal(pthread_create(&th, NULL, multi_lock_main, m), 0);
    H_WAIT_FOR(h_numsub(r, b, strlen(b)) == 1, 3000); /* waiting for b */
    H_ASSERT_LOCK_IS(r, a, rlock_client_id(c), 1); /* holding a */
    pthread_cancel(th);
    pthread_join(th, NULL);
    assert_int_equal(h_exists(r, a, strlen(a)), 0);
    H_WAIT_FOR(h_numsub(r, b, strlen(b)) == 0, 3000);
    h_foreign_unlock(r, b);
    H_ASSERT_RC(rlock_multi_try_lock(m, 0, 5000), RLOCK_OK); /* the guards were left */
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_OK);
    rlock_multi_free(m);
    rlock_free(locks[0]);
    rlock_free(locks[1]);
    redisFree(r);
    rlock_client_close(c);
}

typedef struct lock_then_unlock {
    rlock_multi *m;
    int rc, unlock_rc;
} lock_then_unlock;

static void *lock_then_unlock_main(void *arg) {
    lock_then_unlock *l = arg;
    l->rc = rlock_multi_lock(l->m);
    l->unlock_rc = rlock_multi_unlock(l->m);
    return NULL;
}

/*
 * One name on two servers (a group): a member of it found busy while
 * another of the group is held is waited for alone -- the held one is given
 * back meanwhile -- so owners that order the group differently (their
 * servers' addresses spelled otherwise) cannot wait for each other.
 */
static void test_group_waits_alone(void **state) {
    const char *g = h_unique_name("multi-g");
    rlock_client *c[2], *other[2];
    redisContext *r[2];
    rlock *locks[2], *held_by_other[2];
    char where[2][64];
    pthread_t th;
    (void)state;
    for (int i = 0; i < 2; i++) {
        c[i] = h_open_url(h_server_url(extra[i]), 30000, 1000);
        other[i] = h_open_url(h_server_url(extra[i]), 30000, 1000);
        r[i] = h_server_redis(extra[i]);
        locks[i] = h_get(c[i], g);
        held_by_other[i] = h_get(other[i], g);
        snprintf(where[i], sizeof where[i], "127.0.0.1:%d/0", h_server_port(extra[i]));
    }
    /* The member that comes second in the order (where it is served, as text). */
    int first = strcmp(where[0], where[1]) < 0 ? 0 : 1, second = 1 - first;
    rlock_multi *m = multi(locks, 2);
    H_ASSERT_RC(rlock_lock(held_by_other[second]), RLOCK_OK);
    lock_then_unlock l = {.m = m};
    assert_int_equal(pthread_create(&th, NULL, lock_then_unlock_main, &l), 0);
    /* It took the first, found the second busy, gave the first back, waits for the second. */
    H_WAIT_FOR(h_numsub(r[second], g, strlen(g)) == 1, 3000);
    H_WAIT_FOR(h_exists(r[first], g, strlen(g)) == 0, 3000);
    h_sleep_ms(100);
    assert_int_equal(h_exists(r[first], g, strlen(g)), 0);
    H_ASSERT_RC(rlock_unlock(held_by_other[second]), RLOCK_OK);
    pthread_join(th, NULL);
    H_ASSERT_RC(l.rc, RLOCK_OK);
    H_ASSERT_RC(l.unlock_rc, RLOCK_OK);
    assert_int_equal(h_exists(r[0], g, strlen(g)) + h_exists(r[1], g, strlen(g)), 0);
    rlock_multi_free(m);
    for (int i = 0; i < 2; i++) {
        rlock_free(locks[i]);
        rlock_free(held_by_other[i]);
        redisFree(r[i]);
        rlock_client_close(c[i]);
        rlock_client_close(other[i]);
    }
}

static void test_bad_input(void **state) {
    rlock_client *c = h_open(30000, 0), *c2 = h_open(30000, 0), *closed = h_open(30000, 0);
    const char *a = h_unique_name("multi-a");
    rlock *x = h_get(c, a), *x_again = h_get(c, a), *x_other = h_get(c2, a);
    rlock *y = h_get(c, h_unique_name("multi-b")), *z = h_get(closed, h_unique_name("multi-c"));
    rlock *fair_x = NULL;
    rlock_multi *m = NULL;
    (void)state;
    H_ASSERT_RC(rlock_get_fair(c, a, &fair_x), RLOCK_OK);
    rlock *two[] = {x, y}, *with_null[] = {x, NULL}, *same[] = {x, x}, *same_name[] = {x, x_again};
    rlock *same_server[] = {x, x_other}, *plain_and_fair[] = {x, fair_x}, *with_closed[] = {x, z};
    H_ASSERT_RC(rlock_multi_new(two, 2, NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_new(NULL, 2, &m), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_new(two, 0, &m), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_new(two, RLOCK_GROUP_MAX + 1, &m), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_new(with_null, 2, &m), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_new(same, 2, &m), RLOCK_EINVAL);
    print_message("      %s\n", rlock_last_error());
    H_ASSERT_RC(rlock_multi_new(same_name, 2, &m), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_new(same_server, 2, &m), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_new(plain_and_fair, 2, &m), RLOCK_EINVAL);
    assert_null(m);
    H_ASSERT_RC(rlock_multi_lock(NULL), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_try_lock(NULL, 0, 1000), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_unlock(NULL), RLOCK_EINVAL);
    rlock_multi_free(NULL);
    m = multi(two, 2);
    H_ASSERT_RC(rlock_multi_try_lock(m, 0, 0), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_lock_lease(m, -5), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_try_lock(m, 0, RLOCK_MAX_LEASE_MS + 1), RLOCK_EINVAL);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_ENOTOWNER);
    rlock_multi_free(m);
    /* A member whose client is closed. */
    m = multi(with_closed, 2);
    rlock_client_close(closed);
    H_ASSERT_RC(rlock_multi_lock(m), RLOCK_ECLOSED);
    H_ASSERT_RC(rlock_multi_unlock(m), RLOCK_ECLOSED);
    rlock_multi_free(m);
    H_ASSERT_RC(rlock_multi_new(with_closed, 2, &m), RLOCK_ECLOSED);
    rlock *all[] = {x, x_again, x_other, y, z, fair_x};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rlock_free(all[i]);
    rlock_client_close(c);
    rlock_client_close(c2);
}

/*
 * One key through two spellings of its server's address ("localhost" and
 * "127.0.0.1"): the same key given twice, refused like one address given
 * twice. Taken, it would make the thread wait for itself: each member busy
 * with the other's hold, given back and taken again for the whole wait.
 */
static void test_one_server_spelled_twice(void **state) {
    char by_name[96];
    const char *a = h_unique_name("multi-spelled");
    rlock_multi *m = NULL;
    (void)state;
    snprintf(by_name, sizeof by_name, "redis://localhost:%d", h_server_port(extra[0]));
    rlock_client *c = h_open_url(h_server_url(extra[0]), 30000, 1000);
    rlock_client *c_by_name = h_open_url(by_name, 30000, 1000);
    rlock *x = h_get(c, a), *x_by_name = h_get(c_by_name, a);
    rlock *one_key[] = {x, x_by_name};
    H_ASSERT_RC(rlock_multi_new(one_key, 2, &m), RLOCK_EINVAL);
    print_message("      %s\n", rlock_last_error());
    assert_null(m);
    rlock_free(x);
    rlock_free(x_by_name);
    rlock_client_close(c);
    rlock_client_close(c_by_name);
}

/* ---- no deadlock between overlapping multi-locks in opposite orders ------------------------ */

#define PROCS 4
#define THREADS 2
#define ROUNDS 60
#define NAMES 4 /* X, Y, Z on the suite's server; G on both extra servers */

typedef struct order_shared {
    atomic_int inside[NAMES + 1]; /* holders of each lock now (G twice: one per server) */
    atomic_int overlaps;
    atomic_long done[PROCS];
    atomic_int errors;
    atomic_int last_error;
} order_shared;

typedef struct order_thread {
    order_shared *sh;
    rlock_multi *m;
    const int *members; /* indexes into inside[] */
    int nmembers, process, thread;
} order_thread;

static void *order_main(void *arg) {
    order_thread *t = arg;
    for (int i = 0; i < ROUNDS; i++) {
        /* No limit on the wait: a deadlock would hang, and the deadline fails the test. */
        int rc = t->thread % 2 == 0 ? rlock_multi_lock(t->m) : rlock_multi_lock_lease(t->m, 10000);
        if (rc != RLOCK_OK) {
            atomic_fetch_add(&t->sh->errors, 1);
            atomic_store(&t->sh->last_error, rc);
            continue;
        }
        for (int k = 0; k < t->nmembers; k++)
            if (atomic_fetch_add(&t->sh->inside[t->members[k]], 1) != 0)
                atomic_fetch_add(&t->sh->overlaps, 1);
        usleep(1000);
        for (int k = 0; k < t->nmembers; k++)
            atomic_fetch_sub(&t->sh->inside[t->members[k]], 1);
        if (rlock_multi_unlock(t->m) != RLOCK_OK)
            atomic_fetch_add(&t->sh->errors, 1);
        atomic_fetch_add(&t->sh->done[t->process], 1);
    }
    return NULL;
}

/* Process p's list, in its own order: indexes 0..2 = X, Y, Z; 3 = G@extra0; 4 = G@extra1. */
static const int orders[PROCS][5] = {
    {0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, -1}, {4, 1, 3, -1}};

H_NORETURN static void order_process(order_shared *sh, int p, const char *const *names) {
    rlock_client *main_c, *e0, *e1;
    rlock *locks[5];
    order_thread t[THREADS];
    pthread_t th[THREADS];
    int n = 0;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    main_c = h_open(3000, 0);
    e0 = h_open_url(h_server_url(extra[0]), 3000, 2000);
    e1 = h_open_url(h_server_url(extra[1]), 3000, 2000);
    rlock_client *client_of[5] = {main_c, main_c, main_c, e0, e1};
    while (n < 5 && orders[p][n] >= 0) {
        int k = orders[p][n];
        H_CHILD_CHECK(rlock_get(client_of[k], names[k], &locks[n]) == RLOCK_OK, 3);
        n++;
    }
    rlock_multi *m = NULL;
    H_CHILD_CHECK(rlock_multi_new(locks, (size_t)n, &m) == RLOCK_OK, 4);
    for (int i = 0; i < THREADS; i++) {
        t[i] = (order_thread){sh, m, orders[p], n, p, i};
        H_CHILD_CHECK(pthread_create(&th[i], NULL, order_main, &t[i]) == 0, 5);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    rlock_multi_free(m);
    for (int i = 0; i < n; i++)
        rlock_free(locks[i]);
    rlock_client_close(main_c);
    rlock_client_close(e0);
    rlock_client_close(e1);
    h_child_exit(0);
}

static void test_opposite_orders_no_deadlock(void **state) {
    const char *names[5];
    pid_t pid[PROCS];
    (void)state;
    names[0] = h_unique_name("multi-x");
    names[1] = h_unique_name("multi-y");
    names[2] = h_unique_name("multi-z");
    names[3] = names[4] = h_unique_name("multi-g"); /* one name on two servers */
    order_shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    long long before = h_now_ms();
    fflush(stdout);
    for (int p = 0; p < PROCS; p++) {
        pid[p] = fork();
        assert_true(pid[p] >= 0);
        if (pid[p] == 0)
            order_process(sh, p, names);
    }
    int codes[PROCS];
    for (int p = 0; p < PROCS; p++)
        codes[p] = h_child_code(h_wait_child(pid[p], 60000));
    print_message("      %d processes x %d threads, %d multi-locks each over overlapping sets in "
                  "opposite orders: %ld %ld %ld %ld done in %lld ms, %d overlaps, %d errors\n",
                  PROCS, THREADS, ROUNDS, (long)sh->done[0], (long)sh->done[1], (long)sh->done[2],
                  (long)sh->done[3], h_now_ms() - before, sh->overlaps, sh->errors);
    for (int p = 0; p < PROCS; p++) {
        assert_int_equal(codes[p], 0); /* 2000: still running at the deadline (deadlock) */
        assert_int_equal(sh->done[p], THREADS * ROUNDS);
    }
    assert_int_equal(sh->overlaps, 0);
    assert_int_equal(sh->errors, 0);
    munmap(sh, sizeof *sh);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_busy_member_rolls_back),
        cmocka_unit_test(test_unreachable_member_rolls_back),
        cmocka_unit_test(test_lease_from_the_end),
        cmocka_unit_test(test_reentrancy),
        cmocka_unit_test(test_explicit_owner),
        cmocka_unit_test(test_fair_member),
        cmocka_unit_test(test_lost_member),
        cmocka_unit_test(test_cancelled_gives_back),
        cmocka_unit_test(test_group_waits_alone),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_one_server_spelled_twice),
        cmocka_unit_test(test_opposite_orders_no_deadlock),
    };
    return cmocka_run_group_tests(tests, start_servers, stop_servers);
}
