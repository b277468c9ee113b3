/*
 * test_lock.c - acquiring and releasing: reentrancy and hold counts, the
 * exact Redis layout, TTLs, per-thread and per-process ownership, leases,
 * force_unlock, is_locked/remain_ttl, wrong key types, script cache flush.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define SLACK_MS H_MS(1500)

static void test_reentrancy_layout(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("reent");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    const char *id = rlock_client_id(c);
    long long ttl;
    int i;
    (void)state;

    H_ASSERT_RC(rlock_hold_count(l), 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    for (i = 1; i <= 3; i++) {
        H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
        H_ASSERT_LOCK_IS(r, name, id, i);
        H_ASSERT_RC(rlock_hold_count(l), i);
        H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 30000 - SLACK_MS, 30000);
    }
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 1);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    H_ASSERT_BETWEEN(ttl, 30000 - SLACK_MS, 30000);
    for (i = 2; i >= 0; i--) {
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
        H_ASSERT_RC(rlock_hold_count(l), i);
        if (i > 0) {
            H_ASSERT_LOCK_IS(r, name, id, i);
            /* A partial release keeps the key's TTL (it does not PERSIST it). */
            H_ASSERT_BETWEEN(h_pttl(r, name, strlen(name)), 30000 - SLACK_MS, 30000);
        }
    }
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_RC(rlock_is_locked(l), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);

    /* Many holds. */
    for (i = 0; i < 100; i++)
        H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, id, 100);
    for (i = 0; i < 99; i++)
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, id, 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

static void test_ttl_per_acquisition(void **state) {
    rlock_client *c = h_open(H_MS(10000), 0);
    const char *name = h_unique_name("ttl");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    size_t n = strlen(name);
    long long wd = H_MS(10000);
    (void)state;

    /* Watchdog lock: PTTL = watchdog timeout. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), wd - SLACK_MS, wd);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(l, 0, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), wd - SLACK_MS, wd);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, RLOCK_LEASE_WATCHDOG), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), wd - SLACK_MS, wd);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    /* Each acquisition sets the TTL to its own lease (not additive). */
    H_ASSERT_RC(rlock_lock_lease(l, 60000), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), 60000 - SLACK_MS, 60000);
    H_ASSERT_RC(rlock_lock_lease(l, 5000), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), 5000 - SLACK_MS, 5000);
    H_ASSERT_RC(rlock_try_lock(l, 0, 20000), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), 20000 - SLACK_MS, 20000);
    H_ASSERT_RC(rlock_try_lock(l, 1000, 40000), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), 40000 - SLACK_MS, 40000);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 4);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    assert_true(h_pttl(r, name, n) > 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- ownership across threads ---------------------------------------- */

static void test_owner_threads(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("thr");
    rlock *l = h_get(c, name), *l2 = h_get(c, name);
    redisContext *r = h_redis();
    h_actor *b = h_actor_start();
    struct h_try t0 = {l, 0, 10000}, t200 = {l2, H_MS(200), 10000};
    char *field, *field2;
    long long pttl0, t;
    (void)state;

    /* Main thread holds it (twice). */
    H_ASSERT_RC(rlock_lock_lease(l, 20000), RLOCK_OK);
    H_ASSERT_RC(rlock_lock_lease(l, 20000), RLOCK_OK);
    field = h_lock_owner(r, name);
    pttl0 = h_pttl(r, name, strlen(name));

    /* Thread B can't release it or see it as its own, through either handle. */
    H_ASSERT_RC((int)h_actor_call(b, h_op_unlock, l), RLOCK_ENOTOWNER);
    H_ASSERT_RC((int)h_actor_call(b, h_op_unlock, l2), RLOCK_ENOTOWNER);
    H_ASSERT_RC((int)h_actor_call(b, h_op_is_held, l), 0);
    H_ASSERT_RC((int)h_actor_call(b, h_op_hold_count, l2), 0);
    H_ASSERT_RC((int)h_actor_call(b, h_op_is_locked, l2), 1);
    H_ASSERT_RC((int)h_actor_call(b, h_op_try_lock, &t0), RLOCK_BUSY);
    t = h_now_ms();
    H_ASSERT_RC((int)h_actor_call(b, h_op_try_lock, &t200), RLOCK_BUSY);
    assert_true(h_now_ms() - t >= H_MS(200) - 5);
    /* Nothing changed: same field, same count, TTL not re-armed. */
    field2 = h_lock_owner(r, name);
    assert_string_equal(field, field2);
    free(field2);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);
    assert_true(h_pttl(r, name, strlen(name)) <= pttl0);
    H_ASSERT_RC(rlock_hold_count(l2), 2);

    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* Now B takes it: a different owner field, and main can't release it. */
    H_ASSERT_RC((int)h_actor_call(b, h_op_lock, l), RLOCK_OK);
    field2 = h_lock_owner(r, name);
    assert_string_not_equal(field, field2);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_BUSY);
    H_ASSERT_RC((int)h_actor_call(b, h_op_hold_count, l), 1);
    H_ASSERT_RC((int)h_actor_call(b, h_op_unlock, l2), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    free(field);
    free(field2);
    h_actor_stop(b);
    rlock_free(l);
    rlock_free(l2);
    redisFree(r);
    rlock_client_close(c);
}

