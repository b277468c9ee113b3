/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_migration.c - a lock's slot moved to another master while the lock
 * is held by a watchdog lock (one client, on a thread of the test's own) and
 * waited for by a thread of another client. The slot moves in the three
 * phases of topology.md section 3b, and the test waits in each phase for a
 * renewal of the lock on the node that has the key:
 *
 *   1 MIGRATING   target IMPORTING, source MIGRATING; the key still on the
 *                 source (a two-key script there gets TRYAGAIN)
 *   2 MIGRATED    MIGRATE moved the key: the source answers ASK, the target
 *                 runs commands only after ASKING
 *   3 SETSLOT     every master says the target owns the slot (MOVED)
 *
 * In each phase the holder takes the lock once more (reentrant) and gives
 * that hold back. The three tests unlock in phase 1, 2 and 3 respectively:
 *
 *   unlock in phase N   the unlock returns RLOCK_OK while the slot is still
 *                       in that phase (it is not allowed to wait for the
 *                       migration's end); the waiter acquires promptly
 *                       afterwards (well under the holder's 3 s TTL: woken
 *                       by the unlock message, not by its TTL-bounded
 *                       sleep), and unlocks; the renewals never fail into
 *                       a loss: nothing is reported lost by either client
 *
 *   renewal keys split  two locks of one client in one slot, the migration
 *                       stopped with one key moved (either, in two tests):
 *                       each is renewed where it is, neither is reported
 *                       lost -- also when the moved key leads the node's
 *                       batch, whose ASK the watchdog does not follow
 *
 * One cluster per test. Durations are scaled by TEST_TIMEOUT_SCALE.
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

static const char *const phase_names[] = {"", "MIGRATING", "MIGRATED", "SETSLOT NODE"};

typedef struct run {
    h_cluster *hc;
    h_cseen *sa, *sb;
    rlock_client *a, *b;
    rlock *la, *lb;
    h_actor *holder; /* the thread that holds la */
    h_cwaiter *w;
    h_migration m;
    char name[128];
    long long wd;
    long long t_unlocked; /* when the holder's unlock returned */
} run;

/* The holder locks once more and gives that hold back (hold count 2 -> 1). */
static void relock(run *r, int phase) {
    long long rc = h_actor_call(r->holder, h_op_lock, r->la);
    if (rc != RLOCK_OK)
        H_FAIL("phase %s: reentrant lock = %s", phase_names[phase], rlock_status_name((int)rc));
    assert_int_equal(h_actor_call(r->holder, h_op_hold_count, r->la), 2);
    rc = h_actor_call(r->holder, h_op_unlock, r->la);
    if (rc != RLOCK_OK)
        H_FAIL("phase %s: unlock of the reentrant hold = %s", phase_names[phase],
               rlock_status_name((int)rc));
}

/*
 * The holder's last unlock, which must return RLOCK_OK within 5 s while the
 * slot stays in this phase. If it does not, the migration is finished first
 * (so the report says whether the unlock was only waiting for its end).
 */
static void unlock_in_phase(run *r, int phase) {
    long long t0 = h_now_ms();
    h_actor_post(r->holder, h_op_unlock, r->la);
    if (!H_POLL_UNTIL(h_actor_done(r->holder), 5000)) {
        if (phase == 1)
            h_cluster_migrate_keys(r->hc, &r->m);
        if (phase <= 2)
            h_cluster_migrate_finish(r->hc, &r->m);
        long long rc = h_actor_wait(r->holder, 30000);
        H_FAIL("phase %s: unlock did not return within %lld ms; after the migration "
               "finished it returned %s, %lld ms after the call",
               phase_names[phase], h_scaled(5000), rlock_status_name((int)rc),
               h_actor_finished_ms(r->holder) - t0);
    }
    long long rc = h_actor_wait(r->holder, 1000);
    r->t_unlocked = h_actor_finished_ms(r->holder);
    printf("      unlock in phase %s: %s in %lld ms\n", phase_names[phase],
           rlock_status_name((int)rc), r->t_unlocked - t0);
    if (rc != RLOCK_OK)
        H_FAIL("phase %s: unlock = %s", phase_names[phase], rlock_status_name((int)rc));
}

static void set_up(run *r, h_cluster *hc) {
    h_server *masters[H_CLUSTER_NODES];
    memset(r, 0, sizeof *r);
    r->hc = hc;
    r->wd = H_MS(3000); /* renewed every second: at least once per phase */
    r->sa = h_cseen_new("A");
    r->sb = h_cseen_new("B");
    r->a = h_cluster_open(hc, r->wd, RLOCK_PUBSUB_AUTO, r->sa);
    r->b = h_cluster_open(hc, r->wd, RLOCK_PUBSUB_AUTO, r->sb);
    assert_int_equal(h_cluster_masters(hc, masters), 3);
    h_cluster_name_on(hc, masters[0], h_unique_name("migrate"), r->name, sizeof r->name);
    r->m.source = masters[0];
    r->m.target = masters[1];
    r->la = h_get(r->a, r->name);
    r->lb = h_get(r->b, r->name);
    r->holder = h_actor_start();
    assert_int_equal(h_actor_call(r->holder, h_op_lock, r->la), RLOCK_OK);
    r->w = h_cwaiter_start(r->lb, H_MS(60000));
    h_sleep_ms(H_MS(200)); /* its attempt, then its sleep */
    assert_int_equal(h_cwaiter_done_ms(r->w), 0);
}

/* The slot through its three phases; the holder unlocks in unlock_phase. */
static void migrate(run *r, int unlock_phase) {
    int slot = h_slot(r->name, strlen(r->name));
    h_server *target = r->m.target;
    h_cluster_migrate_begin(r->hc, slot, target, &r->m);
    for (int phase = 1; phase <= 3; phase++) {
        if (phase == 2)
            assert_int_equal(h_cluster_migrate_keys(r->hc, &r->m), phase > unlock_phase ? 0 : 1);
        if (phase == 3)
            h_cluster_migrate_finish(r->hc, &r->m);
        if (phase <= unlock_phase) {
            h_cluster_wait_renewed(phase == 1 ? r->m.source : target, r->name, r->wd, r->wd,
                                   phase_names[phase]);
            relock(r, phase);
            h_cluster_wait_renewed(phase == 1 ? r->m.source : target, r->name, r->wd, r->wd,
                                   phase_names[phase]);
        }
        if (phase == unlock_phase) {
            assert_int_equal(h_cwaiter_done_ms(r->w), 0); /* held until now */
            unlock_in_phase(r, phase);
            H_WAIT_FOR(h_cwaiter_done_ms(r->w) != 0, 10000);
        }
    }
}

static void check_and_close(run *r) {
    h_cwaiter_join(r->w, 10000);
    long long took = h_cwaiter_done_ms(r->w) - r->t_unlocked;
    printf("      waiter: %s %lld ms after the unlock returned; its unlock %s\n",
           rlock_status_name(r->w->rc), took, rlock_status_name(r->w->unlock_rc));
    H_ASSERT_RC(r->w->rc, RLOCK_OK);
    H_ASSERT_RC(r->w->unlock_rc, RLOCK_OK);
    assert_true(took < H_MS(1000)); /* woken by the unlock, not by the 3 s TTL */
    assert_int_equal(h_actor_call(r->holder, h_op_is_held, r->la), 0);
    assert_int_equal(rlock_is_locked(r->la), 0);
    assert_ptr_equal(h_cluster_owner(r->hc, r->m.slot), r->m.target);
    assert_int_equal(h_cluster_keys_in_slot(r->m.source, r->m.slot), 0);
    assert_int_equal(h_cluster_keys_in_slot(r->m.target, r->m.slot), 0);
    /* After the move the lock works as before, on the target. */
    H_ASSERT_RC(rlock_lock(r->lb), RLOCK_OK);
    assert_int_equal(h_cluster_keys_in_slot(r->m.target, r->m.slot), 1);
    H_ASSERT_RC(rlock_unlock(r->lb), RLOCK_OK);
    printf("      events: A lost %d, renewal failures %d; B lost %d\n", h_cseen_lost(r->sa),
           atomic_load(&r->sa->kinds[RLOCK_EVENT_RENEWAL_FAILED]), h_cseen_lost(r->sb));
    assert_int_equal(h_cseen_lost(r->sa) + h_cseen_lost(r->sb), 0);
    h_actor_stop(r->holder);
    rlock_free(r->la);
    rlock_free(r->lb);
    rlock_client_close(r->a);
    rlock_client_close(r->b);
    h_cseen_free(r->sa);
    h_cseen_free(r->sb);
    h_cwaiter_free(r->w);
}

static void unlock_in(void **state, int phase) {
    run *r = calloc(1, sizeof *r);
    assert_non_null(r);
    set_up(r, *state);
    migrate(r, phase);
    check_and_close(r);
    free(r);
}

static void test_unlock_while_migrating(void **state) {
    unlock_in(state, 1);
}

static void test_unlock_after_migrate(void **state) {
    unlock_in(state, 2);
}

static void test_unlock_after_setslot(void **state) {
    unlock_in(state, 3);
}

/*
 * Two locks of one client in one slot ("{split}one", "{split}two"), and the
 * slot's migration stopped half way: one key moved, the other not. Their
 * shared RENEW script is answered TRYAGAIN until the migration ends, so the
 * watchdog renews them one by one: each is renewed where it is (the moved
 * one through ASK), none fails or is lost. Run twice, moving either key: one
 * of the two runs has the moved key first in the watchdog's node batch,
 * whose ASK must not be followed (after ASKING the importing node would
 * answer for the key still on the source as if it had it: gone).
 */
static void renewal_keys_split(h_cluster *hc, int moved) {
    const long long wd = 1500;
    const char *names[] = {"{split}one", "{split}two"};
    h_cseen *seen = h_cseen_new("A");
    rlock_client *c = h_cluster_open(hc, wd, RLOCK_PUBSUB_AUTO, seen);
    rlock *l1 = h_get(c, names[0]), *l2 = h_get(c, names[1]);
    h_server *masters[H_CLUSTER_NODES];
    h_migration m;
    int slot = h_slot(names[0], strlen(names[0]));
    H_ASSERT_RC(rlock_lock(l1), RLOCK_OK);
    H_ASSERT_RC(rlock_lock(l2), RLOCK_OK);
    h_cluster_masters(hc, masters);
    h_server *source = h_cluster_owner(hc, slot);
    h_server *target = masters[0] == source ? masters[1] : masters[0];
    h_cluster_migrate_begin(hc, slot, target, &m);
    redisContext *src = h_server_redis(source);
    redisReply *reply = h_cmd(src, "MIGRATE 127.0.0.1 %d %s 0 5000 KEYS %s",
                              h_server_port(target), "", names[moved]);
    assert_int_equal(reply->type, REDIS_REPLY_STATUS);
    freeReplyObject(reply);
    redisFree(src);
    h_cluster_wait_renewed(target, names[moved], wd, 2 * wd, "split");
    h_cluster_wait_renewed(source, names[1 - moved], wd, 2 * wd, "split");
    h_cluster_wait_renewed(target, names[moved], wd, 2 * wd, "split");
    printf("      %s moved: both renewed where they are; renewal failures %d, lost %d\n",
           names[moved], atomic_load(&seen->kinds[RLOCK_EVENT_RENEWAL_FAILED]),
           h_cseen_lost(seen));
    assert_int_equal(atomic_load(&seen->kinds[RLOCK_EVENT_RENEWAL_FAILED]), 0);
    assert_int_equal(h_cseen_lost(seen), 0);
    h_cluster_migrate_keys(hc, &m);
    h_cluster_migrate_finish(hc, &m);
    H_ASSERT_RC(rlock_unlock(l1), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l2), RLOCK_OK);
    assert_int_equal(h_cseen_lost(seen), 0);
    rlock_free(l1);
    rlock_free(l2);
    rlock_client_close(c);
    h_cseen_free(seen);
}

static void test_renewal_keys_split(void **state) {
    renewal_keys_split(*state, 0);
}

static void test_renewal_keys_split_other(void **state) {
    renewal_keys_split(*state, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_CLUSTER_TEST(test_unlock_while_migrating),
        H_CLUSTER_TEST(test_unlock_after_migrate),
        H_CLUSTER_TEST(test_unlock_after_setslot),
        H_CLUSTER_TEST(test_renewal_keys_split),
        H_CLUSTER_TEST(test_renewal_keys_split_other),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
