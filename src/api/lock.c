/*
 * lock.c - the public lock calls: each enters the call guard, names the
 * owner (the calling thread), and runs the generic operation of the kind
 * layer on the handle's lock kind.
 *
 * Threads: application threads. The guard disables cancellation for the
 * call, except during a blocked acquire's sleep (rlock__call).
 */
#include <limits.h>

#include "api.h"

static rlock__owner calling_thread(void) {
    return (rlock__owner){.id = rlock__thread_id(), .is_thread = 1};
}

static int valid_lease(long long lease_ms) {
    return lease_ms == RLOCK_LEASE_WATCHDOG || (lease_ms > 0 && lease_ms <= RLOCK_MAX_LEASE_MS);
}

static void leave_on_cancel(void *guard) {
    rlock__leave(guard);
}

static int acquire(rlock *lock, long long wait_ms, long long lease_ms) {
    rlock__guard g;
    if (!valid_lease(lease_ms))
        return rlock__fail(RLOCK_EINVAL, 0, "lease_ms %lld: must be 1..%lld or RLOCK_LEASE_WATCHDOG",
                           lease_ms, (long long)RLOCK_MAX_LEASE_MS);
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    rlock__owner owner = calling_thread();
    rlock__call call = {.cancel_state = g.cancel_state, .on_cancel = leave_on_cancel, .arg = &g};
    status = rlock__acquire(lock, &owner, wait_ms, lease_ms, &call);
    return rlock__leave_status(&g, status);
}

int rlock_lock(rlock *lock) {
    return acquire(lock, -1, RLOCK_LEASE_WATCHDOG);
}

int rlock_lock_lease(rlock *lock, long long lease_ms) {
    return acquire(lock, -1, lease_ms);
}

int rlock_try_lock(rlock *lock, long long wait_ms, long long lease_ms) {
    return acquire(lock, wait_ms, lease_ms);
}

int rlock_unlock(rlock *lock) {
    rlock__guard g;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    rlock__owner owner = calling_thread();
    return rlock__leave_status(&g, rlock__release(lock, &owner));
}

int rlock_force_unlock(rlock *lock) {
    rlock__guard g;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    return rlock__leave_status(&g, lock->kind->force_unlock(lock));
}

/* Asks the lock's kind a read-only question about the calling thread's view. */
static int ask(rlock *lock, int question, long long *value) {
    rlock__guard g;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    rlock__owner owner = calling_thread();
    return rlock__leave_status(&g, lock->kind->ask(lock, question, &owner, value));
}

int rlock_is_locked(rlock *lock) {
    long long fields = 0;
    int status = ask(lock, RLOCK__ASK_LOCKED, &fields);
    return status != RLOCK_OK ? status : fields > 0;
}

int rlock_is_held_by_current_thread(rlock *lock) {
    rlock__guard g;
    long long held = 0;
    int status = rlock__enter_lock(&g, lock);
    if (status != RLOCK_OK)
        return status;
    rlock__owner owner = calling_thread();
    int known = rlock__known_not_held(lock, &owner);
    rlock__leave(&g);
    if (known)
        return 0;
    status = ask(lock, RLOCK__ASK_HELD, &held);
    return status != RLOCK_OK ? status : held != 0;
}

int rlock_hold_count(rlock *lock) {
    long long count = 0;
    int status = ask(lock, RLOCK__ASK_COUNT, &count);
    if (status != RLOCK_OK)
        return status;
    return count > INT_MAX ? INT_MAX : (int)count;
}

int rlock_remain_ttl(rlock *lock, long long *ttl_ms) {
    long long ttl = 0;
    if (ttl_ms == NULL)
        return RLOCK_EINVAL;
    int status = ask(lock, RLOCK__ASK_TTL, &ttl);
    if (status == RLOCK_OK)
        *ttl_ms = ttl;
    return status;
}
