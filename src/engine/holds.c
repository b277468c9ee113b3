/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holds.c - the table of holds this client's threads have, one entry per
 * (lock name, owner thread, kind of hold). The watchdog's side of it --
 * snapshots, renewals, sweeps -- is holds_watchdog.c's (holds.h: the entry).
 *
 * Per owner, not per lock: a lock is exclusive in Redis, but the client's
 * view of it is not. Thread A may still believe it holds X after losing it
 * while thread B acquires X; each keeps its own entry, so A's loss is
 * reported to A and B's hold is renewed untouched. The kind of hold (its
 * renewer) is part of the key too: a read-write lock's reader and writer
 * holds of one thread are two holds of one name (two fields in Redis).
 *
 * An entry records the owner's last known hold count (sent to the scripts as
 * "expected", which makes re-sends idempotent), whether the watchdog renews
 * it, and when its lease ends by the client's clock: the send time of the
 * last acquisition or renewal Redis confirmed plus the lease. Past that
 * time the hold is treated as gone without asking Redis.
 *
 * A hold found gone (by the watchdog, or by the clock) becomes a tombstone:
 * it is reported once, and stays until the owner's next lock/unlock, which
 * learns of it (RLOCK_ELOST / RLOCK_ENOTOWNER) and starts afresh. A lease
 * hold past its lease is over, not lost: dropped when its owner calls
 * again, or -- for owners that never do, such as an explicit owner made for
 * one request -- when the table fills up, before it grows. One whose field
 * may outlive its lease in Redis (renewer.kept_by: a downgraded writer's)
 * stays, over, until its owner's lock or unlock (which takes the field
 * out), or the table fills up while the owner has no hold that keeps it. Each
 * entry created afresh gets a new serial, so a renewal result about an
 * older hold cannot touch a newer one.
 *
 * The watchdog walks the table rarely: a snapshot per round (sized from a
 * running count of name bytes), a sweep only once the earliest lease end a
 * sweep found (lowered by every acquisition) has come; and a renewal's
 * result reaches its entry through the record's pointer, not a lookup: an
 * entry unlinked while a round is open waits, dead, in the graveyard until
 * the round ends. At 100 000 held locks this took a round's client CPU from
 * ~96 to ~36 ms (bench_rlock watchdog -n 100000 --timeout 3000 -r 5).
 *
 * Threads: application threads (around each acquire/release), the watchdog
 * thread (snapshots, renewals, sweeps), the subscriber thread (expected
 * counts), exiting threads (TLS destructor). Locking: holds.mutex guards the
 * table and every entry. Nothing here blocks or talks to Redis.
 */
#include <string.h>

#include "holds.h"

#define MIN_BUCKETS 64

/*
 * A multiply-xorshift hash taking 8 bytes at a step: every lock and unlock
 * hashes the name a few times, and FNV-1a's byte-at-a-step loop was ~100
 * instructions a time for a 20-byte name (callgrind, bench_cluster -c).
 */
static uint32_t hash_name(const char *name, size_t len) {
    uint64_t h = 0x9e3779b97f4a7c15u ^ len, word = 0;
    const char *end = name + len;
    for (; end - name > 8; name += 8) {
        memcpy(&word, name, 8);
        h = (h ^ word) * 0xff51afd7ed558ccdu;
        h ^= h >> 32;
    }
    if (len >= 8) {
        memcpy(&word, end - 8, 8); /* the last 8 bytes, overlapping those hashed */
    } else {
        for (size_t i = 0; i < len; i++)
            word |= (uint64_t)(unsigned char)name[i] << (8 * i);
    }
    h = (h ^ word) * 0xc4ceb9fe1a85ec53u;
    return (uint32_t)(h ^ (h >> 32)); /* the bucket is the low bits: give them the high ones */
}

void rlock__holds_free_graveyard(rlock__holds *h) {
    while (h->graveyard != NULL) {
        rlock__hold *next = h->graveyard->next;
        rlock__free(h->graveyard);
        h->graveyard = next;
    }
}

