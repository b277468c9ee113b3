/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holds_watchdog.c - the watchdog's side of the holds table (holds.c):
 * a round's snapshot of the renewed entries (sized from a running count of
 * name bytes), its results applied through each record's pointer, not a
 * lookup (an entry unlinked while a round is open waits, dead, in the
 * graveyard until the round ends), and the sweep for leases past their end
 * by the client's clock, walked only once the earliest lease end it found
 * has come.
 *
 * Threads: the watchdog thread. Locking: holds.mutex, as in holds.c.
 */
#include <string.h>

#include "holds.h"

/* Copies e into the next snapshot slot (names into the arena). */
static void snap(rlock__renewal *r, char *arena, size_t *used, rlock__hold *e) {
    memcpy(arena + *used, e->name, e->name_len);
    r->name = arena + *used;
    r->name_len = e->name_len;
    r->owner = e->owner;
    r->renewer = e->renewer;
    r->serial = e->serial;
    r->hold = e;
    r->expires_ms = e->expires_ms;
    *used += e->name_len;
}

int rlock__holds_snapshot(rlock__holds *h, rlock__buf *entries, rlock__buf *names, size_t *n) {
    int status = RLOCK_OK;
    size_t bytes = 0, k = 0;
    *n = 0;
    pthread_mutex_lock(&h->mutex);
    if (h->renewed == 0)
        goto out;
    status = rlock__buf_reserve(entries, sizeof(rlock__renewal) * h->renewed);
    if (status == RLOCK_OK)
        status = rlock__buf_reserve(names, h->renewed_bytes + 1);
    if (status != RLOCK_OK)
        goto out;
    for (size_t i = 0; i < h->nbuckets; i++)
        for (rlock__hold *e = h->buckets[i]; e != NULL; e = e->next)
            if (e->renew)
                snap((rlock__renewal *)entries->data + k++, names->data, &bytes, e);
    *n = k;
    h->round_open = 1;
out:
    pthread_mutex_unlock(&h->mutex);
    return status;
}

void rlock__holds_round_end(rlock__holds *h) {
    pthread_mutex_lock(&h->mutex);
    h->round_open = 0;
    rlock__holds_free_graveyard(h);
    pthread_mutex_unlock(&h->mutex);
}

/*
 * The live, renewed entry a snapshot record was taken from, or NULL: the
 * record's entry is not freed before the round ends, and one unlinked since
 * has serial 0; a hold created afresh since has a new serial.
 */
static rlock__hold *still_there(const rlock__renewal *r) {
    rlock__hold *e = r->hold;
    return e->serial == r->serial && e->renew && e->state == ENTRY_HELD ? e : NULL;
}

void rlock__holds_renewed(rlock__holds *h, const rlock__renewal *r, int64_t expires_ms) {
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = still_there(r);
    if (e != NULL && expires_ms > e->expires_ms)
        e->expires_ms = expires_ms;
    pthread_mutex_unlock(&h->mutex);
}

int rlock__holds_drop_lost(rlock__holds *h, const rlock__renewal *r) {
    int dropped = 0;
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = still_there(r);
    /* An unlock in flight may have deleted the key itself: its reply decides. */
    if (e != NULL && e->releasing == 0) {
        rlock__holds_bury(h, e);
        dropped = 1;
    }
    pthread_mutex_unlock(&h->mutex);
    return dropped;
}

/* Whether the watchdog's sweep reports e now: renewed, past its lease, no unlock in flight. */
static int overdue(const rlock__hold *e, int64_t now_ms) {
    return e->renew && now_ms >= e->expires_ms && e->releasing == 0;
}

int rlock__holds_sweep(rlock__holds *h, int64_t now_ms, rlock__buf *entries, rlock__buf *names,
                       size_t *n, int64_t *next_expiry_ms) {
    int status = RLOCK_OK;
    size_t bytes = 0, k = 0;
    *n = 0;
    pthread_mutex_lock(&h->mutex);
    *next_expiry_ms = h->earliest_ms;
    if (now_ms < h->earliest_ms) /* nothing can be overdue: no walk */
        goto out;
    *next_expiry_ms = RLOCK__NO_DEADLINE;
    for (size_t i = 0; i < h->nbuckets; i++) {
        for (rlock__hold *e = h->buckets[i]; e != NULL; e = e->next) {
            if (overdue(e, now_ms)) {
                k++;
                bytes += e->name_len;
            } else if (e->renew && e->expires_ms > now_ms && e->expires_ms < *next_expiry_ms) {
                *next_expiry_ms = e->expires_ms;
            }
        }
    }
    h->earliest_ms = *next_expiry_ms;
    if (k == 0)
        goto out;
    if (rlock__buf_reserve(entries, sizeof(rlock__renewal) * k) != RLOCK_OK ||
        rlock__buf_reserve(names, bytes + 1) != RLOCK_OK) {
        status = RLOCK_ENOMEM; /* found again by the next sweep */
        *next_expiry_ms = h->earliest_ms = now_ms;
        goto out;
    }
    bytes = 0;
    k = 0;
    for (size_t i = 0; i < h->nbuckets; i++) {
        for (rlock__hold *e = h->buckets[i]; e != NULL; e = e->next) {
            if (!overdue(e, now_ms))
                continue;
            snap((rlock__renewal *)entries->data + k++, names->data, &bytes, e);
            rlock__holds_bury(h, e);
        }
    }
    *n = k;
out:
    pthread_mutex_unlock(&h->mutex);
    return status;
}
