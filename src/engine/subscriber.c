/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * subscriber.c - the subscriber thread: one per client, owning the
 * connections its waiters' subscriptions need (channels.c, waiters.c) --
 * one per node they go to: on a Cluster, one per master that owns a channel
 * waited on (the master of the lock's slot: sharded subscriptions must go
 * there; classic ones hear the message there without a cluster-bus hop).
 * Connections are made lazily, when a thread has to wait, and closed
 * RLOCK__LINGER_MS after no channel needs them any more. A subscription
 * whose last waiter left without the lock outlives it by as much
 * (channels.h): a lock waited on again soon finds it there, and its
 * waiters' leaving costs no wake-up of this thread. One whose last waiter
 * left with the lock is dropped at once: this client would only hear its
 * own unlock.
 *
 * Trouble: when a connection drops, its channels are marked unsubscribed
 * and their waiters retry at once; the thread reconnects with capped,
 * jittered exponential backoff, subscribes again every channel that still
 * has waiters, and wakes them once more when confirmed. Meanwhile waiters
 * still progress: each sleep is bounded by the lock's TTL. A sharded
 * channel whose slot moves is dropped by the server (an unsolicited
 * `sunsubscribe`) or answered MOVED: the route refreshes, the channel is
 * subscribed again where its slot lives now, and its waiters retry at once.
 *
 * Refused subscriptions: an ACL may forbid SUBSCRIBE (or the channel). The
 * error reply names no channel, so each connection keeps the order of what
 * it sent (its `sent` queue) and pins the refusal on the command it
 * answers: the channel is marked refused, an RLOCK_EVENT_SUBSCRIBE_REFUSED
 * is posted, and its waiters poll every RLOCK__REFUSED_POLL_MS instead of
 * sleeping until the holder's TTL. A refused channel is not asked again on
 * this connection, and it is freed like any other once its last waiter
 * leaves.
 *
 * The thread sleeps in poll() on its sockets and a wake-up pipe, never in a
 * socket timeout (a timed-out hiredis 0.14 context is broken for good).
 *
 * Threads: the subscriber thread (a core worker); close stops it. Locking:
 * the worker's mutex (the waiters' mutex) guards the channels and the
 * waiters' shared fields; the connections and their `sent` rings are the
 * thread's own. It never holds the mutex during connect or poll.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "subscriber.h"

#define BACKOFF_MAX_MS 2000
#define REROUTE_PAUSE_MS 100 /* after ASK or a dropped subscription, before choosing again */
#define CONNECT_MAX_MS 1000  /* a dead node must not keep the others' messages waiting long */

/* ---- the subscriber thread (the waiters' mutex held unless said otherwise) ---- */

/*
 * Gives each channel with waiters a node (the net's choice) and a connection to
 * it; counts what each connection is needed for, and closes the ones nobody
 * needs any more.
 */
static void route_channels(rlock__waiters *ps, subscriber *s) {
    int64_t now = rlock__now_ms();
    int may_route = now >= s->reroute_after_ms;
    for (size_t i = 0; i < s->nlinks; i++) /* replies still due keep it too */
        rlock__sub_links(s)[i].needed = (int)rlock__sub_links(s)[i].sent_count;
    for (rlock__channel *ch = ps->channels; ch != NULL; ch = ch->next) {
        if (ch->node == NULL && ch->waiters > 0 && may_route) {
            ch->node = rlock__net_subscribe_node(s->engine->net, ch->name, ch->len);
            ps->dirty = 1;
        }
        sub_link *l = ch->node != NULL ? rlock__sub_find_link(s, ch->node) : NULL;
        if (ch->node != NULL && l == NULL && (l = rlock__sub_add_link(s, ch->node)) == NULL)
            ch->node = NULL; /* out of memory: waiters poll by TTL; try again next pass */
        if (l != NULL && (ch->waiters > 0 || ch->subscribe_sent || ch->pending > 0))
            l->needed++;
    }
    /* A connection lingers from the first pass that finds it needed by none (its last
     * UNSUBSCRIBE answered), as a subscription does (channels.h): the next wait needs none. */
    for (size_t i = 0; i < s->nlinks;) {
        sub_link *l = &rlock__sub_links(s)[i];
        if (l->needed > 0) {
            l->linger_until_ms = RLOCK__NO_DEADLINE;
            i++;
            continue;
        }
        if (l->linger_until_ms == RLOCK__NO_DEADLINE)
            l->linger_until_ms = now + RLOCK__LINGER_MS;
        if (l->ctx == NULL || now >= l->linger_until_ms)
            rlock__sub_remove_link(s, l);
        else
            i++;
    }
}

