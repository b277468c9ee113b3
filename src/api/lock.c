/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lock.c - the public lock calls: each enters the call guard, names the
 * owner -- the calling thread, or the explicit owner an _as call gives
 * (registered for the call's length: one call at a time per owner and
 * lock, owner.c) -- and runs the generic operation of the kind layer on the
 * handle's lock kind.
 *
 * Threads: application threads. The guard disables cancellation for the
 * call, except during a blocked acquire's sleep (rlock__call).
 */
#include <limits.h>

#include "api.h"

/* One public call on a lock: its guard, and whom it acts for. */
typedef struct lock_call {
    rlock__guard guard;
    rlock__owner owner;
    rlock__owner_call registered; /* an explicit owner's registration */
} lock_call;

rlock__owner rlock__owner_of(uint64_t id) {
    if (id == RLOCK__CALLING_THREAD)
        return (rlock__owner){.id = rlock__thread_id(), .is_thread = 1};
    return (rlock__owner){.id = id, .is_thread = 0};
}

/* Enters the call for owner (RLOCK__CALLING_THREAD or an explicit id). */
static int begin(lock_call *lc, rlock *lock, uint64_t owner) {
    lc->registered.client = NULL;
    int status = rlock__enter_lock(&lc->guard, lock);
    if (status != RLOCK_OK)
        return status;
    lc->owner = rlock__owner_of(owner);
    if (owner == RLOCK__CALLING_THREAD)
        return RLOCK_OK;
    status = rlock__owner_call_begin(&lc->registered, lock, owner);
    if (status != RLOCK_OK)
        return rlock__leave_status(&lc->guard, status);
    return RLOCK_OK;
}

/* Leaves the call with status. */
static int end(lock_call *lc, int status) {
    rlock__owner_call_end(&lc->registered);
    return rlock__leave_status(&lc->guard, status);
}

/* The same, when the thread is cancelled while it waits for the lock. */
static void end_on_cancel(void *arg) {
    lock_call *lc = arg;
    rlock__owner_call_end(&lc->registered);
    rlock__leave(&lc->guard);
}

int rlock__valid_lease(long long lease_ms) {
    return lease_ms == RLOCK_LEASE_WATCHDOG || (lease_ms > 0 && lease_ms <= RLOCK_MAX_LEASE_MS);
}

int rlock__bad_lease(long long lease_ms) {
    return rlock__fail(RLOCK_EINVAL, 0, "lease_ms %lld: must be 1..%lld or RLOCK_LEASE_WATCHDOG",
                       lease_ms, (long long)RLOCK_MAX_LEASE_MS);
}

int rlock__check_owner(uint64_t owner) {
    if (owner == 0)
        return rlock__fail(RLOCK_EINVAL, 0, "owner 0: owner ids are 1..UINT64_MAX "
                                            "(rlock_owner_new, rlock_thread_owner)");
    return RLOCK_OK;
}

int rlock__lock_call(rlock *lock, uint64_t owner, long long wait_ms, long long lease_ms,
                     long long *token) {
    lock_call lc;
    if (!rlock__valid_lease(lease_ms))
        return rlock__bad_lease(lease_ms);
    int status = begin(&lc, lock, owner);
    if (status != RLOCK_OK)
        return status;
    rlock__call call = {.cancel_state = lc.guard.cancel_state, .on_cancel = end_on_cancel,
                        .arg = &lc, .token = token};
    return end(&lc, rlock__acquire(lock, &lc.owner, wait_ms, lease_ms, &call));
}

int rlock_lock(rlock *lock) {
    return rlock__lock_call(lock, RLOCK__CALLING_THREAD, -1, RLOCK_LEASE_WATCHDOG, NULL);
}

int rlock_lock_lease(rlock *lock, long long lease_ms) {
    return rlock__lock_call(lock, RLOCK__CALLING_THREAD, -1, lease_ms, NULL);
}

int rlock_try_lock(rlock *lock, long long wait_ms, long long lease_ms) {
    return rlock__lock_call(lock, RLOCK__CALLING_THREAD, wait_ms, lease_ms, NULL);
}

