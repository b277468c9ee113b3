/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * release.c - unlock for every lock kind, and what the client's own view
 * says of a hold before Redis is asked.
 *
 * A last unlock that finds a thread of this client asleep on the lock hands
 * it over with the kind's transfer instead of releasing to everybody
 * (bounded by local_handoffs in a row; engine/waiters.c picks the waiter).
 * The holds table is told before the release is sent (so the watchdog does
 * not mistake the key's absence for a loss) and after, with the outcome;
 * our entry goes before the waiter records its own under the same name.
 *
 * Threads: application threads only, inside the API layer's call guard.
 */
#include "internal.h"

/*
 * The unlock of a lost hold of count holds: reported once (report), and
 * RLOCK_ELOST when the owner would still believe it held the lock after
 * this unlock (count >= 2); for its last hold the owner holds nothing, as
 * it wanted: RLOCK_ENOTOWNER.
 */
static int unlock_lost(const rlock *lock, const rlock__owner *owner, int report, long long count,
                       long long lease_left_ms, const char *how) {
    char words[32];
    if (count >= 2)
        return rlock__lost(lock, owner, report, lease_left_ms, how);
    if (report)
        rlock__report_lost(lock, owner, lease_left_ms, how);
    return rlock__fail(RLOCK_ENOTOWNER, 0, "lock '%.200s': not held by %s (%s)", lock->name,
                       rlock__owner_words(owner, words), how);
}

/*
 * Ends owner's hold whose lease ran out by the client's clock, at its
 * unlock: its entry goes, and for a kind whose field may outlive the lease
 * (kind.release_expired) a release of every hold (expected 0), best effort,
 * takes the field out -- or the hold itself, should Redis's TTL not have
 * run out yet: the owner holds nothing after this unlock either way. The
 * unlock's answer stands (RLOCK_ENOTOWNER).
 */
static void forget_expired(rlock *lock, const rlock__owner *owner) {
    rlock__released out;
    rlock__error_detail saved;
    rlock__hold_key key = rlock__hold_of(lock, owner);
    if (lock->kind->release_expired) {
        rlock__error_save(&saved);
        int64_t deadline_ms = rlock__deadline_after(lock->engine->settings->command_timeout_ms);
        lock->kind->release(lock, owner, 0, deadline_ms, &out);
        rlock__error_restore(&saved);
    }
    rlock__holds_forget(&lock->engine->holds, &key);
}

/*
 * Before an unlock: RLOCK_OK with the expected count (0: nothing known, let
 * Redis say), or the unlock's answer for a hold already known to be over
 * (its lease ran out, or it was lost: see unlock_lost).
 */
static int hold_before_release(rlock *lock, const rlock__owner *owner, long long *expected,
                               int64_t *acquired_us, int *unsure) {
    rlock__holds *holds = &lock->engine->holds;
    rlock__hold_info info;
    rlock__hold_key key = rlock__hold_of(lock, owner);
    int state = rlock__holds_get(holds, &key, rlock__now_ms(), &info);
    *expected = state == RLOCK__HOLD_HELD ? info.count : 0;
    *acquired_us = state == RLOCK__HOLD_HELD ? info.acquired_us : 0;
    *unsure = state == RLOCK__HOLD_HELD && info.unsure;
    if (state == RLOCK__HOLD_EXPIRED) {
        int status = rlock__fail(RLOCK_ENOTOWNER, 0,
                                 "lock '%.200s': its lease ran out before the unlock", lock->name);
        forget_expired(lock, owner);
        return status;
    }
    if (state != RLOCK__HOLD_LOST)
        return RLOCK_OK;
    rlock__holds_forget(holds, &key);
    return unlock_lost(lock, owner, info.report, info.count, info.lease_left_ms,
                       info.report ? "its lease ran out with no renewal confirmed"
                                   : "its hold was lost earlier (reported then)");
}

/*
 * The unlock found the owner's field gone: a loss if it believed it held.
 * Not when its last hold's previous unlock ended unsure (RLOCK_EIO): that
 * unlock most likely went through, and a loss cannot be told from it, so
 * none is reported (a spurious LOCK_LOST would page someone for nothing).
 */
static int unlock_found_gone(rlock *lock, const rlock__owner *owner, long long expected,
                             int unsure) {
    long long lease_left = 0;
    char words[32];
    if (expected == 0)
        return rlock__fail(RLOCK_ENOTOWNER, 0, "lock '%.200s': not held by %s", lock->name,
                           rlock__owner_words(owner, words));
    rlock__hold_key key = rlock__hold_of(lock, owner);
    if (unsure && expected == 1) {
        rlock__holds_forget(&lock->engine->holds, &key);
        return rlock__fail(RLOCK_ENOTOWNER, 0, "lock '%.200s': not held by %s: released by the "
                           "earlier unlock whose outcome was unknown", lock->name,
                           rlock__owner_words(owner, words));
    }
    int report = rlock__holds_found_gone(&lock->engine->holds, &key, &lease_left, rlock__now_ms());
    return unlock_lost(lock, owner, report, expected, lease_left, "its hold is gone from Redis");
}

/* Whether this unlock should hand the lock to a sleeping waiter of this client. */
static int offer_to_waiter(rlock *lock, long long expected, rlock__offer *offer) {
    /* With replica_acks, every acquisition is acknowledged by its acquirer's own WAIT. */
    return expected == 1 && lock->kind->transfer != NULL &&
           lock->engine->settings->replica_acks == 0 &&
           rlock__wait_offer(lock->engine, lock->channel, lock->channel_len, lock->name,
                             lock->name_len, offer);
}

int rlock__release(rlock *lock, const rlock__owner *owner) {
    rlock__engine *e = lock->engine;
    rlock__released out;
    rlock__offer offer;
    rlock__hold_key key = rlock__hold_of(lock, owner);
    long long expected;
    int64_t acquired_us;
    int unsure;
    int status = hold_before_release(lock, owner, &expected, &acquired_us, &unsure);
    if (status != RLOCK_OK)
        return status;
    int offered = offer_to_waiter(lock, expected, &offer);
    rlock__holds_begin_release(&e->holds, &key);
    if (offered)
        status = lock->kind->transfer(lock, owner, &offer, &out);
    else
        status = lock->kind->release(lock, owner, expected, RLOCK__NO_DEADLINE, &out);
    rlock__holds_released(&e->holds, &key, out.gone ? -2 : out.remaining);
    if (offered) {
        offer.token = out.token;
        rlock__wait_settle(e, &offer, out.granted, out.sent_ms);
    }
    if (out.gone)
        status = unlock_found_gone(lock, owner, expected, unsure);
    if (status == RLOCK_OK)
        rlock__count_released(lock, out.gone ? -1 : out.remaining, acquired_us);
    return status;
}

int rlock__known_hold(const rlock *lock, const rlock__kind *kind, const rlock__owner *owner) {
    rlock__hold_info info;
    rlock__hold_key key = rlock__hold_of_kind(lock, kind, owner);
    int state = rlock__holds_get(&lock->engine->holds, &key, rlock__now_ms(), &info);
    if (state == RLOCK__HOLD_LOST && info.report)
        rlock__report_lost(lock, owner, info.lease_left_ms,
                           "lease ran out by the client's clock with no renewal confirmed");
    return state;
}

int rlock__known_not_held(rlock *lock, const rlock__owner *owner) {
    int state = rlock__known_hold(lock, lock->kind, owner);
    return state == RLOCK__HOLD_LOST || state == RLOCK__HOLD_EXPIRED;
}