static int send_command(sub_link *l, const char *verb, const rlock__channel *ch) {
    const char *argv[] = {verb, ch->name};
    size_t argvlen[] = {strlen(verb), ch->len};
    return redisAppendCommandArgv(l->ctx, 2, argv, argvlen) == REDIS_OK ? RLOCK_OK : RLOCK_EIO;
}

/* Counts (and logs) the channels subscribed again on l's connection. */
static void resubscribed(subscriber *s, sub_link *l, int n) {
    char at[RLOCK__WHERE_MAX];
    rlock__events *ev = s->engine->events;
    if (n == 0)
        return;
    rlock__count(&ev->stats, RLOCK__COUNT_RESUBSCRIPTIONS, (unsigned long long)n);
    rlock__log(ev, RLOCK_LOG_INFO, "RESUBSCRIBED", " channels=%d at=%s", n,
               rlock__endpoint_str(rlock__net_node_endpoint(l->node), at, sizeof(at)));
}

/* Sends SUBSCRIBE/UNSUBSCRIBE (S- when sharded) for l's channels whose wish changed. */
static int send_changes(rlock__waiters *ps, subscriber *s, sub_link *l) {
    int sharded = rlock__net_sharded(s->engine->net), again = 0;
    int64_t now = rlock__now_ms();
    for (rlock__channel *ch = ps->channels; ch != NULL; ch = ch->next) {
        int want = (ch->waiters > 0 || rlock__channel_lingers(ch, now)) && !ch->refused;
        if (ch->node != l->node || want == ch->subscribe_sent)
            continue;
        const char *verb = want ? (sharded ? "SSUBSCRIBE" : "SUBSCRIBE")
                                : (sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE");
        if (rlock__sub_sent_push(l, ch, want) != RLOCK_OK || send_command(l, verb, ch) != RLOCK_OK)
            return RLOCK_EIO;
        ch->subscribe_sent = want;
        ch->pending++;
        ch->confirmed = 0;
        again += want && ch->resubscribe;
        ch->resubscribe = 0;
    }
    resubscribed(s, l, again);
    /* A few small commands: the socket buffer takes them at once. */
    return rlock__io_flush(l->ctx, rlock__deadline_after(s->engine->settings->command_timeout_ms));
}

/* A back-off pause doubled, up to BACKOFF_MAX_MS. */
static int doubled(int pause_ms) {
    return pause_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : pause_ms * 2;
}

/*
 * A subscription answered "not here" (MOVED: the route patches its table,
 * choose again now; ASK: after a pause) or "not now" (CLUSTERDOWN,
 * TRYAGAIN, LOADING...: after a pause that doubles while it lasts; its
 * waiters were nudged the first time, their sleeps are TTL-bounded anyway).
 */
static void reroute_later(subscriber *s, sub_link *l, rlock__channel *ch, const redisReply *r) {
    int moved = strncmp(r->str, "MOVED ", 6) == 0, again = !moved && strncmp(r->str, "ASK ", 4);
    rlock__net_subscription_moved(s->engine->net, l->node, r);
    rlock__sub_unroute(ch, !again || s->reroute_backoff_ms == 0);
    if (!again)
        s->reroute_backoff_ms = 0;
    else
        s->reroute_backoff_ms =
            s->reroute_backoff_ms == 0 ? REROUTE_PAUSE_MS : doubled(s->reroute_backoff_ms);
    s->reroute_after_ms = rlock__now_ms() + (moved   ? 0
                                             : again ? s->reroute_backoff_ms
                                                     : REROUTE_PAUSE_MS);
}

/*
 * An error reply answers the oldest command sent: a redirect or "try
 * again" sends the channel to choose its node again; anything else is a
 * refusal (ACL): its waiters poll.
 */
static void on_error_reply(rlock__waiters *ps, subscriber *s, sub_link *l, const redisReply *r) {
    sent_command cmd = rlock__sub_sent_pop(l);
    rlock__channel *ch = cmd.channel;
    if (ch == NULL)
        return;
    if (ch->pending > 0)
        ch->pending--;
    if (!cmd.subscribe || ch->node != l->node) {
        /* an unsubscribe, or a subscription since moved elsewhere: nothing to redo */
    } else if (rlock__is_redirect_or_retry(r)) {
        reroute_later(s, l, ch, r);
    } else {
        ch->subscribe_sent = 0;
        ch->refused = 1;
        ch->confirmed = 0;
        rlock__channel_nudge(ch); /* joiners stop waiting for a confirmation that will not come */
        /* Named by lock, as every event: the first waiter's (X and {X} share a channel). */
        const char *name = ch->queue != NULL ? ch->queue->name : ch->name;
        size_t len = ch->queue != NULL ? ch->queue->name_len : ch->len;
        rlock__event_post(s->engine->events, RLOCK_EVENT_SUBSCRIBE_REFUSED, name, len, -1,
                          rlock__reply_status(r->str), r->str);
    }
    rlock__channels_reap(ps);
}

/* The server dropped a sharded subscription (its slot moved): subscribe where it went. */
static void on_dropped(rlock__waiters *ps, subscriber *s, sub_link *l, rlock__channel *ch) {
    if (ch->node != l->node)
        return; /* already subscribed elsewhere */
    rlock__net_subscription_moved(s->engine->net, l->node, NULL);
    rlock__sub_unroute(ch, 1);
    s->reroute_after_ms = rlock__now_ms() + REROUTE_PAUSE_MS;
    rlock__channels_reap(ps);
}

static int is_kind(const char *kind, const char *classic) {
    return strcmp(kind, classic) == 0 || (kind[0] == 's' && strcmp(kind + 1, classic) == 0);
}

static void on_reply(rlock__waiters *ps, subscriber *s, sub_link *l, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) {
        on_error_reply(ps, s, l, r);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    rlock__channel *ch = rlock__channel_find(ps, r->element[1]->str, r->element[1]->len);
    if (ch == NULL)
        return;
    if (is_kind(kind, "message")) {
        rlock__channel_unlocked(ch, r->element[2]);
        return;
    }
    int unsubscribed = is_kind(kind, "unsubscribe");
    if (!unsubscribed && !is_kind(kind, "subscribe"))
        return;
    /* Replies come in the order of the commands; a drop nobody asked for does not. */
    sent_command *oldest = l->sent_count > 0 ? rlock__sub_sent_at(l, 0) : NULL;
    if (oldest == NULL || oldest->channel != ch || oldest->subscribe == unsubscribed) {
        if (unsubscribed)
            on_dropped(ps, s, l, ch);
        return;
    }
    rlock__sub_sent_pop(l);
    if (ch->pending > 0)
        ch->pending--;
    /* A late reply on a connection the channel has left confirms nothing. */
    ch->confirmed = ch->pending == 0 && ch->subscribe_sent && ch->node == l->node;
    if (ch->confirmed)
        s->reroute_backoff_ms = 0;
    if (ch->confirmed)
        rlock__channel_nudge(ch); /* joiners go on; sleepers retry in case we missed a message */
    rlock__channels_reap(ps);
}

static int read_replies(rlock__waiters *ps, subscriber *s, sub_link *l) {
    for (;;) {
        void *raw = NULL;
        if (rlock__io_next(l->ctx, &raw) != REDIS_OK)
            return RLOCK_EIO;
        if (raw == NULL)
            return RLOCK_OK;
        on_reply(ps, s, l, raw);
        freeReplyObject(raw);
    }
}

static void try_connect(rlock__waiters *ps, subscriber *s, sub_link *l) {
    rlock__engine *e = s->engine;
    redisContext *ctx = NULL;
    int connect_ms = e->settings->connect_timeout_ms < CONNECT_MAX_MS
                         ? e->settings->connect_timeout_ms
                         : CONNECT_MAX_MS;
    /* Only this thread changes the links: l stays valid without the mutex. */
    pthread_mutex_unlock(&ps->worker.mutex);
    int status = rlock__net_connect_node(e->net, l->node, rlock__deadline_after(connect_ms), &ctx);
    pthread_mutex_lock(&ps->worker.mutex);
    if (status == RLOCK_OK) {
        l->ctx = ctx;
        l->backoff_ms = BACKOFF_MIN_MS;
        ps->dirty = 1;
        return;
    }
    unsigned seed = (unsigned)rlock__now_ms();
    l->next_connect_ms =
        rlock__now_ms() + l->backoff_ms / 2 + rand_r(&seed) % (l->backoff_ms / 2 + 1);
    l->backoff_ms = doubled(l->backoff_ms);
}

/* Connects the links that need it and are due; sends what changed on the others. */
static void connect_and_send(rlock__waiters *ps, subscriber *s) {
    int64_t now = rlock__now_ms();
    for (size_t i = 0; i < s->nlinks && !ps->worker.stop; i++)
        if (rlock__sub_links(s)[i].ctx == NULL && now >= rlock__sub_links(s)[i].next_connect_ms)
            try_connect(ps, s, &rlock__sub_links(s)[i]);
    if (!ps->dirty)
        return;
    ps->dirty = 0;
    for (size_t i = 0; i < s->nlinks; i++) {
        sub_link *l = &rlock__sub_links(s)[i];
        if (l->ctx != NULL && send_changes(ps, s, l) != RLOCK_OK)
            rlock__sub_drop_link(ps, s, l, 1);
    }
    rlock__channels_reap(ps);
}

/* A lingering subscription that has run its time is to be dropped: send the changes. */
static void end_lingering(rlock__waiters *ps) {
    int64_t now = rlock__now_ms();
    for (const rlock__channel *ch = ps->channels; ch != NULL; ch = ch->next)
        if (ch->waiters == 0 && ch->subscribe_sent && !rlock__channel_lingers(ch, now))
            ps->dirty = 1;
}

/*
 * How long poll may sleep: until the next reconnection or re-route is due,
 * or a lingering subscription or connection ends.
 */
static int poll_timeout(const rlock__waiters *ps, subscriber *s) {
    int64_t now = rlock__now_ms(), until = RLOCK__NO_DEADLINE;
    for (size_t i = 0; i < s->nlinks; i++) {
        const sub_link *l = &rlock__sub_links(s)[i];
        if (l->ctx == NULL && l->next_connect_ms < until)
            until = l->next_connect_ms;
        if (l->ctx != NULL && l->needed == 0 && l->linger_until_ms < until)
            until = l->linger_until_ms;
    }
    for (const rlock__channel *ch = ps->channels; ch != NULL; ch = ch->next) {
        if (ch->node == NULL && ch->waiters > 0 && s->reroute_after_ms < until)
            until = s->reroute_after_ms;
        if (ch->waiters == 0 && ch->subscribe_sent && ch->linger_until_ms < until)
            until = ch->linger_until_ms;
    }
    if (until == RLOCK__NO_DEADLINE)
        return -1;
    return until <= now ? 0 : (int)(until - now > 60000 ? 60000 : until - now);
}

/*
 * Sleeps in poll() without the mutex, then reads what came on each
 * connection; a connection that failed is dropped.
 */
static void wait_and_read(rlock__waiters *ps, subscriber *s, int timeout_ms) {
    char drain[64];
    nfds_t nfds = 1;
    struct pollfd wake_only = {.fd = -1};
    /* No connection: only the wake-up pipe, and nothing allocated (an idle client's
       thread allocates nothing). Out of memory: the same, and a short sleep. */
    int room =
        s->nlinks > 0 &&
        rlock__buf_reserve(&s->pollfds, (s->nlinks + 1) * sizeof(struct pollfd)) == RLOCK_OK &&
        rlock__buf_reserve(&s->polled, (s->nlinks + 1) * sizeof(rlock__node *)) == RLOCK_OK;
    struct pollfd *fds = room ? s->pollfds.data : &wake_only;
    rlock__node **polled = s->polled.data;
    fds[0] = (struct pollfd){.fd = ps->wake_pipe[0], .events = POLLIN};
    if (!room && s->nlinks > 0 && (timeout_ms < 0 || timeout_ms > BACKOFF_MIN_MS))
        timeout_ms = BACKOFF_MIN_MS;
    for (size_t i = 0; room && i < s->nlinks; i++)
        if (rlock__sub_links(s)[i].ctx != NULL) {
            polled[nfds - 1] = rlock__sub_links(s)[i].node;
            redisContext *ctx = rlock__sub_links(s)[i].ctx;
            fds[nfds++] = (struct pollfd){.fd = ctx->fd, .events = rlock__io_events(ctx, POLLIN)};
        }
    /* A waiter leaving its channel wakes us only if we would sleep past its linger. */
    ps->subscriber_wakes_ms = timeout_ms < 0 ? RLOCK__NO_DEADLINE : rlock__now_ms() + timeout_ms;
    pthread_mutex_unlock(&ps->worker.mutex);
    int n = poll(fds, nfds, timeout_ms);
    if (n > 0 && (fds[0].revents & POLLIN))
        while (read(ps->wake_pipe[0], drain, sizeof(drain)) > 0)
            ;
    pthread_mutex_lock(&ps->worker.mutex);
    for (nfds_t i = 1; n > 0 && i < nfds; i++) {
        sub_link *l = rlock__sub_find_link(s, polled[i - 1]);
        if (fds[i].revents == 0 || l == NULL || l->ctx == NULL)
            continue;
        if (rlock__io_fill(l->ctx) != REDIS_OK || read_replies(ps, s, l) != RLOCK_OK)
            rlock__sub_drop_link(ps, s, l, 1);
    }
}

static void drop_all(rlock__waiters *ps, subscriber *s) {
    for (size_t i = 0; i < s->nlinks; i++)
        rlock__sub_drop_link(ps, s, &rlock__sub_links(s)[i], 0);
}

static void *subscriber_main(void *arg) {
    rlock__engine *e = arg;
    rlock__waiters *ps = &e->waiters;
    subscriber s = {.engine = e};

    pthread_setname_np(pthread_self(), "rlock-pubsub");
    pthread_mutex_lock(&ps->worker.mutex);
    while (!ps->worker.stop) {
        if (atomic_exchange(&ps->resubscribe, 0))
            drop_all(ps, &s); /* waiters retry now; subscribe again at the new masters */
        route_channels(ps, &s);
        end_lingering(ps);
        connect_and_send(ps, &s);
        if (ps->worker.stop)
            break;
        wait_and_read(ps, &s, poll_timeout(ps, &s));
    }
    while (s.nlinks > 0)
        rlock__sub_remove_link(&s, &rlock__sub_links(&s)[0]);
    pthread_mutex_unlock(&ps->worker.mutex);
    rlock__buf_free(&s.links);
    rlock__buf_free(&s.pollfds);
    rlock__buf_free(&s.polled);
    return NULL;
}

/* ---- lifetime (client open/close) --------------------------------------- */

/* Close: waiters return RLOCK_ECLOSED, joiners stop waiting, the thread wakes. */
static void on_stop(void *arg) {
    rlock__waiters *ws = &((rlock__engine *)arg)->waiters;
    for (rlock__channel *ch = ws->channels; ch != NULL; ch = ch->next)
        rlock__channel_wake_all(ch);
    rlock__wake_subscriber(ws);
}

int rlock__waiters_start(rlock__engine *e) {
    rlock__waiters *ws = &e->waiters;
    if (rlock__cond_init(&ws->queues_left) != 0)
        return RLOCK_ENOMEM;
    int status = rlock__worker_init(&ws->worker);
    if (status != RLOCK_OK) {
        pthread_cond_destroy(&ws->queues_left); /* destroy skips what init did not finish */
        return status;
    }
    ws->wake_pipe[0] = ws->wake_pipe[1] = -1;
    ws->subscriber_wakes_ms = RLOCK__NO_DEADLINE;
    if (pipe2(ws->wake_pipe, O_NONBLOCK | O_CLOEXEC) != 0)
        return rlock__fail(RLOCK_ENOMEM, errno, "subscriber wake-up pipe");
    ws->worker.on_stop = on_stop;
    return rlock__worker_start(&ws->worker, subscriber_main, e);
}

void rlock__waiters_stop(rlock__engine *e) {
    if (e->net != NULL && e->net->initialised)
        rlock__net_on_switch(e->net, NULL, NULL);
    rlock__worker_stop(&e->waiters.worker);
}

/* The channels, the mutex and the pipe outlive the thread: leaving waiters use them. */
void rlock__waiters_destroy(rlock__engine *e) {
    rlock__waiters *ws = &e->waiters;
    if (!ws->worker.initialised)
        return; /* never started: no pipe either */
    rlock__channels_free(ws);
    rlock__worker_destroy(&ws->worker);
    pthread_cond_destroy(&ws->queues_left);
    for (int i = 0; i < 2; i++)
        if (ws->wake_pipe[i] >= 0)
            close(ws->wake_pipe[i]);
    ws->wake_pipe[0] = ws->wake_pipe[1] = -1;
}

void rlock__wake_subscriber(rlock__waiters *ws) {
    ssize_t rc = write(ws->wake_pipe[1], "x", 1);
    (void)rc; /* a full pipe already means "wake up" */
}
