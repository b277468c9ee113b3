/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_lock_owner.c - who owns a lock: one owner per thread (another thread
 * of the same client can neither release nor re-enter it), thread ids never
 * reused, one owner per client, and other processes (forked before any
 * thread exists) that can neither take nor release the parent's lock.
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_owner_threads),
        cmocka_unit_test(test_thread_ids_not_reused),
        cmocka_unit_test(test_owner_per_client),
        cmocka_unit_test(test_owner_processes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
