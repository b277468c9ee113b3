/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fork.c - fork safety: a child forked while the parent holds a lock
 * and a thread of it waits gets RLOCK_ECLOSED from everything inherited, and
 * its close/free release nothing; the parent's lock, renewal and waiter are
 * unaffected; and forks repeated while other threads lock and unlock.
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
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* ---- fork safety ------------------------------------------------------ */

/* The child of test_fork_while_holding_and_waiting: every call on what it
 * inherited is RLOCK_ECLOSED, a client of its own works, and nothing of the
 * parent's was touched. Ends the child. */
H_NORETURN static void holding_child(rlock_client *c, rlock *lh, rlock *lw, const char *held,
                                     const char *waited, const char *parent_id) {
    rlock *x = NULL;
    long long ttl = 0;
    redisContext *cr;
    (void)waited; /* unused under TSan */
    H_CHILD_CHECK(rlock_get(c, held, &x) == RLOCK_ECLOSED, 10);
    H_CHILD_CHECK(rlock_lock(lh) == RLOCK_ECLOSED, 11);
    H_CHILD_CHECK(rlock_lock_lease(lh, 1000) == RLOCK_ECLOSED, 12);
    H_CHILD_CHECK(rlock_try_lock(lh, 0, -1) == RLOCK_ECLOSED, 13);
    H_CHILD_CHECK(rlock_try_lock(lw, 100, -1) == RLOCK_ECLOSED, 14);
    H_CHILD_CHECK(rlock_unlock(lh) == RLOCK_ECLOSED, 15);
    H_CHILD_CHECK(rlock_force_unlock(lh) == RLOCK_ECLOSED, 16);
    H_CHILD_CHECK(rlock_force_unlock(lw) == RLOCK_ECLOSED, 17);
    H_CHILD_CHECK(rlock_is_locked(lh) == RLOCK_ECLOSED, 18);
    H_CHILD_CHECK(rlock_is_held_by_current_thread(lh) == RLOCK_ECLOSED, 19);
    H_CHILD_CHECK(rlock_hold_count(lh) == RLOCK_ECLOSED, 20);
    H_CHILD_CHECK(rlock_remain_ttl(lh, &ttl) == RLOCK_ECLOSED, 21);
    rlock_free(lh);
    rlock_free(lw);
    rlock_client_close(c);

#if !defined(__SANITIZE_THREAD__) /* TSan cannot start threads after such a fork */
    /* A client of its own works. */
    rlock_client *cc = h_open(30000, 0);
    rlock *ch, *cw, *cn;
    H_CHILD_CHECK(strcmp(rlock_client_id(cc), parent_id) != 0, 30);
    ch = h_get(cc, held);
    cw = h_get(cc, waited);
    cn = h_get(cc, h_unique_name("forkchild"));
    H_CHILD_CHECK(rlock_try_lock(ch, 0, -1) == RLOCK_BUSY, 31);
    H_CHILD_CHECK(rlock_is_locked(ch) == 1, 32);
    H_CHILD_CHECK(rlock_try_lock(cw, 0, -1) == RLOCK_BUSY, 33);
    H_CHILD_CHECK(rlock_lock(cn) == RLOCK_OK, 34);
    H_CHILD_CHECK(rlock_unlock(cn) == RLOCK_OK, 35);
    rlock_free(ch);
    rlock_free(cw);
    rlock_free(cn);
    rlock_client_close(cc);
#endif
    /* Nothing of the parent's was touched. */
    cr = h_redis();
    H_CHILD_CHECK(h_lock_is(cr, held, strlen(held), parent_id, 2), 40);
    redisFree(cr);
    h_child_exit(0);
}

static void test_fork_while_holding_and_waiting(void **state) {
    long long wd = H_MS(900);
    rlock_client *c = h_open(wd, 0);
    const char *held = h_unique_name("forkheld"), *waited = h_unique_name("forkwait");
    rlock *lh = h_get(c, held), *lw = h_get(c, waited);
    redisContext *r = h_redis();
    h_actor *waiter = h_actor_start();
    static struct h_try t; /* may outlive a failed test */
    char parent_id[64];
    pid_t pid;
    int code;
    long long t_end, t0;
    (void)state;

    t.lock = lw;
    t.wait_ms = H_MS(60000);
    t.lease_ms = -1;
    snprintf(parent_id, sizeof parent_id, "%s", rlock_client_id(c));
    H_ASSERT_RC(rlock_lock(lh), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(lh), RLOCK_OK);
    h_foreign_lock(r, waited, 60000);
    h_actor_post(waiter, h_op_try_lock, &t);
    H_WAIT_FOR(h_numsub(r, waited, strlen(waited)) >= 1, 2000);
    h_sleep_ms(50);

    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        holding_child(c, lh, lw, held, waited, parent_id);
    code = h_child_code(h_wait_child(pid, 20000));
    if (code != 0)
        fail_msg("child failed with code %d (see its message above; 2000 = hung)", code);

    /* The parent's lock, replies and renewal are unaffected. */
    H_ASSERT_RC(rlock_hold_count(lh), 2);
    H_ASSERT_RC(rlock_is_held_by_current_thread(lh), 1);
    H_ASSERT_LOCK_IS(r, held, parent_id, 2);
    t_end = h_now_ms() + 2 * wd;
    while (h_now_ms() < t_end) {
        if (h_pttl(r, held, strlen(held)) <= 0)
            fail_msg("the parent's lock was not renewed after the fork");
        h_sleep_ms(20);
    }
    H_ASSERT_LOCK_IS(r, held, parent_id, 2);

    /* The parent's waiter is still waiting, and is woken by the release. */
    assert_false(h_actor_done(waiter));
    t0 = h_now_ms();
    h_foreign_unlock(r, waited);
    H_ASSERT_RC((int)h_actor_wait(waiter, 5000), RLOCK_OK);
    H_ASSERT_BETWEEN(h_actor_finished_ms(waiter) - t0, 0, H_MS(500));
    H_ASSERT_LOCK_IS(r, waited, parent_id, 1);
    H_ASSERT_RC((int)h_actor_call(waiter, h_op_unlock, lw), RLOCK_OK);

    H_ASSERT_RC(rlock_unlock(lh), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(lh), RLOCK_OK);
    assert_int_equal(h_exists(r, held, strlen(held)), 0);

    h_actor_stop(waiter);
    rlock_free(lh);
    rlock_free(lw);
    redisFree(r);
    rlock_client_close(c);
}

