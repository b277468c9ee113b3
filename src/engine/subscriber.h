/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * subscriber.h - PRIVATE to the subscriber thread's two files: subscriber.c
 * (the thread: routing channels, sending, reading, reconnecting) and
 * sub_links.c (its connections, one per node, each with the queue of
 * commands still owed a reply). The rest of the engine sees the subscriber
 * through channels.h and engine.h only.
 *
 * Threads: the subscriber thread only; everything below is its own.
 */
#ifndef RLOCK_ENGINE_SUBSCRIBER_H
#define RLOCK_ENGINE_SUBSCRIBER_H

#include "channels.h"

#define BACKOFF_MIN_MS 50

typedef struct sent_command {
    rlock__channel *channel; /* kept alive by its pending count */
    int subscribe;           /* SUBSCRIBE, else UNSUBSCRIBE */
} sent_command;

/* One connection of the thread: to the node some channels' subscriptions go to. */
typedef struct sub_link {
    rlock__node *node; /* the net's (lives as long as it) */
    redisContext *ctx; /* NULL = not connected */
    rlock__buf sent;   /* sent_command ring, oldest at sent_head */
    size_t sent_head;
    size_t sent_count;
    int backoff_ms;
    int64_t next_connect_ms;
    int needed; /* channels and replies due use it (counted each pass) */
    int64_t linger_until_ms; /* needed by none: closed from then on (RLOCK__NO_DEADLINE
                                while needed) */
} sub_link;

/* The subscriber thread's own state; only it touches this. */
typedef struct subscriber {
    rlock__engine *engine;
    rlock__buf links; /* sub_link[nlinks] */
    size_t nlinks;
    int64_t reroute_after_ms; /* channels redirected wait until then to pick a node */
    int reroute_backoff_ms;   /* grows while subscriptions are answered "try again" */
    rlock__buf pollfds;       /* struct pollfd[1 + nlinks], rebuilt for each poll */
    rlock__buf polled;        /* rlock__node *[nlinks]: whose socket each pollfd is */
} subscriber;

/* The thread's connections, s->nlinks of them. */
sub_link *rlock__sub_links(subscriber *s);
/* The i-th command l still owes a reply to, oldest first (i < l->sent_count). */
sent_command *rlock__sub_sent_at(sub_link *l, size_t i);
/* Notes a command sent on l; RLOCK_ENOMEM if the queue cannot grow. */
int rlock__sub_sent_push(sub_link *l, rlock__channel *ch, int subscribe);
/* The oldest command still waiting for its reply (NULL channel if none). */
sent_command rlock__sub_sent_pop(sub_link *l);
/*
 * The channel must pick its node again (moved, or its connection dropped);
 * nudge: its waiters retry at once (the waiters' mutex held).
 */
void rlock__sub_unroute(rlock__channel *ch, int nudge);
/* Drops l's connection (lost: it failed, else a new master took over; mutex held). */
void rlock__sub_drop_link(rlock__waiters *ps, subscriber *s, sub_link *l, int lost);
/* The connection to node, or NULL. */
sub_link *rlock__sub_find_link(subscriber *s, const rlock__node *node);
/* A new connection to node, not connected yet; NULL if out of memory. */
sub_link *rlock__sub_add_link(subscriber *s, rlock__node *node);
/* Closes a connection no channel needs (its slot in the array goes to the last one). */
void rlock__sub_remove_link(subscriber *s, sub_link *l);

#endif /* RLOCK_ENGINE_SUBSCRIBER_H */