/* Thread ids are never reused: a later thread gets a new owner field even
 * if the system reuses the pthread_t. */
static void test_thread_ids_not_reused(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("tid");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    char *fields[8];
    int i, j;
    (void)state;

    for (i = 0; i < 8; i++) {
        h_actor *a = h_actor_start();
        H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
        fields[i] = h_lock_owner(r, name);
        H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_OK);
        h_actor_stop(a);
        for (j = 0; j < i; j++)
            assert_string_not_equal(fields[i], fields[j]);
    }
    for (i = 0; i < 8; i++)
        free(fields[i]);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* Two clients in one process are two owners, even on the same thread. */
static void test_owner_per_client(void **state) {
    rlock_client *a = h_open(30000, 0), *b = h_open(30000, 0);
    const char *name = h_unique_name("twoclients");
    rlock *la = h_get(a, name), *lb = h_get(b, name);
    redisContext *r = h_redis();
    (void)state;

    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    H_ASSERT_RC(rlock_is_held_by_current_thread(lb), 0);
    H_ASSERT_RC(rlock_hold_count(lb), 0);
    H_ASSERT_RC(rlock_is_locked(lb), 1);
    H_ASSERT_RC(rlock_try_lock(lb, 0, -1), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock(lb), RLOCK_ENOTOWNER);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(a), 1);
    H_ASSERT_RC(rlock_unlock(la), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(lb, 0, -1), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(b), 1);
    H_ASSERT_RC(rlock_unlock(lb), RLOCK_OK);

    rlock_free(la);
    rlock_free(lb);
    redisFree(r);
    rlock_client_close(a);
    rlock_client_close(b);
}

/* ---- ownership across processes -------------------------------------- */

/*
 * A child process forked before this process has any threads (so it may
 * start its own client even under TSan), blocked until go() sends it a line.
 */
struct kid {
    pid_t pid;
    int fd; /* write end: the line that lets it run */
};

typedef int (*kid_fn)(const char *name, const char *line);

static void kid_start(struct kid *k, kid_fn fn, const char *name) {
    int p[2];
    pid_t parent = getpid();
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    k->pid = fork();
    assert_true(k->pid >= 0);
    if (k->pid == 0) {
        char line[128];
        size_t n = 0;
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            h_child_exit(97);
        close(p[1]);
        while (n + 1 < sizeof line) {
            ssize_t rd = read(p[0], line + n, 1);
            if (rd <= 0)
                h_child_exit(98); /* the test gave up */
            if (line[n] == '\n')
                break;
            n++;
        }
        line[n] = 0;
        close(p[0]);
        h_child_exit(fn(name, line));
    }
    close(p[0]);
    k->fd = p[1];
}

/* Lets the kid run with line, and returns its exit code. */
static int kid_go(struct kid *k, const char *line) {
    char buf[130];
    int n = snprintf(buf, sizeof buf, "%s\n", line);
    ssize_t w = write(k->fd, buf, (size_t)n);
    close(k->fd);
    k->fd = -1;
    if (w != n) {
        kill(k->pid, SIGKILL);
        h_wait_child(k->pid, 5000);
        fail_msg("cannot write to the child");
    }
    return h_child_code(h_wait_child(k->pid, 30000));
}

