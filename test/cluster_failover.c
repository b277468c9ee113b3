/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_failover.c - rlock on a Redis Cluster whose masters fail or hand
 * over, with locks held and waited for (3 masters + 3 replicas of the test's
 * own, node timeout 1000 ms; harness/cluster.c):
 *
 *   killed survives  kill -9 of a master holding a replicated watchdog lock,
 *                    waited for by another client, while a lock on another
 *                    master is held too: its replica is promoted (~2.5 s),
 *                    both locks live on and are renewed (on the new master
 *                    for the first), nothing is reported lost, the holder
 *                    still holds; after the unlock the waiter acquires
 *                    promptly (its subscription moved to the new master)
 *   killed lost once the same with the replica cut off first (it never
 *                    receives the lock): the promoted replica has no lock,
 *                    and the loss is reported exactly once (LOCK_LOST and
 *                    on_lock_lost, one each); the holder no longer holds,
 *                    unlock says RLOCK_ENOTOWNER, a new lock works
 *   cluster failover CLUSTER FAILOVER (coordinated: no write lost) of the
 *                    lock's master while held and waited for: renewed on the
 *                    new master, not reported lost, unlock works, the waiter
 *                    acquires promptly; and back again
 *
 *   lease from the answered send  a lease lock whose try_lock re-sent its
 *                    attempt through a kill -9 failover: its lease runs from
 *                    the send the new master answered, not from the first
 *
 *   paused           SIGSTOP of one master of three (700 ms, under the node
 *                    timeout), each holding a lock with a 600 ms lease: the
 *                    other two are renewed through the pause and never
 *                    reported lost (a hung node does not hold up the others)
 *
 * RLOCK_EVENT_MASTER_SWITCHED may be posted on a failover; it is printed, not
 * required. One cluster per test. Durations are scaled by TEST_TIMEOUT_SCALE.
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

/* The holder (this thread) unlocks; the waiter must acquire promptly. */
static void unlock_wakes(rlock *held, h_cwaiter *w, long long ttl) {
    assert_int_equal(h_cwaiter_done_ms(w), 0); /* still waiting: the lock is held */
    long long t0 = h_now_ms();
    H_ASSERT_RC(rlock_unlock(held), RLOCK_OK);
    long long t_unlocked = h_now_ms();
    h_cwaiter_join(w, 15000);
    long long took = h_cwaiter_done_ms(w) - t_unlocked;
    printf("      unlock took %lld ms; the waiter: %s %lld ms later (TTL %lld), its unlock %s\n",
           t_unlocked - t0, rlock_status_name(w->rc), took, ttl, rlock_status_name(w->unlock_rc));
    H_ASSERT_RC(w->rc, RLOCK_OK);
    H_ASSERT_RC(w->unlock_rc, RLOCK_OK);
    assert_true(took < H_MS(1000)); /* woken by the unlock message, not by the TTL */
    h_cwaiter_free(w);
}

static void print_events(h_cseen *s) {
    printf("      [%s] MASTER_SWITCHED x%d, RENEWAL_FAILED x%d, LOCK_LOST x%d, on_lock_lost x%d\n",
           s->who, atomic_load(&s->kinds[RLOCK_EVENT_MASTER_SWITCHED]),
           atomic_load(&s->kinds[RLOCK_EVENT_RENEWAL_FAILED]),
           atomic_load(&s->kinds[RLOCK_EVENT_LOCK_LOST]), atomic_load(&s->lost_calls));
}

static void test_killed_master_lock_survives(void **state) {
    h_cluster *hc = *state;
    h_cseen *sa = h_cseen_new("A"), *sb = h_cseen_new("B");
    long long wd = H_MS(10000); /* longer than the failover (~2.5 s) */
    rlock_client *a = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, sa);
    rlock_client *b = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, sb);
    h_server *masters[H_CLUSTER_NODES];
    char victim[128], other[128];
    h_cluster_masters(hc, masters);
    h_cluster_name_on(hc, masters[0], h_unique_name("survives"), victim, sizeof victim);
    h_cluster_name_on(hc, masters[1], h_unique_name("bystander"), other, sizeof other);
    rlock *lv = h_get(a, victim), *lo = h_get(a, other), *wv = h_get(b, victim);
    H_ASSERT_RC(rlock_lock(lv), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(lo), RLOCK_OK);
    h_cwaiter *w = h_cwaiter_start(wv, H_MS(60000));
    h_server *replica = h_cluster_replica_of(hc, masters[0]);
    H_WAIT_FOR(h_cluster_replica_has(replica, victim, strlen(victim)), 5000);
    h_sleep_ms(H_MS(200));
    long long t0 = h_now_ms();
    h_server *heir = h_cluster_kill_master(hc, masters[0]);
    printf("      :%d promoted %lld ms after kill -9\n", h_server_port(heir), h_now_ms() - t0);
    h_cluster_wait_renewed(heir, victim, wd, 2 * wd,
                           "renewal"); /* the watchdog found the new master */
    h_cluster_wait_renewed(masters[1], other, wd, 2 * wd, "renewal");
    print_events(sa);
    assert_int_equal(h_cseen_lost(sa) + h_cseen_lost(sb), 0);
    assert_int_equal(rlock_is_held_by_current_thread(lv), 1);
    unlock_wakes(lv, w, wd);
    H_ASSERT_RC(rlock_unlock(lo), RLOCK_OK);
    assert_int_equal(h_cseen_lost(sa) + h_cseen_lost(sb), 0);
    rlock_free(lv);
    rlock_free(lo);
    rlock_free(wv);
    rlock_client_close(a);
    rlock_client_close(b);
    h_cseen_free(sa);
    h_cseen_free(sb);
}

