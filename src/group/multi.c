/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * multi.c - a multi-lock: several locks (of any clients, of any kind) taken
 * together for one owner, all or nothing, with the wait and lease of a
 * single lock; and no deadlock between multi-locks over overlapping sets,
 * whatever order their callers listed the locks in.
 *
 * The order. rlock__multi_order sorts the members the same way in every
 * process: by name bytes, then -- for one name on several servers, a
 * "group" -- by where the name is served ("host:port/db"), then by client
 * id. Acquisition walks that order and waits for a member only while the
 * owner holds nothing of its group: earlier groups only. A member found busy
 * while another of its group is held is not waited for: the group's holds
 * taken so far are given back, the busy member is waited for alone, and the
 * rest of the group is tried again. So every owner that waits holds only
 * members of groups before the one it waits in, and along any chain of
 * "waits for the holder of" the group strictly grows: no cycle, no deadlock
 * (docs/design.md section 12, with the argument in full).
 *
 * The first attempt is one fan-out over every member (group.c) when they
 * are all plain reentrant locks and no thread of their clients waits for
 * one: an uncontended multi-lock costs one round trip. If it does not get
 * every member, what it took is given back at once and the walk above runs.
 *
 * A fixed lease: members the walk waits for are taken as watchdog locks, so
 * none runs out while a later one is waited for; once all are held, one
 * fan-out sets every member's TTL to the lease (rlock__fan_relet), so all
 * run out lease_ms after the call, as a single lock's would. A member the
 * owner already held with the watchdog stays renewed (a re-entry never
 * stops a renewal, as for a single lock).
 *
 * Threads: application threads, inside the API layer's call guards.
 */
#include <stdlib.h>
#include <string.h>

#include "group.h"

/* ---- the order ----------------------------------------------------------------- */

typedef struct ordered {
    rlock *lock;
    char where[RLOCK__WHERE_MAX + 16]; /* "host:port/db" of the name's server */
} ordered;

static int same_name(const rlock *a, const rlock *b) {
    return a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0;
}

static int compare(const void *pa, const void *pb) {
    const ordered *a = pa, *b = pb;
    size_t len = a->lock->name_len < b->lock->name_len ? a->lock->name_len : b->lock->name_len;
    int c = memcmp(a->lock->name, b->lock->name, len);
    if (c != 0)
        return c;
    if (a->lock->name_len != b->lock->name_len)
        return a->lock->name_len < b->lock->name_len ? -1 : 1;
    c = strcmp(a->where, b->where);
    return c != 0 ? c : strcmp(a->lock->client_id, b->lock->client_id);
}

int rlock__multi_order(rlock **locks, size_t n) {
    ordered *o = rlock__malloc(n * sizeof(*o));
    int status = RLOCK_OK;
    if (o == NULL)
        return RLOCK_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        o[i].lock = locks[i];
        rlock__net_where(locks[i]->engine->net, locks[i]->name, locks[i]->name_len, o[i].where,
                         sizeof(o[i].where));
    }
    qsort(o, n, sizeof(*o), compare);
    for (size_t i = 1; i < n && status == RLOCK_OK; i++) {
        const rlock *a = o[i - 1].lock, *b = o[i].lock;
        if (same_name(a, b) && (a->client == b->client || strcmp(o[i - 1].where, o[i].where) == 0))
            status = rlock__fail(RLOCK_EINVAL, 0, "the lock '%.200s' at %s is given twice (the "
                                                  "same client, or two clients of one server): "
                                                  "one Redis key can be held only once",
                                 a->name, o[i].where);
    }
    for (size_t i = 0; i < n; i++)
        locks[i] = o[i].lock;
    rlock__free(o);
    return status;
}

/* ---- acquiring ------------------------------------------------------------------- */

/* One multi-lock acquisition. */
typedef struct multi_call {
    rlock *const *locks;        /* the canonical order */
    size_t n;
    const rlock__owner *owner;
    unsigned char *held;        /* owned: held[i] = this call took one hold of locks[i];
                                   then renewed_before[i], in the same block */
    unsigned char *renewed_before; /* locks[i] was renewed by the watchdog before the call */
    const rlock__call *call;    /* the API's cancel state and cleanup */
} multi_call;