/* Child 1: the parent (whose client id is line) holds name. */
static int kid_not_owner(const char *name, const char *parent_id) {
    rlock_client *cc = h_open(30000, 0);
    rlock *cl = h_get(cc, name);
    H_CHILD_CHECK(strcmp(rlock_client_id(cc), parent_id) != 0, 10);
    H_CHILD_CHECK(rlock_try_lock(cl, 0, 10000) == RLOCK_BUSY, 11);
    H_CHILD_CHECK(rlock_try_lock(cl, 100, -1) == RLOCK_BUSY, 12);
    H_CHILD_CHECK(rlock_unlock(cl) == RLOCK_ENOTOWNER, 13);
    H_CHILD_CHECK(rlock_is_locked(cl) == 1, 14);
    H_CHILD_CHECK(rlock_is_held_by_current_thread(cl) == 0, 15);
    H_CHILD_CHECK(rlock_hold_count(cl) == 0, 16);
    rlock_free(cl);
    rlock_client_close(cc);
    return 0;
}

/* Child 2: takes the lock and exits without unlocking. */
static int kid_take(const char *name, const char *unused) {
    rlock_client *cc = h_open(30000, 0);
    rlock *cl = h_get(cc, name);
    redisContext *cr = h_redis();
    (void)unused;
    H_CHILD_CHECK(rlock_lock_lease(cl, 20000) == RLOCK_OK, 20);
    H_CHILD_CHECK(h_lock_is(cr, name, strlen(name), rlock_client_id(cc), 1), 21);
    redisFree(cr);
    rlock_free(cl);
    rlock_client_close(cc);
    return 0;
}