/* Forks repeatedly while other threads are busy locking and unlocking. */
struct churn {
    rlock *lock;
    atomic_int stop;
    int errors;
    int last_error;        /* the status of the last failed call */
    char last_detail[256]; /* and its rlock_last_error() */
    long long rounds;
};

static void churn_failed(struct churn *ch, int rc) {
    ch->errors++;
    ch->last_error = rc;
    snprintf(ch->last_detail, sizeof ch->last_detail, "%s", rlock_last_error());
}

static void *churn_main(void *p) {
    struct churn *ch = p;
    while (!atomic_load(&ch->stop)) {
        int rc = rlock_lock(ch->lock);
        if (rc != RLOCK_OK) {
            churn_failed(ch, rc);
            continue;
        }
        if ((rc = rlock_unlock(ch->lock)) != RLOCK_OK)
            churn_failed(ch, rc);
        ch->rounds++;
    }
    return NULL;
}

/* A child of test_fork_under_load: the inherited client and handle are
 * RLOCK_ECLOSED; a client of its own works. Ends the child. */
H_NORETURN static void load_child(rlock_client *c, rlock *l) {
    H_CHILD_CHECK(rlock_is_locked(l) == RLOCK_ECLOSED, 10);
    H_CHILD_CHECK(rlock_try_lock(l, 0, -1) == RLOCK_ECLOSED, 11);
    H_CHILD_CHECK(rlock_unlock(l) == RLOCK_ECLOSED, 12);
    rlock_client_close(c);
    /*
     * The rest allocates. The churning threads allocate all the time,
     * so under ASan the fork can happen while one holds the
     * allocator's lock, and Debian 12's libasan (GCC 12) has no fork
     * handlers for it (added in LLVM 18, llvm/llvm-project#75290): the
     * child would hang in free()/malloc(), as it once did in CI. TSan
     * cannot start threads after such a fork at all.
     */
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    rlock_free(l);
    {
        rlock_client *cc = h_open(30000, 0);
        rlock *cl = h_get(cc, h_unique_name("forkloadchild"));
        H_CHILD_CHECK(rlock_try_lock(cl, 0, 5000) == RLOCK_OK, 13);
        H_CHILD_CHECK(rlock_unlock(cl) == RLOCK_OK, 14);
        rlock_free(cl);
        rlock_client_close(cc);
    }
#endif
    h_child_exit(0);
}

static void test_fork_under_load(void **state) {
    enum { THREADS = 4, FORKS = 15 };
    rlock_client *c = h_open(H_MS(900), 0);
    const char *name = h_unique_name("forkload");
    struct churn ch[THREADS];
    pthread_t th[THREADS];
    rlock *l = h_get(c, name);
    int i;
    (void)state;

    for (i = 0; i < THREADS; i++) {
        memset(&ch[i], 0, sizeof ch[i]);
        ch[i].lock = l;
        assert_int_equal(pthread_create(&th[i], NULL, churn_main, &ch[i]), 0);
    }
    for (i = 0; i < FORKS; i++) {
        pid_t pid;
        int code;
        h_sleep_ms(20);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            load_child(c, l);
        code = h_child_code(h_wait_child(pid, 20000));
        if (code != 0) {
            int j;
            for (j = 0; j < THREADS; j++)
                atomic_store(&ch[j].stop, 1);
            for (j = 0; j < THREADS; j++)
                pthread_join(th[j], NULL);
            fail_msg("fork %d: child failed with code %d (2000 = hung)", i, code);
        }
    }
    for (i = 0; i < THREADS; i++)
        atomic_store(&ch[i].stop, 1);
    {
        long long rounds = 0;
        for (i = 0; i < THREADS; i++) {
            pthread_join(th[i], NULL);
            if (ch[i].errors != 0)
                fail_msg("thread %d: %d failed calls, the last %s: %s", i, ch[i].errors,
                         rlock_status_name(ch[i].last_error), ch[i].last_detail);
            rounds += ch[i].rounds;
        }
        print_message("      %d forks while %d threads did %lld lock/unlock rounds\n", FORKS,
                      THREADS, rounds);
        assert_true(rounds > 0);
    }
    {
        redisContext *r = h_redis();
        assert_int_equal(h_exists(r, name, strlen(name)), 0);
        redisFree(r);
    }
    rlock_free(l);
    rlock_client_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_while_holding_and_waiting),
        cmocka_unit_test(test_fork_under_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