/* Gives back the holds this call took of locks[from, to), last first. Best effort. */
static void give_back(multi_call *mc, size_t from, size_t to) {
    rlock__error_detail saved;
    rlock__error_save(&saved); /* the caller's error stands */
    for (size_t i = to; i-- > from;)
        if (mc->held[i]) {
            rlock__release(mc->locks[i], mc->owner);
            mc->held[i] = 0;
        }
    rlock__error_restore(&saved);
}

/* The thread was cancelled while it waited for a member: all or nothing. */
static void cancelled(void *arg) {
    multi_call *mc = arg;
    give_back(mc, 0, mc->n);
    rlock__free(mc->held);
    mc->call->on_cancel(mc->call->arg);
}

/* First member of i's group, and the end of that group. */
static size_t group_start(const multi_call *mc, size_t i) {
    while (i > 0 && same_name(mc->locks[i - 1], mc->locks[i]))
        i--;
    return i;
}

static size_t group_end(const multi_call *mc, size_t g) {
    size_t e = g + 1;
    while (e < mc->n && same_name(mc->locks[g], mc->locks[e]))
        e++;
    return e;
}

/* Whether this call holds a member of group [g, end) other than i. */
static int group_held(const multi_call *mc, size_t g, size_t end, size_t i) {
    for (size_t j = g; j < end; j++)
        if (j != i && mc->held[j])
            return 1;
    return 0;
}

/* What is left of the wait: -1 (none set), else >= 0. */
static long long time_left(long long wait_ms, int64_t deadline_ms) {
    if (wait_ms < 0)
        return -1;
    int64_t left = deadline_ms - rlock__now_ms();
    return left > 0 ? left : 0;
}

/*
 * Walks the canonical order: each member not yet held is waited for while
 * the call holds nothing of its group, else tried once; a busy one then
 * makes the call give its group back and wait for it alone.
 */
static int acquire_in_order(multi_call *mc, long long wait_ms, long long lease_ms,
                            int64_t deadline_ms) {
    rlock__call member_call = {.member = 1, .cancel_state = mc->call->cancel_state,
                               .on_cancel = cancelled, .arg = mc};
    for (size_t i = 0; i < mc->n; i++) {
        if (mc->held[i])
            continue;
        size_t taken = i, g = group_start(mc, i), end = group_end(mc, g);
        int alone = !group_held(mc, g, end, i);
        int status = rlock__acquire(mc->locks[i], mc->owner,
                                    alone ? time_left(wait_ms, deadline_ms) : 0, lease_ms,
                                    &member_call);
        if (status == RLOCK_BUSY && !alone && time_left(wait_ms, deadline_ms) != 0) {
            give_back(mc, g, end);
            status = rlock__acquire(mc->locks[i], mc->owner, time_left(wait_ms, deadline_ms),
                                    lease_ms, &member_call);
            i = g - 1; /* then the group again from its start (unsigned: g 0 wraps to 0) */
        }
        if (status != RLOCK_OK) {
            give_back(mc, 0, mc->n);
            return status;
        }
        mc->held[taken] = 1;
    }
    return RLOCK_OK;
}

/* Whether the first attempt can be one fan-out: plain locks, nobody of ours waiting. */
static int fannable(const multi_call *mc) {
    for (size_t i = 0; i < mc->n; i++) {
        rlock *lock = mc->locks[i];
        if (lock->kind != &rlock__reentrant ||
            rlock__wait_queued(lock->engine, lock->channel, lock->channel_len, lock->name,
                               lock->name_len))
            return 0;
    }
    return 1;
}

/*
 * The first attempt: every member at once. RLOCK_OK (all held, booked),
 * RLOCK_ELOST (a member's hold was lost earlier: told now, nothing taken),
 * RLOCK_BUSY (a member is another owner's), or RLOCK_EIO (go on in order:
 * a member could not be tried, or not like this).
 */