static void test_owner_processes(void **state) {
    const char *name = h_unique_name("proc");
    struct kid k1, k2;
    rlock_client *c;
    rlock *l;
    redisContext *r;
    char parent_id[64];
    char *field, *field2;
    long long pttl0;
    (void)state;

    /* Fork first: this process has no threads yet. */
    kid_start(&k1, kid_not_owner, name);
    kid_start(&k2, kid_take, name);

    c = h_open(30000, 0);
    l = h_get(c, name);
    r = h_redis();
    snprintf(parent_id, sizeof parent_id, "%s", rlock_client_id(c));
    H_ASSERT_RC(rlock_lock_lease(l, 20000), RLOCK_OK);
    field = h_lock_owner(r, name);
    pttl0 = h_pttl(r, name, strlen(name));

    /* Another process can't take it, release it or see it as its own. */
    assert_int_equal(kid_go(&k1, parent_id), 0);
    field2 = h_lock_owner(r, name);
    assert_string_equal(field, field2);
    free(field2);
    H_ASSERT_LOCK_IS(r, name, parent_id, 1);
    assert_true(h_pttl(r, name, strlen(name)) <= pttl0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    /* The other way round: a child takes it and exits without unlocking. */
    assert_int_equal(kid_go(&k2, ""), 0);
    field2 = h_lock_owner(r, name);
    assert_string_not_equal(field2, field);
    assert_false(strncmp(field2, parent_id, strlen(parent_id)) == 0);
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    H_ASSERT_RC(rlock_force_unlock(l), 1);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    free(field);
    free(field2);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- leases ---------------------------------------------------------- */

static void test_lease_expiry(void **state) {
    /* A short watchdog timeout, so the watchdog runs often: it must leave
     * a lease lock alone. */
    rlock_client *c = h_open(H_MS(300), 0);
    const char *name = h_unique_name("lease");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    size_t n = strlen(name);
    long long lease = H_MS(500), t0, gone;
    h_actor *b = h_actor_start();
    (void)state;

    t0 = h_now_ms();
    H_ASSERT_RC(rlock_lock_lease(l, lease), RLOCK_OK);
    H_ASSERT_BETWEEN(h_pttl(r, name, n), 1, lease);
    H_WAIT_FOR(h_exists(r, name, n) == 0, lease + 2000);
    gone = h_now_ms() - t0;
    /* Not early (lease counts from the acquisition, which was after t0). */
    assert_true(gone >= lease - 5);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_RC(rlock_hold_count(l), 0);
    H_ASSERT_RC(rlock_is_locked(l), 0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, n), 0);

    /* Reentrant lease holds expire too, and another thread can then lock. */
    H_ASSERT_RC(rlock_lock_lease(l, lease), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(l, 0, lease), RLOCK_OK);
    H_WAIT_FOR(h_exists(r, name, n) == 0, lease + 2000);
    {
        struct h_try t = {l, 0, 20000}; /* a lease: no renewal moves the TTL */
        H_ASSERT_RC((int)h_actor_call(b, h_op_lock_lease, &t), RLOCK_OK);
    }
    {
        /* The old holder's late unlocks: refused, nothing changed or published. */
        long long pub0 = h_commandstat_calls(r, "publish");
        long long pttl0 = h_pttl(r, name, n);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
        assert_int_equal(h_commandstat_calls(r, "publish"), pub0);
        assert_true(h_pttl(r, name, n) <= pttl0);
    }
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC((int)h_actor_call(b, h_op_unlock, l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, n), 0);

    h_actor_stop(b);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- force_unlock, is_locked, remain_ttl ----------------------------- */

static void test_force_unlock(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("force");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    redisContext *sub = h_sub_open(h_url(), name, strlen(name));
    h_actor *a = h_actor_start();
    char *msg;
    (void)state;

    H_ASSERT_RC(rlock_force_unlock(l), 0);
    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
    H_ASSERT_RC((int)h_actor_call(a, h_op_lock, l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);

    H_ASSERT_RC(rlock_force_unlock(l), 1);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    msg = h_sub_read(sub, 2000);
    assert_non_null(msg);
    assert_string_equal(msg, "0");
    free(msg);
    H_ASSERT_RC(rlock_force_unlock(l), 0);
    H_ASSERT_RC(rlock_is_locked(l), 0);

    /* The old holder learns it at unlock: two levels deep, RLOCK_ELOST (after
     * it the thread would still believe it held); then it holds nothing. */
    H_ASSERT_RC((int)h_actor_call(a, h_op_is_held, l), 0);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ELOST);
    H_ASSERT_RC((int)h_actor_call(a, h_op_unlock, l), RLOCK_ENOTOWNER);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    /* Force-unlocking a foreign (Redisson) holder works too. */
    h_cmd_ok(r, "HSET %s %s 3", name, "6f1d3c2e-0000-4000-8000-000000000001:1");
    h_cmd_ok(r, "PEXPIRE %s 30000", name); /* every Redisson lock has a TTL */
    H_ASSERT_RC(rlock_force_unlock(l), 1);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);

    h_actor_stop(a);
    redisFree(sub);
    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

static void test_is_locked_remain_ttl(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("ttlq");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    long long ttl = 0;
    static const char foreign[] = "0d8c7e1a-1111-4222-8333-444455556666:42";
    (void)state;

    H_ASSERT_RC(rlock_is_locked(l), 0);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    assert_int_equal(ttl, -2);

    H_ASSERT_RC(rlock_lock_lease(l, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    H_ASSERT_BETWEEN(ttl, 5000 - SLACK_MS, 5000);
    h_cmd_ok(r, "PERSIST %s", name);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    assert_int_equal(ttl, -1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    assert_int_equal(ttl, -2);

    /* A foreign holder (another Redisson client). */
    h_cmd_ok(r, "HSET %s %s 1", name, foreign);
    h_cmd_ok(r, "PEXPIRE %s 30000", name);
    H_ASSERT_RC(rlock_is_locked(l), 1);
    H_ASSERT_RC(rlock_is_held_by_current_thread(l), 0);
    H_ASSERT_RC(rlock_hold_count(l), 0);
    H_ASSERT_RC(rlock_remain_ttl(l, &ttl), RLOCK_OK);
    H_ASSERT_BETWEEN(ttl, 30000 - SLACK_MS, 30000);
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_BUSY);
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_BUSY);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_ENOTOWNER);
    /* Untouched. */
    {
        char *field = NULL;
        long long v = 0;
        assert_int_equal(h_lock_fields(r, name, strlen(name), &field, &v), 1);
        assert_string_equal(field, foreign);
        assert_int_equal(v, 1);
        free(field);
        assert_true(h_pttl(r, name, strlen(name)) <= 30000);
    }
    h_cmd_ok(r, "DEL %s", name);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* Unlock to zero publishes "0" on the Redisson channel; a reentrant unlock
 * publishes nothing. */
static void check_channel(rlock_client *c, redisContext *r, const char *name) {
    rlock *l = h_get(c, name);
    redisContext *sub = h_sub_open(h_url(), name, strlen(name));
    long long pub0;
    char *msg;

    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    pub0 = h_commandstat_calls(r, "publish");
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_commandstat_calls(r, "publish"), pub0);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_commandstat_calls(r, "publish"), pub0 + 1);
    msg = h_sub_read(sub, 2000);
    if (!msg)
        fail_msg("no message on the channel of %s", name);
    assert_string_equal(msg, "0");
    free(msg);
    redisFree(sub);
    rlock_free(l);
}

static void test_unlock_channel(void **state) {
    rlock_client *c = h_open(30000, 0);
    redisContext *r = h_redis();
    char name[300];
    (void)state;
    check_channel(c, r, h_unique_name("chan"));
    snprintf(name, sizeof name, "%s{tag}", h_unique_name("chan"));
    check_channel(c, r, name);
    snprintf(name, sizeof name, "{%s}", h_unique_name("chan"));
    check_channel(c, r, name);
    redisFree(r);
    rlock_client_close(c);
}

/* ---- coexistence with other data ------------------------------------ */

static void test_wrongtype(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("wrongtype");
    rlock *l = h_get(c, name);
    redisContext *r = h_redis();
    char *v;
    long long t0;
    (void)state;

    h_cmd_ok(r, "SET %s x", name);
    H_ASSERT_RC(rlock_lock(l), RLOCK_EREDIS);
    H_ASSERT_RC(rlock_lock_lease(l, 5000), RLOCK_EREDIS);
    H_ASSERT_RC(rlock_try_lock(l, 0, -1), RLOCK_EREDIS);
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_EREDIS);
    /* An error is not "busy": no waiting for the whole wait. */
    t0 = h_now_ms();
    H_ASSERT_RC(rlock_try_lock(l, H_MS(3000), -1), RLOCK_EREDIS);
    H_ASSERT_BETWEEN(h_now_ms() - t0, 0, H_MS(1000));
    H_ASSERT_RC(rlock_hold_count(l), RLOCK_EREDIS);
    v = h_cmd_str(r, "GET %s", name);
    assert_non_null(v);
    assert_string_equal(v, "x");
    free(v);
    assert_int_equal(h_pttl(r, name, strlen(name)), -1);

    /* Another type (a list). */
    h_cmd_ok(r, "DEL %s", name);
    h_cmd_ok(r, "RPUSH %s a b", name);
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_EREDIS);
    assert_int_equal(h_cmd_int(r, "LLEN %s", name), 2);
    assert_int_equal(h_pttl(r, name, strlen(name)), -1);
    h_cmd_ok(r, "DEL %s", name);

    /* Once the key is gone, the lock works. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    rlock_free(l);
    redisFree(r);
    rlock_client_close(c);
}

/* SCRIPT FLUSH: the next lock reloads the script with exactly one EVAL. */
static void test_script_flush(void **state) {
    rlock_client *c = h_open(30000, 0);
    const char *name = h_unique_name("flush"), *name2 = h_unique_name("flush2");
    rlock *l = h_get(c, name), *l2 = h_get(c, name2);
    redisContext *r = h_redis();
    long long eval0, eval1;
    (void)state;

    /* Warm up: everything loaded and used once. */
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);

    h_cmd_ok(r, "SCRIPT FLUSH");
    eval0 = h_commandstat_calls(r, "eval");
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    assert_int_equal(h_commandstat_calls(r, "eval") - eval0, 1);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 1);
    H_ASSERT_RC(rlock_lock(l), RLOCK_OK);
    H_ASSERT_LOCK_IS(r, name, rlock_client_id(c), 2);
    assert_int_equal(h_commandstat_calls(r, "eval") - eval0, 1);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_exists(r, name, strlen(name)), 0);
    /* The unlock script may have needed its own reload: at most one EVAL. */
    eval1 = h_commandstat_calls(r, "eval");
    H_ASSERT_BETWEEN(eval1 - eval0, 1, 2);

    /* Everything is cached again: no more EVAL. */
    H_ASSERT_RC(rlock_lock(l2), RLOCK_OK);
    H_ASSERT_RC(rlock_try_lock(l, 0, 5000), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(h_commandstat_calls(r, "eval"), eval1);

    rlock_free(l);
    rlock_free(l2);
    redisFree(r);
    rlock_client_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reentrancy_layout),
        cmocka_unit_test(test_ttl_per_acquisition),
        cmocka_unit_test(test_owner_threads),
        cmocka_unit_test(test_thread_ids_not_reused),
        cmocka_unit_test(test_owner_per_client),
        cmocka_unit_test(test_owner_processes),
        cmocka_unit_test(test_lease_expiry),
        cmocka_unit_test(test_force_unlock),
        cmocka_unit_test(test_is_locked_remain_ttl),
        cmocka_unit_test(test_unlock_channel),
        cmocka_unit_test(test_wrongtype),
        cmocka_unit_test(test_script_flush),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