int rlock_lock_as(rlock *lock, uint64_t owner, long long lease_ms) {
    int status = rlock__check_owner(owner);
    return status != RLOCK_OK ? status : rlock__lock_call(lock, owner, -1, lease_ms, NULL);
}

int rlock_try_lock_as(rlock *lock, uint64_t owner, long long wait_ms, long long lease_ms) {
    int status = rlock__check_owner(owner);
    return status != RLOCK_OK ? status : rlock__lock_call(lock, owner, wait_ms, lease_ms, NULL);
}

static int unlock_call(rlock *lock, uint64_t owner) {
    lock_call lc;
    int status = begin(&lc, lock, owner);
    if (status != RLOCK_OK)
        return status;
    return end(&lc, rlock__release(lock, &lc.owner));
}

int rlock_unlock(rlock *lock) {
    return unlock_call(lock, RLOCK__CALLING_THREAD);
}

int rlock_unlock_as(rlock *lock, uint64_t owner) {
    int status = rlock__check_owner(owner);
    return status != RLOCK_OK ? status : unlock_call(lock, owner);
}

int rlock_force_unlock(rlock *lock) {
    rlock__guard g;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    return rlock__leave_status(&g, lock->kind->force_unlock(lock));
}

/*
 * Asks the lock's kind a read-only question about owner's view. A query is
 * not registered as the owner's call: it changes nothing, so it may run
 * beside the owner's lock or unlock.
 */
static int ask(rlock *lock, uint64_t owner_id, int question, long long *value) {
    rlock__guard g;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    rlock__owner owner = rlock__owner_of(owner_id);
    return rlock__leave_status(&g, lock->kind->ask(lock, question, &owner, value));
}

int rlock_is_locked(rlock *lock) {
    long long fields = 0;
    int status = ask(lock, RLOCK__CALLING_THREAD, RLOCK__ASK_LOCKED, &fields);
    return status != RLOCK_OK ? status : fields > 0;
}

static int is_held(rlock *lock, uint64_t owner_id) {
    rlock__guard g;
    long long held = 0;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    rlock__owner owner = rlock__owner_of(owner_id);
    int known = rlock__known_not_held(lock, &owner);
    rlock__leave(&g);
    if (known)
        return 0;
    status = ask(lock, owner_id, RLOCK__ASK_HELD, &held);
    return status != RLOCK_OK ? status : held != 0;
}

int rlock_is_held_by_current_thread(rlock *lock) {
    return is_held(lock, RLOCK__CALLING_THREAD);
}

int rlock_is_held_by(rlock *lock, uint64_t owner) {
    int status = rlock__check_owner(owner);
    return status != RLOCK_OK ? status : is_held(lock, owner);
}

static int hold_count(rlock *lock, uint64_t owner_id) {
    rlock__guard g;
    long long count = 0;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    rlock__owner owner = rlock__owner_of(owner_id);
    /* a hold over by the client's clock counts 0, though its field may still be in Redis */
    if (!rlock__known_not_held(lock, &owner))
        status = lock->kind->ask(lock, RLOCK__ASK_COUNT, &owner, &count);
    status = rlock__leave_status(&g, status);
    if (status != RLOCK_OK)
        return status;
    return count > INT_MAX ? INT_MAX : (int)count;
}

int rlock_hold_count(rlock *lock) {
    return hold_count(lock, RLOCK__CALLING_THREAD);
}

int rlock_hold_count_as(rlock *lock, uint64_t owner) {
    int status = rlock__check_owner(owner);
    return status != RLOCK_OK ? status : hold_count(lock, owner);
}

int rlock_remain_ttl(rlock *lock, long long *ttl_ms) {
    long long ttl = 0;
    if (ttl_ms == NULL)
        return rlock__fail(RLOCK_EINVAL, 0, "rlock_remain_ttl: ttl_ms is NULL");
    int status = ask(lock, RLOCK__CALLING_THREAD, RLOCK__ASK_TTL, &ttl);
    if (status == RLOCK_OK)
        *ttl_ms = ttl;
    return status;
}