/*
 * A master paused (SIGSTOP: connections still accepted by the kernel, no
 * answer) for 700 ms -- less than the node timeout, so the cluster does not
 * fail over nor answer CLUSTERDOWN -- while it holds one lock and the two
 * other masters hold one each, with a 600 ms lease: the other two keep
 * being renewed through the pause (a hung node must not hold up the other
 * nodes' renewals: they would run out by the client's clock) and are never
 * reported lost; the paused master's lock may be, once.
 */
static void test_paused_master_others_renewed(void **state) {
    h_cluster *hc = *state;
    h_cseen *sa = h_cseen_new("A");
    long long wd = H_MS(600);
    rlock_client *a = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, sa);
    h_server *masters[H_CLUSTER_NODES];
    char names[3][128];
    rlock *locks[3];
    assert_int_equal(h_cluster_masters(hc, masters), 3);
    for (int i = 0; i < 3; i++) {
        h_cluster_name_on(hc, masters[i], h_unique_name("paused"), names[i], sizeof names[i]);
        locks[i] = h_get(a, names[i]);
        H_ASSERT_RC(rlock_lock(locks[i]), RLOCK_OK);
    }
    h_cluster_wait_renewed(masters[0], names[0], wd, 2 * wd,
                           "renewal"); /* a connection to it is established */
    h_server_pause(masters[0]);
    h_sleep_ms(700);
    h_server_resume(masters[0]);
    h_cluster_wait_renewed(masters[1], names[1], wd, 2 * wd, "renewal");
    h_cluster_wait_renewed(masters[2], names[2], wd, 2 * wd, "renewal");
    print_events(sa);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(rlock_is_held_by_current_thread(locks[i]), 1);
        H_ASSERT_RC(rlock_unlock(locks[i]), RLOCK_OK);
    }
    assert_true(h_cseen_lost(sa) <= 2); /* the paused master's lock: once, both ways at most */
    for (int i = 0; i < 3; i++)
        rlock_free(locks[i]);
    rlock_client_close(a);
    h_cseen_free(sa);
}

static void test_killed_master_lock_lost_once(void **state) {
    h_cluster *hc = *state;
    h_cseen *sa = h_cseen_new("A");
    long long wd = H_MS(10000); /* the loss is found on the new master, not by the clock */
    rlock_client *a = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, sa);
    h_server *masters[H_CLUSTER_NODES];
    char name[128];
    h_cluster_masters(hc, masters);
    h_cluster_name_on(hc, masters[2], h_unique_name("lost"), name, sizeof name);
    rlock *lock = h_get(a, name);
    h_server *replica = h_cluster_replica_of(hc, masters[2]);
    h_replica_cut(replica); /* it never receives the lock */
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK);
    h_sleep_ms(H_MS(200));
    assert_false(h_cluster_replica_has(replica, name, strlen(name)));
    long long t0 = h_now_ms();
    h_server *heir = h_cluster_kill_master(hc, masters[2]);
    long long t_promoted = h_now_ms();
    printf("      cut replica :%d promoted %lld ms after kill -9\n", h_server_port(heir),
           t_promoted - t0);
    assert_int_equal(h_cluster_pttl(heir, name, strlen(name)), -2);
    H_WAIT_FOR(h_cseen_lost(sa) >= 2, 2 * wd); /* the event and the callback */
    printf("      reported lost %lld ms after the promotion\n", h_now_ms() - t_promoted);
    h_sleep_ms(wd / 2); /* and never again */
    print_events(sa);
    assert_int_equal(atomic_load(&sa->kinds[RLOCK_EVENT_LOCK_LOST]), 1);
    assert_int_equal(atomic_load(&sa->lost_calls), 1);
    assert_int_equal(rlock_is_held_by_current_thread(lock), 0);
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_ENOTOWNER);
    H_ASSERT_RC(rlock_lock(lock), RLOCK_OK); /* afresh, on the new master */
    assert_int_equal(h_cluster_keys_in_slot(heir, h_slot(name, strlen(name))), 1);
    H_ASSERT_RC(rlock_unlock(lock), RLOCK_OK);
    assert_int_equal(atomic_load(&sa->kinds[RLOCK_EVENT_LOCK_LOST]), 1);
    rlock_free(lock);
    rlock_client_close(a);
    h_cseen_free(sa);
}

