/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hold.c - what every path of the kind layer says of one owner's hold: its
 * key in the engine's holds table, its lease as a TTL, the words that name
 * its owner, and how a lost hold is reported (a LOCK_LOST event) and told
 * (RLOCK_ELOST). Acquire, release, the kinds and the group layer share them.
 *
 * Threads: any thread that calls a lock (application threads, inside the
 * API layer's call guard), and the subscriber thread (a waiter's expected
 * count); no state of its own.
 */
#include <string.h>

#include "internal.h"

long long rlock__lease_ttl(const rlock *lock, long long lease_ms) {
    return lease_ms == RLOCK_LEASE_WATCHDOG ? lock->engine->settings->watchdog_timeout_ms
                                            : lease_ms;
}

rlock__hold_key rlock__hold_of_kind(const rlock *lock, const rlock__kind *kind,
                                    const rlock__owner *owner) {
    return (rlock__hold_key){.name = lock->name, .len = lock->name_len, .owner = owner->id,
                             .renewer = kind->renewer};
}

rlock__hold_key rlock__hold_of(const rlock *lock, const rlock__owner *owner) {
    return rlock__hold_of_kind(lock, lock->kind, owner);
}

long long rlock__waiter_expected(const rlock__waiter *w) {
    rlock__hold_key key = rlock__hold_of(w->lock, &w->owner);
    return rlock__holds_expected(&((const rlock *)w->lock)->engine->holds, &key);
}

const char *rlock__owner_words(const rlock__owner *owner, char *buf) {
    if (owner->is_thread)
        return "the calling thread";
    memcpy(buf, "owner ", 6);
    buf[6 + rlock__fmt_u64(buf + 6, owner->id)] = '\0';
    return buf;
}

void rlock__report_lost(const rlock *lock, const rlock__owner *owner, long long lease_left_ms,
                        const char *how) {
    rlock__event_post_owner(lock->engine->events, RLOCK_EVENT_LOCK_LOST, lock->name,
                            lock->name_len, owner->id, lease_left_ms, RLOCK_ELOST, how);
}

int rlock__lost(const rlock *lock, const rlock__owner *owner, int report, long long lease_left_ms,
                const char *how) {
    char words[32];
    if (report)
        rlock__report_lost(lock, owner, lease_left_ms, how);
    return rlock__fail(RLOCK_ELOST, 0, "lock '%.200s': %s; %s holds nothing now", lock->name, how,
                       rlock__owner_words(owner, words));
}
