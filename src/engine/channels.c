/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * channels.c - the channels waiters sleep on, and who an unlock wakes.
 *
 * All waiting threads of the client share one channel object per lock
 * channel; it is subscribed while it has waiters. Each unlock message ("0")
 * gives one permit to one waiter of this process for each lock waited on
 * through the channel (no thundering herd) -- the oldest asleep, else the
 * oldest awake, which acts on it when it comes back, so a message that
 * arrives between a waiter's failed attempt and its sleep is not lost; "1"
 * (Redisson's read-unlock) gives every waiter one. Each waiter sleeps on its
 * own condition variable, so exactly the chosen one wakes; a lone sleeper
 * finds its next attempt already sent (the lock kind's send_ahead), so the
 * round trip overlaps its wake-up.
 *
 * Redisson's naming gives locks "X" and "{X}" one channel: waiters are told
 * apart by lock name, so one lock's wake-up (or hand-off) never goes to the
 * other's.
 *
 * Threads: the subscriber thread (messages) and waiting threads (join,
 * leave). Locking: every function here runs with the waiters' mutex held.
 */
#include <string.h>

#include "channels.h"

rlock__channel *rlock__channel_find(rlock__waiters *ws, const char *name, size_t len) {
    for (rlock__channel *ch = ws->channels; ch != NULL; ch = ch->next)
        if (ch->len == len && memcmp(ch->name, name, len) == 0)
            return ch;
    return NULL;
}

static rlock__channel *new_channel(const char *name, size_t len) {
    rlock__channel *ch = rlock__malloc(sizeof(*ch) + len);
    if (ch == NULL)
        return NULL;
    memset(ch, 0, sizeof(*ch));
    if (rlock__cond_init(&ch->ready) != 0) {
        rlock__free(ch);
        return NULL;
    }
    ch->len = len;
    memcpy(ch->name, name, len);
    return ch;
}

static void free_channel(rlock__channel *ch) {
    pthread_cond_destroy(&ch->ready);
    rlock__free(ch);
}

rlock__channel *rlock__channel_get(rlock__waiters *ws, const char *name, size_t len) {
    rlock__channel *ch = rlock__channel_find(ws, name, len);
    if (ch != NULL || (ch = new_channel(name, len)) == NULL)
        return ch;
    ch->next = ws->channels;
    ws->channels = ch;
    return ch;
}

void rlock__channels_reap(rlock__waiters *ws) {
    rlock__channel **link = &ws->channels;
    while (*link != NULL) {
        rlock__channel *ch = *link;
        if (ch->waiters == 0 && !ch->subscribe_sent && ch->pending == 0) {
            *link = ch->next;
            free_channel(ch);
        } else {
            link = &ch->next;
        }
    }
}

void rlock__channels_free(rlock__waiters *ws) {
    while (ws->channels != NULL) {
        rlock__channel *ch = ws->channels;
        ws->channels = ch->next;
        free_channel(ch);
    }
}

int rlock__channel_lingers(const rlock__channel *ch, int64_t now_ms) {
    return ch->waiters == 0 && ch->subscribe_sent && now_ms < ch->linger_until_ms;
}

int rlock__channels_have_waiters(const rlock__waiters *ws) {
    for (const rlock__channel *ch = ws->channels; ch != NULL; ch = ch->next)
        if (ch->waiters > 0)
            return 1;
    return 0;
}

void rlock__channel_wake_all(rlock__channel *ch) {
    for (rlock__waiter *w = ch->queue; w != NULL; w = w->next)
        pthread_cond_signal(&w->wakeup);
    pthread_cond_broadcast(&ch->ready);
}

/*
 * Redisson's naming gives locks "X" and "{X}" one channel: its waiters are
 * told apart by lock name, so one lock's wake-up never goes to the other's.
 */
int rlock__waiter_is_for(const rlock__waiter *w, const char *name, size_t len) {
    return w->name_len == len && memcmp(w->name, name, len) == 0;
}

static int same_lock(const rlock__waiter *a, const rlock__waiter *b) {
    return rlock__waiter_is_for(a, b->name, b->name_len);
}

/*
 * Who gets the permit of an unlock of like's lock: its oldest sleeping
 * waiter that is woken first (a read-write lock's writer), else its oldest
 * sleeping waiter, else its oldest waiter awake (whose attempt in flight may
 * have run before the unlock: it tries again when it comes back), skipping
 * waiters that have a permit already or are being handed the lock. NULL if
 * none.
 */
static rlock__waiter *permit_target(rlock__channel *ch, const rlock__waiter *like) {
    rlock__waiter *sleeping = NULL, *awake = NULL;
    for (rlock__waiter *w = ch->queue; w != NULL; w = w->next) {
        if (!same_lock(w, like) || w->permit || w->handoff != RLOCK__HANDOFF_NONE)
            continue;
        if (w->sleeping && w->ops->woken_first)
            return w;
        if (w->sleeping && sleeping == NULL)
            sleeping = w;
        else if (!w->sleeping && awake == NULL)
            awake = w;
    }
    return sleeping != NULL ? sleeping : awake;
}

/*
 * Gives w a permit and wakes it if it sleeps; it no longer counts as asleep,
 * so the next permit goes to the next sleeper and no hand-off is offered to
 * it. A lone sleeper gets its ACQUIRE sent ahead instead of a permit.
 */
static void give_permit(rlock__channel *ch, rlock__waiter *w, int send_ahead) {
    if (!w->sleeping) {
        w->permit = 1; /* acted on when it comes back to sleep */
        return;
    }
    /*
     * The ACQUIRE sent ahead *is* the attempt this unlock allows, made now:
     * it takes no permit, so an unlock arriving before the waiter runs gives
     * one and makes it try again (its early attempt may have run before that
     * unlock). Only for a lone waiter: when several threads here wait,
     * hand-offs carry the load, and early attempts from every process would
     * let the first subscriber Redis writes to win every race
     * (docs/design.md section 4).
     */
    w->sent_ms = rlock__now_ms();
    if (!(send_ahead && ch->waiters == 1 && w->ops->send_ahead != NULL &&
          (w->ahead = w->ops->send_ahead(w)) != NULL))
        w->permit = 1;
    w->sleeping = 0;
    pthread_cond_signal(&w->wakeup);
}

/* 1 if no waiter before w in the queue waits for w's lock. */
static int first_of_its_lock(const rlock__channel *ch, const rlock__waiter *w) {
    for (const rlock__waiter *v = ch->queue; v != w; v = v->next)
        if (same_lock(v, w))
            return 0;
    return 1;
}

void rlock__channel_nudge(rlock__channel *ch) {
    ch->epoch++;
    rlock__channel_wake_all(ch);
}

void rlock__channel_unlocked(rlock__channel *ch, const redisReply *payload) {
    int everybody = payload->type == REDIS_REPLY_STRING && payload->len == 1 &&
                    payload->str[0] == '1';
    for (rlock__waiter *w = ch->queue; w != NULL; w = w->next) {
        if (everybody) {
            if (!w->permit && w->handoff == RLOCK__HANDOFF_NONE)
                give_permit(ch, w, 0);
        } else if (first_of_its_lock(ch, w)) {
            rlock__waiter *target = permit_target(ch, w);
            if (target != NULL)
                give_permit(ch, target, 1);
        }
    }
}


void rlock__channel_pass_permit(rlock__channel *ch, const rlock__waiter *leaving) {
    rlock__waiter *target = permit_target(ch, leaving);
    if (target != NULL)
        give_permit(ch, target, 0);
}

void rlock__channel_enqueue(rlock__channel *ch, rlock__waiter *w) {
    rlock__waiter **link = &ch->queue;
    while (*link != NULL)
        link = &(*link)->next;
    w->next = NULL;
    *link = w;
}

void rlock__channel_dequeue(rlock__channel *ch, rlock__waiter *w) {
    for (rlock__waiter **link = &ch->queue; *link != NULL; link = &(*link)->next)
        if (*link == w) {
            *link = w->next;
            return;
        }
}