/* One CLUSTER FAILOVER of name's master with name held by a and waited for by b. */
static void failover_round(h_cluster *hc, rlock_client *a, rlock_client *b, const char *name,
                           long long wd) {
    rlock *la = h_get(a, name), *lb = h_get(b, name);
    h_server *old = h_cluster_owner(hc, h_slot(name, strlen(name)));
    h_server *replica = h_cluster_replica_of(hc, old);
    H_ASSERT_RC(rlock_lock(la), RLOCK_OK);
    h_cwaiter *w = h_cwaiter_start(lb, H_MS(60000));
    h_sleep_ms(H_MS(200));
    long long t0 = h_now_ms();
    h_cluster_failover(hc, replica);
    printf("      CLUSTER FAILOVER :%d -> :%d in %lld ms\n", h_server_port(old),
           h_server_port(replica), h_now_ms() - t0);
    h_cluster_wait_renewed(replica, name, wd, 2 * wd, "renewal");
    assert_int_equal(rlock_is_held_by_current_thread(la), 1);
    unlock_wakes(la, w, wd);
    rlock_free(la);
    rlock_free(lb);
}

static void test_cluster_failover(void **state) {
    h_cluster *hc = *state;
    h_cseen *sa = h_cseen_new("A"), *sb = h_cseen_new("B");
    long long wd = H_MS(H_FAILOVER_WATCHDOG_MS); /* outlasts the write pause */
    rlock_client *a = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, sa);
    rlock_client *b = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, sb);
    h_server *masters[H_CLUSTER_NODES];
    char name[128];
    h_cluster_masters(hc, masters);
    h_cluster_name_on(hc, masters[1], h_unique_name("failover"), name, sizeof name);
    failover_round(hc, a, b, name, wd);
    h_cluster_wait_settled(hc, 1, 10000); /* the old master follows the new one */
    failover_round(hc, a, b, name, wd);   /* and back */
    print_events(sa);
    print_events(sb);
    assert_int_equal(h_cseen_lost(sa) + h_cseen_lost(sb), 0);
    rlock_client_close(a);
    rlock_client_close(b);
    h_cseen_free(sa);
    h_cseen_free(sb);
}

/*
 * A lease lock taken across a failover: b's try_lock, a waiter behind a's
 * 500 ms lease, sends its attempts while the lock's master is killed and
 * gets the lock only once the replica is promoted (~2.5 s of re-sends). Its
 * lease runs from the send Redis answered (failure-modes.md, lease
 * guarantee 5), so the hold is still b's most of a lease after the grant:
 * counted from the first send, which went to the dead master, it ran out
 * 1-2 s after try_lock returned and was reported lost (issue 22, item 5).
 */
static void test_lease_from_answered_send(void **state) {
    h_cluster *hc = *state;
    h_cseen *sb = h_cseen_new("B");
    long long wd = H_MS(3000), lease = H_MS(4000);
    rlock_client *a = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, NULL);
    rlock_client *b = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, sb);
    h_server *masters[H_CLUSTER_NODES];
    char name[128];
    h_cluster_masters(hc, masters);
    h_cluster_name_on(hc, masters[0], h_unique_name("lease"), name, sizeof name);
    rlock *la = h_get(a, name), *lb = h_get(b, name);
    H_ASSERT_RC(rlock_lock_lease(la, H_MS(500)), RLOCK_OK);
    h_actor *waiter = h_actor_start();
    struct h_try t = {.lock = lb, .wait_ms = H_MS(20000), .lease_ms = lease};
    h_actor_post(waiter, h_op_try_lock, &t);
    h_sleep_ms(H_MS(100)); /* its first attempt found a's lock: it sleeps */
    long long t0 = h_now_ms();
    h_cluster_kill_master(hc, masters[0]);
    H_ASSERT_RC(h_actor_wait(waiter, 20000), RLOCK_OK);
    long long granted = h_actor_finished_ms(waiter);
    printf("      try_lock returned %lld ms after kill -9\n", granted - t0);
    h_sleep_ms(granted + lease * 5 / 8 - h_now_ms()); /* 2.5 s of the 4 s lease */
    long long held = h_actor_call(waiter, h_op_is_held, lb);
    print_events(sb);
    printf("      held %lld ms after the grant: %lld\n", h_now_ms() - granted, held);
    assert_int_equal(held, 1);
    assert_int_equal(h_cseen_lost(sb), 0);
    H_ASSERT_RC(h_actor_call(waiter, h_op_unlock, lb), RLOCK_OK);
    h_actor_stop(waiter);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_close(a);
    rlock_client_close(b);
    h_cseen_free(sb);
}

int main(void) {
    if (getenv("CLUSTER_FILTER")) /* e.g. CLUSTER_FILTER='test_lease*' */
        cmocka_set_test_filter(getenv("CLUSTER_FILTER"));
    const struct CMUnitTest tests[] = {
        H_CLUSTER_TEST(test_killed_master_lock_survives),
        H_CLUSTER_TEST(test_killed_master_lock_lost_once),
        H_CLUSTER_TEST(test_cluster_failover),
        H_CLUSTER_TEST(test_paused_master_others_renewed),
        H_CLUSTER_TEST(test_lease_from_answered_send),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
