/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * owner.c - explicit owners: their ids (rlock_owner_new, rlock_thread_owner)
 * and the rule that an owner makes one call at a time per lock.
 *
 * Ids: both kinds come from the process-wide counter of core/thread.c, so
 * an explicit owner's id never equals a thread's (docs/design.md,
 * "Explicit owners").
 *
 * One call at a time: the holds table's bookkeeping (the expected hold
 * count every script carries, design.md section 3) assumes an owner's calls
 * on a lock follow one another, as a thread's do. Two overlapping calls of
 * one explicit owner could both send the same expected count, and the
 * second would take the first's acquisition for its own re-sent one: one
 * hold in Redis for two in the owner's belief, released early. So each _as
 * call is registered (client, owner, lock name) for its length, and an
 * overlapping one is refused before it sends anything.
 *
 * Threads: any application thread. Locking: client->mutex guards the
 * client's owner_calls chains; the entries live on the callers' stacks, or,
 * for a call on a group of locks (rlock__enter_all_for), in its guards.
 */
#include <string.h>

#include "api.h"

uint64_t rlock_owner_new(void) {
    return rlock__owner_id_new();
}

uint64_t rlock_thread_owner(void) {
    /* Its holds end when it exits, also those another thread takes under this id. */
    (void)rlock__thread_watch_exit();
    return rlock__thread_id();
}

static rlock__owner_call **bucket(rlock_client *c, uint64_t owner) {
    return &c->owner_calls[owner % RLOCK__OWNER_CALL_BUCKETS];
}

static int same_call(const rlock__owner_call *a, const rlock__owner_call *b) {
    return a->owner == b->owner && a->name_len == b->name_len &&
           memcmp(a->name, b->name, a->name_len) == 0;
}

int rlock__owner_call_begin(rlock__owner_call *call, rlock *lock, uint64_t owner) {
    rlock_client *c = lock->client;
    *call = (rlock__owner_call){.owner = owner, .name = lock->name, .name_len = lock->name_len};
    pthread_mutex_lock(&c->mutex);
    rlock__owner_call **head = bucket(c, owner);
    for (rlock__owner_call *other = *head; other != NULL; other = other->next) {
        if (same_call(other, call)) {
            pthread_mutex_unlock(&c->mutex);
            return rlock__fail(RLOCK_EINVAL, 0, "lock '%.200s': owner %llu already has a call "
                                                "in progress on it (an owner makes one call at a "
                                                "time per lock); nothing done", lock->name,
                               (unsigned long long)owner);
        }
    }
    call->next = *head;
    call->client = c;
    *head = call;
    pthread_mutex_unlock(&c->mutex);
    return RLOCK_OK;
}

void rlock__owner_call_end(rlock__owner_call *call) {
    rlock_client *c = call->client;
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mutex);
    rlock__owner_call **link = bucket(c, call->owner);
    while (*link != call)
        link = &(*link)->next;
    *link = call->next;
    pthread_mutex_unlock(&c->mutex);
    call->client = NULL;
}

int rlock__enter_all_for(rlock__guards *gs, rlock *const *locks, size_t n, uint64_t owner) {
    int status = rlock__enter_all(gs, locks, n);
    if (status != RLOCK_OK || owner == RLOCK__CALLING_THREAD)
        return status;
    rlock__owner_call *as = rlock__calloc(n, sizeof(*as));
    status = as == NULL ? RLOCK_ENOMEM : RLOCK_OK;
    for (size_t i = 0; i < n && status == RLOCK_OK; i++)
        status = rlock__owner_call_begin(&as[i], locks[i], owner);
    gs->as = as; /* the leave ends those begun (calloc'd: the others are no-ops) */
    return status == RLOCK_OK ? RLOCK_OK : rlock__leave_all(gs, status);
}

int rlock__release_all_for(rlock *const *locks, size_t n, uint64_t owner,
                           int (*release)(rlock *const *locks, size_t n,
                                          const rlock__owner *owner)) {
    rlock__guards gs;
    int status = rlock__enter_all_for(&gs, locks, n, owner);
    if (status != RLOCK_OK)
        return status;
    rlock__owner who = rlock__owner_of(owner);
    return rlock__leave_all(&gs, release(locks, n, &who));
}