int rlock__holds_init(rlock__holds *h) {
    memset(h, 0, sizeof(*h));
    h->buckets = rlock__calloc(MIN_BUCKETS, sizeof(*h->buckets));
    if (h->buckets == NULL)
        return RLOCK_ENOMEM;
    h->nbuckets = MIN_BUCKETS;
    if (pthread_mutex_init(&h->mutex, NULL) != 0) {
        rlock__free(h->buckets);
        h->buckets = NULL;
        return RLOCK_ENOMEM;
    }
    return RLOCK_OK;
}

void rlock__holds_destroy(rlock__holds *h) {
    if (h->buckets == NULL)
        return;
    for (size_t i = 0; i < h->nbuckets; i++) {
        rlock__hold *e = h->buckets[i];
        while (e != NULL) {
            rlock__hold *next = e->next;
            rlock__free(e);
            e = next;
        }
    }
    rlock__holds_free_graveyard(h);
    rlock__free(h->buckets);
    h->buckets = NULL;
    pthread_mutex_destroy(&h->mutex);
}

/* Finds key's entry; *link receives the pointer that points to it. */
static rlock__hold *find(rlock__holds *h, const rlock__hold_key *key, rlock__hold ***link) {
    uint32_t hash = hash_name(key->name, key->len);
    rlock__hold **p = &h->buckets[hash & (h->nbuckets - 1)];
    for (; *p != NULL; p = &(*p)->next) {
        rlock__hold *e = *p;
        if (e->hash == hash && e->owner == key->owner && e->renewer == key->renewer &&
            e->name_len == key->len && memcmp(e->name, key->name, key->len) == 0)
            break;
    }
    if (link != NULL)
        *link = p;
    return *p;
}

static void set_renew(rlock__holds *h, rlock__hold *e, int renew) {
    if (e->renew == renew)
        return;
    e->renew = renew;
    if (renew) {
        h->renewed++;
        h->renewed_bytes += e->name_len;
    } else {
        h->renewed--;
        h->renewed_bytes -= e->name_len;
    }
}

/* A renewed lease that may end before the sweep's bound lowers it. */
static void lower_bound(rlock__holds *h, const rlock__hold *e) {
    if (e->renew && e->expires_ms < h->earliest_ms)
        h->earliest_ms = e->expires_ms;
}

/* Frees e, or while a round's records may point at it, keeps it dead (serial 0) till its end. */
static void free_entry(rlock__holds *h, rlock__hold *e) {
    if (!h->round_open) {
        rlock__free(e);
        return;
    }
    e->serial = 0;
    e->next = h->graveyard;
    h->graveyard = e;
}

static void unlink_entry(rlock__holds *h, rlock__hold **link) {
    rlock__hold *e = *link;
    *link = e->next;
    h->count--;
    h->lost -= e->state == ENTRY_LOST;
    set_renew(h, e, 0);
    free_entry(h, e);
}

/* A lease hold past its lease: over (not lost), as rlock__holds_get drops it. */
static int lease_ended(const rlock__hold *e, int64_t now_ms) {
    return e->state == ENTRY_HELD && !e->renew && e->releasing == 0 && now_ms >= e->expires_ms;
}

/* Whether e's owner has a hold of the kind that keeps e's field in Redis past its lease. */
static int kept_in_redis(rlock__holds *h, const rlock__hold *e) {
    if (e->renewer->kept_by == NULL)
        return 0;
    rlock__hold_key key = {.name = e->name, .len = e->name_len, .owner = e->owner,
                           .renewer = e->renewer->kept_by};
    return find(h, &key, NULL) != NULL;
}

/*
 * Drops every lease hold past its lease. rlock__holds_get drops one when
 * its owner calls again; an owner that never does -- an explicit owner made
 * for one request, a lease it let run out -- would otherwise stay for the
 * client's life.
 */
