/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * channels.h - the waiting machinery's own parts, shared by the subscriber
 * thread (subscriber.c) and the waiting threads (waiters.c); the lock kinds
 * do not see it. Everything here runs with the waiters' mutex
 * (rlock__waiters.worker.mutex) held.
 */
#ifndef RLOCK_CHANNELS_H
#define RLOCK_CHANNELS_H

#include "internal.h"

/* One Redis channel that waiters of this client sleep on (one per lock channel). */
struct rlock__channel {
    rlock__channel *next;
    rlock__waiter *queue;   /* joined waiters, oldest first (not owned: on their stacks) */
    int waiters;            /* threads between join and leave */
    int handoffs_in_row;    /* offers since this client last released to everybody */
    int subscribe_sent;     /* SUBSCRIBE sent on this connection, no UNSUBSCRIBE since */
    int pending;            /* SUBSCRIBE/UNSUBSCRIBE sent, reply not yet read */
    int confirmed;          /* subscribed, nothing pending */
    int refused;            /* Redis refused SUBSCRIBE on this connection: waiters poll */
    int resubscribe;        /* its subscription was dropped (connection lost, node
                               changed): its next SUBSCRIBE is a resubscription */
    rlock__node *node;      /* where its subscription goes (the net's choice); NULL: to pick */
    unsigned epoch;         /* bumped to make sleeping waiters retry at once */
    int64_t linger_until_ms; /* no waiter, still subscribed: unsubscribed from then on */
    pthread_cond_t ready;   /* joiners wait here for confirmation */
    size_t len;
    char name[];
};

/* How often a waiter on a refused channel tries again. */
#define RLOCK__REFUSED_POLL_MS 100

/*
 * How long a subscription outlives its last waiter when that waiter leaves
 * without the lock (timed out, cancelled, failed): the lock is still held
 * elsewhere and likely waited on again, and the next wait finds its channel
 * subscribed (no SUBSCRIBE round trip). A last waiter that leaves *with* the
 * lock ends the subscription at once: lingering, this client would hear its
 * own unlock's message, a wake-up of the subscriber thread on the hand-off's
 * critical path (docs/design/04-acquiring.md). The subscriber's connection
 * lingers as long after its last channel (subscriber.c), so the next wait
 * needs no new connection (nor TLS handshake).
 */
#define RLOCK__LINGER_MS 200

/* Whether ch is subscribed for nobody, and still lingers. */
int rlock__channel_lingers(const rlock__channel *ch, int64_t now_ms);

rlock__channel *rlock__channel_find(rlock__waiters *ws, const char *name, size_t len);
/* Finds the channel, or makes and links a new one; NULL if out of memory. */
rlock__channel *rlock__channel_get(rlock__waiters *ws, const char *name, size_t len);
/* Frees channels nobody waits on and Redis no longer knows about. */
void rlock__channels_reap(rlock__waiters *ws);
/* Frees every channel (close, no thread left). */
void rlock__channels_free(rlock__waiters *ws);
int rlock__channels_have_waiters(const rlock__waiters *ws);
/* Wakes every waiter of ch and every joiner. */
void rlock__channel_wake_all(rlock__channel *ch);
/* Makes every waiter retry now (after a reconnect or a resubscription). */
void rlock__channel_nudge(rlock__channel *ch);
void rlock__channel_enqueue(rlock__channel *ch, rlock__waiter *w);
void rlock__channel_dequeue(rlock__channel *ch, rlock__waiter *w);
/*
 * An unlock message on ch: one permit for each lock waited on through it
 * (the message does not say which of them was unlocked), or, for "1"
 * (Redisson's read unlock), one for every waiter.
 */
void rlock__channel_unlocked(rlock__channel *ch, const redisReply *payload);
/* A waiter leaves with a wake-up it did not use: pass it to the next in line. */
void rlock__channel_pass_permit(rlock__channel *ch, const rlock__waiter *leaving);
/* Wakes the subscriber thread (its subscription set changed, or close). */
void rlock__wake_subscriber(rlock__waiters *ws);
/* Frees what the waiters' machinery still has (after the thread stopped). */
void rlock__waiters_destroy(rlock__engine *e);
/* 1 if w waits for lock name. */
int rlock__waiter_is_for(const rlock__waiter *w, const char *name, size_t len);

#endif /* RLOCK_CHANNELS_H */
