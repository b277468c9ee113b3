/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sub_links.c - the subscriber thread's connections (subscriber.h): one per
 * node its channels' subscriptions go to, each with the ring of the
 * SUBSCRIBE and UNSUBSCRIBE commands it sent and still owes a reply to --
 * an error reply names no channel, so the ring's order is what pins a
 * refusal on its channel.
 *
 * Threads: the subscriber thread only; dropping a connection touches the
 * channels, under the waiters' mutex (held by the caller).
 */
#include "subscriber.h"

sub_link *rlock__sub_links(subscriber *s) {
    return s->links.data;
}

sent_command *rlock__sub_sent_at(sub_link *l, size_t i) {
    size_t cap = l->sent.cap / sizeof(sent_command);
    return (sent_command *)l->sent.data + (l->sent_head + i) % cap;
}

/* Appends to the ring, growing it (a grown ring is re-packed from its head). */
int rlock__sub_sent_push(sub_link *l, rlock__channel *ch, int subscribe) {
    size_t cap = l->sent.cap / sizeof(sent_command);
    if (l->sent_count == cap) {
        rlock__buf bigger = {NULL, 0};
        size_t new_cap = cap < 16 ? 16 : cap * 2;
        if (rlock__buf_reserve(&bigger, new_cap * sizeof(sent_command)) != RLOCK_OK)
            return RLOCK_ENOMEM;
        for (size_t i = 0; i < l->sent_count; i++)
            ((sent_command *)bigger.data)[i] = *rlock__sub_sent_at(l, i);
        rlock__buf_free(&l->sent);
        l->sent = bigger;
        l->sent_head = 0;
    }
    *rlock__sub_sent_at(l, l->sent_count++) = (sent_command){ch, subscribe};
    return RLOCK_OK;
}

/* The oldest command still waiting for its reply (NULL channel if none). */
sent_command rlock__sub_sent_pop(sub_link *l) {
    sent_command oldest = {NULL, 0};
    if (l->sent_count == 0)
        return oldest;
    oldest = *rlock__sub_sent_at(l, 0);
    l->sent_head = (l->sent_head + 1) % (l->sent.cap / sizeof(sent_command));
    l->sent_count--;
    return oldest;
}

/* ---- connections (the waiters' mutex held) ---- */

/*
 * The channel must pick its node again (moved, or its connection dropped);
 * nudge: its waiters retry at once (an unlock may have gone unheard). Its
 * `pending` count stays: it counts the entries of the `sent` queues that
 * point at it, and keeps it from being freed while any does.
 */
void rlock__sub_unroute(rlock__channel *ch, int nudge) {
    ch->resubscribe |= ch->subscribe_sent;
    ch->node = NULL;
    ch->subscribe_sent = 0;
    ch->confirmed = 0;
    ch->refused = 0; /* asked again on the next connection */
    if (nudge)
        rlock__channel_nudge(ch);
}

/* Forgets the replies l's connection still owed (it is gone). */
static void discard_sent(sub_link *l) {
    for (sent_command c = rlock__sub_sent_pop(l); c.channel != NULL; c = rlock__sub_sent_pop(l))
        if (c.channel->pending > 0)
            c.channel->pending--;
}

/* Drops l's connection (lost: it failed, else a new master took over). */
void rlock__sub_drop_link(rlock__waiters *ps, subscriber *s, sub_link *l, int lost) {
    if (l->ctx != NULL) {
        rlock__conn_free(l->ctx);
        if (lost)
            rlock__link_down(s->engine->events, RLOCK_EIO, "subscriber connection lost");
    }
    l->ctx = NULL;
    discard_sent(l);
    for (rlock__channel *ch = ps->channels; ch != NULL; ch = ch->next)
        if (ch->node == l->node)
            rlock__sub_unroute(ch, 1);
    rlock__channels_reap(ps);
    l->next_connect_ms = rlock__now_ms();
}

sub_link *rlock__sub_find_link(subscriber *s, const rlock__node *node) {
    for (size_t i = 0; i < s->nlinks; i++)
        if (rlock__sub_links(s)[i].node == node)
            return &rlock__sub_links(s)[i];
    return NULL;
}

sub_link *rlock__sub_add_link(subscriber *s, rlock__node *node) {
    if (rlock__buf_reserve(&s->links, (s->nlinks + 1) * sizeof(sub_link)) != RLOCK_OK)
        return NULL;
    sub_link *l = &rlock__sub_links(s)[s->nlinks++];
    *l = (sub_link){.node = node, .backoff_ms = BACKOFF_MIN_MS, .next_connect_ms = rlock__now_ms(),
                    .linger_until_ms = RLOCK__NO_DEADLINE};
    return l;
}

/* Closes a connection no channel needs (its slot in the array goes to the last one). */
void rlock__sub_remove_link(subscriber *s, sub_link *l) {
    if (l->ctx != NULL)
        rlock__conn_free(l->ctx);
    discard_sent(l);
    rlock__buf_free(&l->sent);
    *l = rlock__sub_links(s)[--s->nlinks];
}