static int acquire_at_once(multi_call *mc, long long lease_ms) {
    rlock__fanned *m = fannable(mc) ? rlock__calloc(mc->n, sizeof(*m)) : NULL;
    int verdict = RLOCK_EIO;
    if (m == NULL)
        return verdict;
    for (size_t i = 0; i < mc->n; i++)
        m[i].lock = mc->locks[i];
    int64_t deadline_ms = rlock__deadline_after(rlock__fan_timeout(mc->locks, mc->n));
    int status = rlock__fan_acquire(m, mc->n, mc->owner, lease_ms, 0, deadline_ms, NULL);
    size_t held = 0;
    for (size_t i = 0; i < mc->n && status == RLOCK_OK; i++) {
        held += m[i].status == RLOCK_OK;
        if (m[i].status == RLOCK_ELOST)
            verdict = rlock__fail(RLOCK_ELOST, 0, "multi-lock: the calling thread's hold of "
                                                  "'%.200s' was lost (told now); nothing taken",
                                  m[i].lock->name);
        else if (m[i].status == RLOCK_BUSY && verdict != RLOCK_ELOST)
            verdict = RLOCK_BUSY;
    }
    if (status == RLOCK_OK && held == mc->n) {
        rlock__fan_keep(m, mc->n, mc->owner, lease_ms, 0); /* the first attempt */
        verdict = RLOCK_OK;
    } else {
        rlock__fan_undo(m, mc->n, mc->owner, rlock__deadline_after(rlock__fan_timeout(mc->locks,
                                                                                      mc->n)));
    }
    rlock__free(m);
    return verdict;
}

/*
 * A fixed lease after the walk: the members it took as watchdog locks get
 * the lease (those renewed before this call stay renewed). On failure
 * everything this call took is given back.
 */
static int set_lease(multi_call *mc, long long lease_ms) {
    rlock **relet = rlock__malloc(mc->n * sizeof(*relet));
    size_t k = 0;
    int status = RLOCK_ENOMEM;
    if (relet != NULL) {
        for (size_t i = 0; i < mc->n; i++)
            if (!mc->renewed_before[i])
                relet[k++] = mc->locks[i];
        status = k == 0 ? RLOCK_OK
                        : rlock__fan_relet(relet, k, mc->owner, lease_ms,
                                           rlock__deadline_after(rlock__fan_timeout(relet, k)));
    }
    rlock__free(relet);
    if (status != RLOCK_OK)
        give_back(mc, 0, mc->n);
    return status;
}

int rlock__multi_acquire(rlock *const *locks, size_t n, const rlock__owner *owner,
                         long long wait_ms, long long lease_ms, const rlock__call *call) {
    int64_t deadline_ms = rlock__deadline_after(wait_ms);
    multi_call mc = {.locks = locks, .n = n, .owner = owner, .call = call,
                     .held = rlock__calloc(2 * n, 1)};
    if (mc.held == NULL)
        return RLOCK_ENOMEM;
    mc.renewed_before = mc.held + n;
    int status = acquire_at_once(&mc, lease_ms);
    if (status == RLOCK_EIO || (status == RLOCK_BUSY && wait_ms != 0)) {
        /* Waited-for members must not run out while later ones are waited for. */
        int relet = lease_ms != RLOCK_LEASE_WATCHDOG && n > 1;
        for (size_t i = 0; i < n; i++) {
            rlock__hold_key key = rlock__hold_of(locks[i], owner);
            mc.renewed_before[i] = rlock__holds_renewing(&locks[i]->engine->holds, &key);
        }
        status = acquire_in_order(&mc, wait_ms, relet ? RLOCK_LEASE_WATCHDOG : lease_ms,
                                  deadline_ms);
        if (status == RLOCK_OK && relet)
            status = set_lease(&mc, lease_ms);
    }
    rlock__free(mc.held);
    return status;
}

int rlock__multi_release(rlock *const *locks, size_t n, const rlock__owner *owner) {
    rlock__error_detail first_error;
    int first = RLOCK_OK;
    for (size_t i = n; i-- > 0;) {
        int status = rlock__release(locks[i], owner);
        if (status != RLOCK_OK && first == RLOCK_OK) {
            first = status;
            rlock__error_save(&first_error);
        }
    }
    if (first != RLOCK_OK)
        rlock__error_restore(&first_error);
    return first;
}