static void drop_ended_leases(rlock__holds *h, int64_t now_ms) {
    for (size_t i = 0; i < h->nbuckets; i++) {
        rlock__hold **link = &h->buckets[i];
        while (*link != NULL) {
            if (lease_ended(*link, now_ms) && !kept_in_redis(h, *link))
                unlink_entry(h, link);
            else
                link = &(*link)->next;
        }
    }
}

/*
 * When the table is full: first drops the ended leases, then doubles it
 * unless that freed half of it (so each walk is paid for by as many
 * additions as it visits). On allocation failure it stays as is.
 */
static void maybe_grow(rlock__holds *h, int64_t now_ms) {
    if (h->count < h->nbuckets)
        return;
    drop_ended_leases(h, now_ms);
    if (h->count <= h->nbuckets / 2)
        return;
    rlock__hold **buckets = rlock__calloc(h->nbuckets * 2, sizeof(*buckets));
    if (buckets == NULL)
        return;
    for (size_t i = 0; i < h->nbuckets; i++) {
        rlock__hold *e = h->buckets[i];
        while (e != NULL) {
            rlock__hold *next = e->next;
            size_t b = e->hash & (h->nbuckets * 2 - 1);
            e->next = buckets[b];
            buckets[b] = e;
            e = next;
        }
    }
    rlock__free(h->buckets);
    h->buckets = buckets;
    h->nbuckets *= 2;
}

void rlock__holds_bury(rlock__holds *h, rlock__hold *e) {
    h->lost += e->state != ENTRY_LOST;
    e->state = ENTRY_LOST;
    set_renew(h, e, 0);
}

int rlock__holds_get(rlock__holds *h, const rlock__hold_key *key, int64_t now_ms,
                     rlock__hold_info *info) {
    rlock__hold **link;
    int state = RLOCK__HOLD_NONE;
    memset(info, 0, sizeof(*info));
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = find(h, key, &link);
    if (e == NULL) {
        /* nothing known */
    } else if (e->state == ENTRY_LOST) {
        info->count = e->count;
        info->lease_left_ms = e->expires_ms - now_ms;
        state = RLOCK__HOLD_LOST;
    } else if (lease_ended(e, now_ms)) {
        if (e->renewer->kept_by == NULL) /* Redis no longer shows it: its TTL ran out too */
            unlink_entry(h, link); /* a lease lock that ran its lease: over, not lost */
        state = RLOCK__HOLD_EXPIRED;
    } else if (now_ms >= e->expires_ms && e->releasing == 0) {
        info->count = e->count;
        info->lease_left_ms = e->expires_ms - now_ms;
        info->report = 1; /* found by the clock before the watchdog swept it */
        rlock__holds_bury(h, e);
        state = RLOCK__HOLD_LOST;
    } else {
        info->count = e->count;
        info->unsure = e->unsure;
        info->renew = e->renew;
        info->lease_left_ms = e->expires_ms - now_ms;
        info->acquired_us = e->acquired_us;
        state = RLOCK__HOLD_HELD;
    }
    pthread_mutex_unlock(&h->mutex);
    return state;
}

long long rlock__holds_expected(rlock__holds *h, const rlock__hold_key *key) {
    long long count = 0;
    int64_t now_ms = rlock__now_ms();
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = find(h, key, NULL);
    if (e != NULL && e->state == ENTRY_HELD && !lease_ended(e, now_ms)) /* an ended one is over */
        count = e->count;
    pthread_mutex_unlock(&h->mutex);
    return count;
}

int rlock__holds_renewing(rlock__holds *h, const rlock__hold_key *key) {
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = find(h, key, NULL);
    int renewing = e != NULL && e->state == ENTRY_HELD && e->renew;
    pthread_mutex_unlock(&h->mutex);
    return renewing;
}

void rlock__holds_forget(rlock__holds *h, const rlock__hold_key *key) {
    rlock__hold **link;
    pthread_mutex_lock(&h->mutex);
    if (find(h, key, &link) != NULL)
        unlink_entry(h, link);
    pthread_mutex_unlock(&h->mutex);
}

