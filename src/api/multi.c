/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * multi.c - the public multi-lock calls (rlock_multi_*): a copy of the
 * caller's handles in the order every process computes alike, and the call
 * guards of every member's client around the group layer's multi-lock
 * (group/multi.c).
 *
 * A multi-lock owns its array, not the handles. It is never written after
 * rlock_multi_new: any thread may use it. Each call enters the client of
 * every member (one guard per member), so a client closing meanwhile ends
 * the call with RLOCK_ECLOSED rather than freeing what it uses.
 *
 * Threads: any application thread.
 */
#include "api.h"

#define RLOCK__MULTI_MAGIC 0x726c6d6cu /* "rlml" */

struct rlock_multi {
    uint32_t magic;
    rlock **locks;              /* owned array, canonical order; the handles are the caller's */
    size_t n;
};

/* A kind other than plain and fair (e.g. a read-write lock's) is not a member yet. */
static int member_kind(const rlock *lock) {
    return lock->kind == &rlock__reentrant || lock->kind == &rlock__fair;
}

int rlock_multi_new(rlock *const *locks, size_t n, rlock_multi **out) {
    if (out == NULL)
        return rlock__fail(RLOCK_EINVAL, 0, "rlock_multi_new: NULL out");
    *out = NULL;
    if (locks == NULL || n == 0 || n > RLOCK_GROUP_MAX)
        return rlock__fail(RLOCK_EINVAL, 0, "rlock_multi_new: %zu locks (NULL array, or not "
                                            "1..%d)", n, RLOCK_GROUP_MAX);
    rlock_multi *m = rlock__calloc(1, sizeof(*m));
    rlock__guards gs;
    int status = m == NULL || (m->locks = rlock__malloc(n * sizeof(rlock *))) == NULL
                     ? RLOCK_ENOMEM
                     : rlock__enter_all(&gs, locks, n);
    if (status == RLOCK_OK) {
        for (size_t i = 0; i < n && status == RLOCK_OK; i++)
            if (!member_kind(locks[i]))
                status = rlock__fail(RLOCK_EINVAL, 0, "rlock_multi_new: '%.200s' is a %s lock: "
                                                      "members are plain or fair locks",
                                     locks[i]->name, locks[i]->kind->name);
        for (size_t i = 0; i < n; i++)
            m->locks[i] = locks[i];
        if (status == RLOCK_OK)
            status = rlock__multi_order(m->locks, n);
        status = rlock__leave_all(&gs, status);
    }
    if (status != RLOCK_OK) {
        if (m != NULL)
            rlock__free(m->locks);
        rlock__free(m);
        return status;
    }
    m->n = n;
    m->magic = RLOCK__MULTI_MAGIC;
    *out = m;
    return RLOCK_OK;
}

void rlock_multi_free(rlock_multi *m) {
    if (m == NULL || m->magic != RLOCK__MULTI_MAGIC)
        return;
    m->magic = 0;
    rlock__free(m->locks);
    rlock__free(m);
}

static int valid(const rlock_multi *m) {
    if (m == NULL || m->magic != RLOCK__MULTI_MAGIC)
        return rlock__fail(RLOCK_EINVAL, 0, "NULL or freed multi-lock");
    return RLOCK_OK;
}

static int acquire_for(rlock_multi *m, uint64_t owner_id, long long wait_ms, long long lease_ms) {
    rlock__guards gs;
    if (!rlock__valid_lease(lease_ms))
        return rlock__bad_lease(lease_ms);
    int status = valid(m);
    if (status == RLOCK_OK)
        status = rlock__enter_all_for(&gs, m->locks, m->n, owner_id);
    if (status != RLOCK_OK)
        return status;
    rlock__owner owner = rlock__owner_of(owner_id);
    rlock__call call = {.cancel_state = gs.g[0].cancel_state,
                        .on_cancel = rlock__leave_all_on_cancel, .arg = &gs};
    status = rlock__multi_acquire(m->locks, m->n, &owner, wait_ms, lease_ms, &call);
    return rlock__leave_all(&gs, status);
}

static int release_for(rlock_multi *m, uint64_t owner_id) {
    int status = valid(m);
    if (status != RLOCK_OK)
        return status;
    return rlock__release_all_for(m->locks, m->n, owner_id, rlock__multi_release);
}

int rlock_multi_lock(rlock_multi *m) {
    return acquire_for(m, RLOCK__CALLING_THREAD, -1, RLOCK_LEASE_WATCHDOG);
}

int rlock_multi_lock_lease(rlock_multi *m, long long lease_ms) {
    return acquire_for(m, RLOCK__CALLING_THREAD, -1, lease_ms);
}

int rlock_multi_try_lock(rlock_multi *m, long long wait_ms, long long lease_ms) {
    return acquire_for(m, RLOCK__CALLING_THREAD, wait_ms, lease_ms);
}

int rlock_multi_unlock(rlock_multi *m) {
    return release_for(m, RLOCK__CALLING_THREAD);
}

int rlock_multi_try_lock_as(rlock_multi *m, uint64_t owner, long long wait_ms,
                            long long lease_ms) {
    int status = rlock__check_owner(owner);
    return status != RLOCK_OK ? status : acquire_for(m, owner, wait_ms, lease_ms);
}

int rlock_multi_unlock_as(rlock_multi *m, uint64_t owner) {
    int status = rlock__check_owner(owner);
    return status != RLOCK_OK ? status : release_for(m, owner);
}
