/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock.c - the public Redlock calls (rlock_redlock_*): a handle of the
 * lock's name on each master's client, and the call guards of every client
 * around the group layer's algorithm (group/redlock.c).
 *
 * A Redlock owns its handles (made with rlock_get, freed with it); it is
 * never written after rlock_redlock_new: any thread may use it.
 *
 * Threads: any application thread.
 */

#include "api.h"

#define RLOCK__REDLOCK_MAGIC 0x726c726cu /* "rlrl" */

/* The shortest lease whose drift allowance (lease / 100 + 2 ms) leaves any validity. */
#define MIN_LEASE_MS 3

struct rlock_redlock {
    uint32_t magic;
    rlock **masters;            /* owned handles, one per master */
    size_t n;
};

static void free_masters(rlock **masters, size_t n) {
    for (size_t i = 0; masters != NULL && i < n; i++)
        rlock_free(masters[i]);
    rlock__free(masters);
}

/*
 * The masters must be independent: one client given twice, or two clients
 * of one server (two of its databases, two names of its address), would
 * count one server's key as two votes.
 */
static int check_independent(rlock **masters, size_t n) {
    rlock__guards gs;
    int status = rlock__enter_all(&gs, masters, n);
    if (status == RLOCK_OK)
        status = rlock__leave_all(&gs, rlock__redlock_check(masters, n));
    return status;
}

int rlock_redlock_new(rlock_client *const *clients, size_t n, const char *name,
                      rlock_redlock **out) {
    if (out == NULL)
        return rlock__fail(RLOCK_EINVAL, 0, "rlock_redlock_new: NULL out");
    *out = NULL;
    if (clients == NULL || n == 0 || n > RLOCK_GROUP_MAX)
        return rlock__fail(RLOCK_EINVAL, 0, "rlock_redlock_new: %zu masters (NULL array, or not "
                                            "1..%d)", n, RLOCK_GROUP_MAX);
    rlock_redlock *rl = rlock__calloc(1, sizeof(*rl));
    rlock **masters = rlock__calloc(n, sizeof(*masters));
    int status = rl == NULL || masters == NULL ? RLOCK_ENOMEM : RLOCK_OK;
    for (size_t i = 0; i < n && status == RLOCK_OK; i++)
        status = rlock_get(clients[i], name, &masters[i]);
    if (status == RLOCK_OK)
        status = check_independent(masters, n);
    if (status != RLOCK_OK) {
        free_masters(masters, n);
        rlock__free(rl);
        return status;
    }
    rl->masters = masters;
    rl->n = n;
    rl->magic = RLOCK__REDLOCK_MAGIC;
    *out = rl;
    return RLOCK_OK;
}

void rlock_redlock_free(rlock_redlock *rl) {
    if (rl == NULL || rl->magic != RLOCK__REDLOCK_MAGIC)
        return;
    rl->magic = 0;
    free_masters(rl->masters, rl->n);
    rlock__free(rl);
}

static int valid(const rlock_redlock *rl) {
    if (rl == NULL || rl->magic != RLOCK__REDLOCK_MAGIC)
        return rlock__fail(RLOCK_EINVAL, 0, "NULL or freed Redlock");
    return RLOCK_OK;
}

static int acquire_for(rlock_redlock *rl, uint64_t owner_id, long long wait_ms,
                       long long lease_ms, long long *validity_ms) {
    rlock__guards gs;
    long long validity = 0;
    if (lease_ms == RLOCK_LEASE_WATCHDOG)
        return rlock__fail(RLOCK_EINVAL, 0, "a Redlock needs a fixed lease (its validity is "
                                            "counted from it): RLOCK_LEASE_WATCHDOG refused");
    if (lease_ms < MIN_LEASE_MS || lease_ms > RLOCK_MAX_LEASE_MS)
        return rlock__fail(RLOCK_EINVAL, 0, "lease_ms %lld: a Redlock's lease must be %d..%lld",
                           lease_ms, MIN_LEASE_MS, (long long)RLOCK_MAX_LEASE_MS);
    int status = valid(rl);
    if (status == RLOCK_OK)
        status = rlock__enter_all_for(&gs, rl->masters, rl->n, owner_id);
    if (status != RLOCK_OK)
        return status;
    rlock__owner owner = rlock__owner_of(owner_id);
    rlock__call call = {.cancel_state = gs.g[0].cancel_state,
                        .on_cancel = rlock__leave_all_on_cancel, .arg = &gs};
    status = rlock__redlock_acquire(rl->masters, rl->n, &owner, wait_ms, lease_ms, &call,
                                    &validity);
    if (status == RLOCK_OK && validity_ms != NULL)
        *validity_ms = validity;
    return rlock__leave_all(&gs, status);
}

static int release_for(rlock_redlock *rl, uint64_t owner_id) {
    int status = valid(rl);
    if (status != RLOCK_OK)
        return status;
    return rlock__release_all_for(rl->masters, rl->n, owner_id, rlock__redlock_release);
}

int rlock_redlock_try_lock(rlock_redlock *rl, long long wait_ms, long long lease_ms,
                           long long *validity_ms) {
    return acquire_for(rl, RLOCK__CALLING_THREAD, wait_ms, lease_ms, validity_ms);
}

int rlock_redlock_lock(rlock_redlock *rl, long long lease_ms, long long *validity_ms) {
    return acquire_for(rl, RLOCK__CALLING_THREAD, -1, lease_ms, validity_ms);
}

int rlock_redlock_unlock(rlock_redlock *rl) {
    return release_for(rl, RLOCK__CALLING_THREAD);
}

int rlock_redlock_try_lock_as(rlock_redlock *rl, uint64_t owner, long long wait_ms,
                              long long lease_ms, long long *validity_ms) {
    int status = rlock__check_owner(owner);
    return status != RLOCK_OK ? status : acquire_for(rl, owner, wait_ms, lease_ms, validity_ms);
}

int rlock_redlock_unlock_as(rlock_redlock *rl, uint64_t owner) {
    int status = rlock__check_owner(owner);
    return status != RLOCK_OK ? status : release_for(rl, owner);
}
