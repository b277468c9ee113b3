/*
 * holds.c - the table of locks this client holds, by name.
 *
 * One entry per lock name (a lock is exclusive, so at most one thread of the
 * process holds it at a time): the owning thread, its last known hold count
 * (sent to the scripts as "expected", which makes re-sends idempotent), and
 * whether the watchdog renews it. Reentries and all threads of one lock share
 * the entry; a watchdog acquisition marks it renewed until it is fully
 * released, lost, or its thread exits.
 *
 * Each time a lock is created afresh in Redis (hold count 1) the entry gets a
 * new serial, so a watchdog round that found an *older* hold gone cannot drop
 * the new one.
 *
 * Threads: application threads (after each acquire/release reply), the
 * watchdog thread (snapshots and lost locks), exiting threads (TLS destructor).
 * Locking: holds.mutex guards the table and every entry. Nothing here blocks
 * or talks to Redis.
 */
#include <string.h>

#include "internal.h"

struct rlock__hold {
    rlock__hold *next;   /* bucket chain */
    uint64_t owner_tid;  /* thread holding it */
    uint64_t serial;     /* changes when the lock is re-created in Redis */
    long long count;     /* last hold count Redis reported to the owner */
    int renew;           /* the watchdog renews it */
    int releasing;       /* unlocks in flight: the watchdog must not call it lost */
    uint32_t hash;
    size_t name_len;
    char name[];         /* not NUL-terminated */
};

#define MIN_BUCKETS 64

static uint32_t hash_name(const char *name, size_t len) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 16777619u;
    return h;
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
    rlock__free(h->buckets);
    h->buckets = NULL;
    pthread_mutex_destroy(&h->mutex);
}

/* Finds the entry for name; *link receives the pointer that points to it. */
static rlock__hold *find(rlock__holds *h, const char *name, size_t len, rlock__hold ***link) {
    uint32_t hash = hash_name(name, len);
    rlock__hold **p = &h->buckets[hash & (h->nbuckets - 1)];
    for (; *p != NULL; p = &(*p)->next) {
        rlock__hold *e = *p;
        if (e->hash == hash && e->name_len == len && memcmp(e->name, name, len) == 0)
            break;
    }
    if (link != NULL)
        *link = p;
    return *p;
}

/* Doubles the table when it is full; on allocation failure it stays as is. */
static void maybe_grow(rlock__holds *h) {
    if (h->count < h->nbuckets)
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

static void unlink_entry(rlock__holds *h, rlock__hold **link) {
    rlock__hold *e = *link;
    *link = e->next;
    h->count--;
    if (e->renew)
        h->renewed--;
    rlock__free(e);
}

long long rlock__holds_expected(rlock__holds *h, const char *name, size_t len, uint64_t tid) {
    long long count = 0;
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = find(h, name, len, NULL);
    if (e != NULL && e->owner_tid == tid)
        count = e->count;
    pthread_mutex_unlock(&h->mutex);
    return count;
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

void rlock__holds_acquired(rlock__holds *h, const char *name, size_t len, uint64_t tid,
                           long long count, int renew, rlock__hold **spare) {
    rlock__hold **link;
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = find(h, name, len, &link);
    if (e == NULL) {
        e = *spare;
        *spare = NULL;
        *link = e;
        h->count++;
        maybe_grow(h);
    }
    if (e->owner_tid != tid || count == 1 || e->count == 0) {
        /* A new hold in Redis: it must not inherit an older hold's fate. */
        e->serial = ++h->next_serial;
        if (e->renew)
            h->renewed--;
        e->renew = 0;
        e->releasing = 0; /* a previous owner's unlock in flight is not ours */
    }
    e->owner_tid = tid;
    e->count = count;
    if (renew && !e->renew) {
        e->renew = 1;
        h->renewed++;
    }
    pthread_mutex_unlock(&h->mutex);
}

void rlock__holds_begin_release(rlock__holds *h, const char *name, size_t len, uint64_t tid) {
    pthread_mutex_lock(&h->mutex);
    rlock__hold *e = find(h, name, len, NULL);
    if (e != NULL && e->owner_tid == tid)
        e->releasing++;
    pthread_mutex_unlock(&h->mutex);
}

void rlock__holds_released(rlock__holds *h, const char *name, size_t len, uint64_t tid,
                           long long count) {
    pthread_mutex_lock(&h->mutex);
    rlock__hold **link;
    rlock__hold *e = find(h, name, len, &link);
    if (e != NULL && e->owner_tid == tid) {
        if (e->releasing > 0)
            e->releasing--;
        if (count == 0)
            unlink_entry(h, link);
        else if (count > 0)
            e->count = count;
    }
    pthread_mutex_unlock(&h->mutex);
}

void rlock__holds_thread_exited(rlock__holds *h, uint64_t tid) {
    pthread_mutex_lock(&h->mutex);
    for (size_t i = 0; i < h->nbuckets; i++) {
        rlock__hold **link = &h->buckets[i];
        while (*link != NULL) {
            if ((*link)->owner_tid == tid)
                unlink_entry(h, link);
            else
                link = &(*link)->next;
        }
    }
    pthread_mutex_unlock(&h->mutex);
}

int rlock__holds_snapshot(rlock__holds *h, rlock__buf *entries, rlock__buf *names, size_t *n) {
    int status = RLOCK_OK;
    size_t bytes = 0, k = 0;
    *n = 0;
    pthread_mutex_lock(&h->mutex);
    if (h->renewed == 0)
        goto out;
    for (size_t i = 0; i < h->nbuckets; i++)
        for (rlock__hold *e = h->buckets[i]; e != NULL; e = e->next)
            if (e->renew)
                bytes += e->name_len;
    status = rlock__buf_reserve(entries, sizeof(rlock__renewal) * h->renewed);
    if (status == RLOCK_OK)
        status = rlock__buf_reserve(names, bytes + 1);
    if (status != RLOCK_OK)
        goto out;
    rlock__renewal *r = entries->data;
    char *arena = names->data;
    bytes = 0;
    for (size_t i = 0; i < h->nbuckets; i++) {
        for (rlock__hold *e = h->buckets[i]; e != NULL; e = e->next) {
            if (!e->renew)
                continue;
            memcpy(arena + bytes, e->name, e->name_len);
            r[k].name = arena + bytes;
            r[k].name_len = e->name_len;
            r[k].owner_tid = e->owner_tid;
            r[k].serial = e->serial;
            bytes += e->name_len;
            k++;
        }
    }
    *n = k;
out:
    pthread_mutex_unlock(&h->mutex);
    return status;
}

int rlock__holds_drop_lost(rlock__holds *h, const rlock__renewal *r) {
    int dropped = 0;
    pthread_mutex_lock(&h->mutex);
    rlock__hold **link;
    rlock__hold *e = find(h, r->name, r->name_len, &link);
    /* An unlock in flight may have deleted the key itself: its reply decides. */
    if (e != NULL && e->renew && e->releasing == 0 && e->serial == r->serial &&
        e->owner_tid == r->owner_tid) {
        unlink_entry(h, link);
        dropped = 1;
    }
    pthread_mutex_unlock(&h->mutex);
    return dropped;
}

size_t rlock__holds_renewed(rlock__holds *h) {
    pthread_mutex_lock(&h->mutex);
    size_t n = h->renewed;
    pthread_mutex_unlock(&h->mutex);
    return n;
}