int rlock__holds_found_gone(rlock__holds *h, const rlock__hold_key *key, long long *lease_left_ms,
                            int64_t now_ms) {
    rlock__hold **link;
    int report = 0;
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = find(h, key, &link);
    if (e != NULL) {
        report = e->state == ENTRY_HELD;
        *lease_left_ms = e->expires_ms - now_ms;
        unlink_entry(h, link); /* the caller tells its thread now: nothing to keep */
    }
    pthread_mutex_unlock(&h->mutex);
    return report;
}

rlock__hold *rlock__holds_spare(const char *name, size_t len) {
    rlock__hold *e = rlock__malloc(sizeof(*e) + len);
    if (e == NULL)
        return NULL;
    memset(e, 0, sizeof(*e));
    e->hash = hash_name(name, len);
    e->name_len = len;
    memcpy(e->name, name, len);
    return e;
}

void rlock__holds_acquired(rlock__holds *h, const rlock__hold_key *key, const rlock__grant *grant,
                           rlock__hold **spare) {
    rlock__hold **link;
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = find(h, key, &link);
    if (e == NULL) {
        e = *spare;
        *spare = NULL;
        e->owner = key->owner;
        e->renewer = key->renewer;
        e->next = NULL;
        *link = e;
        h->count++;
    }
    if (e->serial == 0 || e->state == ENTRY_LOST || grant->count == 1) {
        /* A new hold in Redis must not inherit an older hold's fate. */
        e->serial = ++h->next_serial;
        e->releasing = 0;
        e->acquired_us = rlock__now_us();
        set_renew(h, e, 0);
    }
    h->lost -= e->state == ENTRY_LOST;
    e->state = ENTRY_HELD;
    e->count = grant->count;
    e->unsure = grant->unsure;
    e->expires_ms = grant->sent_ms + grant->lease_ms;
    if (grant->renew)
        set_renew(h, e, 1);
    lower_bound(h, e);
    maybe_grow(h, grant->sent_ms); /* after e is complete: e's lease has not ended */
    pthread_mutex_unlock(&h->mutex);
}

void rlock__holds_relet(rlock__holds *h, const rlock__hold_key *key, int64_t sent_ms,
                        long long lease_ms) {
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = find(h, key, NULL);
    if (e != NULL && e->state == ENTRY_HELD) {
        set_renew(h, e, 0);
        e->expires_ms = sent_ms + lease_ms;
    }
    pthread_mutex_unlock(&h->mutex);
}

void rlock__holds_begin_release(rlock__holds *h, const rlock__hold_key *key) {
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = find(h, key, NULL);
    if (e != NULL)
        e->releasing++;
    pthread_mutex_unlock(&h->mutex);
}

void rlock__holds_released(rlock__holds *h, const rlock__hold_key *key, long long count) {
    rlock__hold **link;
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = find(h, key, &link);
    if (e != NULL) {
        if (e->releasing > 0)
            e->releasing--;
        if (count == 0) {
            unlink_entry(h, link);
        } else {
            if (count > 0)
                e->count = count;
            else if (count == RLOCK__RELEASE_UNKNOWN)
                e->unsure = 1;
            if (e->releasing == 0) /* the sweep skipped it while the unlock was in flight */
                lower_bound(h, e);
        }
    }
    pthread_mutex_unlock(&h->mutex);
}

size_t rlock__holds_held(rlock__holds *h) {
    pthread_mutex_lock(&h->mutex);
    size_t held = h->count - h->lost;
    pthread_mutex_unlock(&h->mutex);
    return held;
}

void rlock__holds_owner_gone(rlock__holds *h, uint64_t owner) {
    pthread_mutex_lock(&h->mutex);
    for (size_t i = 0; i < h->nbuckets; i++) {
        rlock__hold **link = &h->buckets[i];
        while (*link != NULL) {
            if ((*link)->owner == owner)
                unlink_entry(h, link);
            else
                link = &(*link)->next;
        }
    }
    pthread_mutex_unlock(&h->mutex);
}
