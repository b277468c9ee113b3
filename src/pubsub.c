/*
 * pubsub.c - the subscriber thread and the channels waiters sleep on.
 *
 * One subscriber thread per client owns one Redis connection (connected
 * lazily, when the first thread has to wait) and every subscription. All
 * waiting threads of the client share one channel object per lock channel;
 * the channel is subscribed while it has waiters and unsubscribed when the
 * last one leaves.
 *
 * Wake-ups: each unlock message ("0") gives one permit to one waiter of
 * this process for each lock waited on through the channel (no thundering
 * herd) -- the oldest asleep, else the oldest awake, which acts on it when
 * it comes back, so a message that arrives between a waiter's failed attempt
 * and its sleep is not lost; "1" (Redisson's read-unlock) gives every waiter
 * one. A waiter does not retry until its
 * subscription is confirmed (or a short bound passes), so an unlock published
 * after that cannot be missed. Each waiter sleeps on its own condition
 * variable, so exactly the chosen one wakes, and it finds its ACQUIRE already
 * sent on a pooled connection (lock.c reads the reply), so the round trip
 * overlaps its wake-up.
 *
 * Hand-offs (lock.c): a thread about to release a lock may offer it to the
 * oldest sleeping waiter of the channel (rlock__pubsub_offer). From then on
 * that waiter stays asleep -- past its deadline, close or cancellation --
 * until the offering thread settles the offer (rlock__pubsub_settle) with
 * the TRANSFER script's outcome, so the outcome always reaches a thread that
 * can act on it.
 *
 * Trouble: when the connection drops, every channel is marked unsubscribed and
 * its waiters retry at once; the thread reconnects with capped, jittered
 * exponential backoff, subscribes again every channel that still has waiters,
 * and wakes them once more when confirmed. Meanwhile waiters still progress:
 * each sleep is bounded by the lock's TTL.
 *
 * Refused subscriptions: an ACL may forbid SUBSCRIBE (or the channel). The
 * error reply names no channel, so the thread keeps the order of what it
 * sent (the `sent` queue) and pins the refusal on the command it answers:
 * the channel is marked refused, an RLOCK_EVENT_SUBSCRIBE_REFUSED is posted,
 * and its waiters poll every REFUSED_POLL_MS instead of sleeping until the
 * holder's TTL. A refused channel is not asked again on this connection, and
 * it is freed like any other once its last waiter leaves.
 *
 * The thread sleeps in poll() on the socket and a wake-up pipe, never in a
 * socket timeout (a timed-out hiredis 0.14 context is broken for good).
 *
 * Threads: the subscriber thread; application threads in join/wait/leave
 * and offer/settle; close (stop). Locking: pubsub.mutex guards the channel
 * list, every channel's fields, the waiter records' shared fields, stop,
 * dirty and connected. The subscriber's redisContext
 * is touched only by the subscriber thread; it never holds the mutex during
 * connect or read.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct rlock__channel {
    rlock__channel *next;
    rlock__waiter *queue;   /* joined waiters, oldest first (not owned: on their stacks) */
    int waiters;            /* threads between join and leave */
    int handoffs_in_row;    /* offers since this client last released to everybody */
    int subscribe_sent;     /* SUBSCRIBE sent on this connection, no UNSUBSCRIBE since */
    int pending;            /* SUBSCRIBE/UNSUBSCRIBE sent, reply not yet read */
    int confirmed;          /* subscribed, nothing pending */
    int refused;            /* Redis refused SUBSCRIBE on this connection: waiters poll */
    unsigned epoch;         /* bumped to make sleeping waiters retry at once */
    pthread_cond_t ready;   /* joiners wait here for confirmation */
    size_t len;
    char name[];
};

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000
/* How often a waiter on a refused channel tries again. */
#define REFUSED_POLL_MS 100

/* A command sent whose reply has not come yet (replies come in order). */
typedef struct sent_command {
    rlock__channel *channel;    /* kept alive by its pending count */
    int subscribe;              /* SUBSCRIBE, else UNSUBSCRIBE */
} sent_command;

/* The subscriber thread's own state; only it touches this. */
typedef struct subscriber {
    rlock_client *client;
    redisContext *ctx;
    int backoff_ms;
    int64_t next_connect_ms;
    rlock__buf sent;            /* sent_command ring, oldest at sent_head */
    size_t sent_head;
    size_t sent_count;
} subscriber;

static sent_command *sent_at(subscriber *s, size_t i) {
    size_t cap = s->sent.cap / sizeof(sent_command);
    return (sent_command *)s->sent.data + (s->sent_head + i) % cap;
}

/* Appends to the ring, growing it (a grown ring is re-packed from its head). */
static int sent_push(subscriber *s, rlock__channel *ch, int subscribe) {
    size_t cap = s->sent.cap / sizeof(sent_command);
    if (s->sent_count == cap) {
        rlock__buf bigger = {NULL, 0};
        size_t new_cap = cap < 16 ? 16 : cap * 2;
        if (rlock__buf_reserve(&bigger, new_cap * sizeof(sent_command)) != RLOCK_OK)
            return RLOCK_ENOMEM;
        for (size_t i = 0; i < s->sent_count; i++)
            ((sent_command *)bigger.data)[i] = *sent_at(s, i);
        rlock__buf_free(&s->sent);
        s->sent = bigger;
        s->sent_head = 0;
    }
    *sent_at(s, s->sent_count++) = (sent_command){ch, subscribe};
    return RLOCK_OK;
}

/* The oldest command still waiting for its reply (NULL channel if none). */
static sent_command sent_pop(subscriber *s) {
    sent_command oldest = {NULL, 0};
    if (s->sent_count == 0)
        return oldest;
    oldest = *sent_at(s, 0);
    s->sent_head = (s->sent_head + 1) % (s->sent.cap / sizeof(sent_command));
    s->sent_count--;
    return oldest;
}

static void wake_subscriber(rlock__pubsub *ps) {
    ssize_t rc = write(ps->wake_pipe[1], "x", 1);
    (void)rc; /* a full pipe already means "wake up" */
}

static rlock__channel *find_channel(rlock__pubsub *ps, const char *name, size_t len) {
    for (rlock__channel *ch = ps->channels; ch != NULL; ch = ch->next)
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

/* Frees channels nobody waits on and Redis no longer knows about. */
static void reap_channels(rlock__pubsub *ps) {
    rlock__channel **link = &ps->channels;
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

static int has_waiters(const rlock__pubsub *ps) {
    for (const rlock__channel *ch = ps->channels; ch != NULL; ch = ch->next)
        if (ch->waiters > 0)
            return 1;
    return 0;
}

static void wake_all(rlock__channel *ch) {
    for (rlock__waiter *w = ch->queue; w != NULL; w = w->next)
        pthread_cond_signal(&w->wakeup);
}

/*
 * Redisson's naming gives locks "X" and "{X}" one channel: its waiters are
 * told apart by lock name, so one lock's wake-up never goes to the other's.
 */
static int same_lock(const rlock__waiter *a, const rlock__waiter *b) {
    return a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0;
}

/*
 * Who gets the permit of an unlock of like's lock: its oldest sleeping
 * waiter, else its oldest waiter awake (whose attempt in flight may have run
 * before the unlock: it tries again when it comes back), skipping waiters
 * that have a permit already or are being handed the lock. NULL if none.
 */
static rlock__waiter *permit_target(rlock__channel *ch, const rlock__waiter *like) {
    rlock__waiter *awake = NULL;
    for (rlock__waiter *w = ch->queue; w != NULL; w = w->next) {
        if (!same_lock(w, like) || w->permit || w->handoff != RLOCK__HANDOFF_NONE)
            continue;
        if (w->sleeping)
            return w;
        if (awake == NULL)
            awake = w;
    }
    return awake;
}

/*
 * Gives w a permit and wakes it if it sleeps; it no longer counts as asleep,
 * so the next permit goes to the next sleeper and no hand-off is offered to
 * it. A lone sleeper gets its ACQUIRE sent ahead instead of a permit.
 */
static void give_permit(rlock_client *c, rlock__channel *ch, rlock__waiter *w, int send_ahead) {
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
    if (!(send_ahead && ch->waiters == 1 && (w->ahead = rlock__acquire_ahead(c, w)) != NULL))
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

/* Makes every waiter retry now (after a reconnect or a resubscription). */
static void nudge(rlock__channel *ch) {
    ch->epoch++;
    wake_all(ch);
    pthread_cond_broadcast(&ch->ready);
}

/* ---- the subscriber thread (pubsub.mutex held unless said otherwise) ---- */

static void drop_connection(rlock__pubsub *ps, subscriber *s) {
    if (s->ctx != NULL) {
        redisFree(s->ctx);
        rlock__link_down(s->client, RLOCK_EIO, "subscriber connection lost");
    }
    s->ctx = NULL;
    s->sent_count = 0;
    ps->connected = 0;
    for (rlock__channel *ch = ps->channels; ch != NULL; ch = ch->next) {
        ch->subscribe_sent = 0;
        ch->pending = 0;
        ch->confirmed = 0;
        ch->refused = 0; /* asked again on the next connection */
        nudge(ch);
    }
    reap_channels(ps);
    s->next_connect_ms = rlock__now_ms();
}

static int send_command(redisContext *ctx, const char *verb, const rlock__channel *ch) {
    const char *argv[] = {verb, ch->name};
    size_t argvlen[] = {strlen(verb), ch->len};
    return redisAppendCommandArgv(ctx, 2, argv, argvlen) == REDIS_OK ? RLOCK_OK : RLOCK_EIO;
}

/* Sends SUBSCRIBE/UNSUBSCRIBE for every channel whose wish changed. */
static int send_changes(rlock__pubsub *ps, subscriber *s) {
    rlock_client *c = s->client;
    for (rlock__channel *ch = ps->channels; ch != NULL; ch = ch->next) {
        int want = ch->waiters > 0 && !ch->refused;
        if (want == ch->subscribe_sent)
            continue;
        if (sent_push(s, ch, want) != RLOCK_OK ||
            send_command(s->ctx, want ? "SUBSCRIBE" : "UNSUBSCRIBE", ch) != RLOCK_OK)
            return RLOCK_EIO;
        ch->subscribe_sent = want;
        ch->pending++;
        ch->confirmed = 0;
    }
    ps->dirty = 0;
    reap_channels(ps);
    /* A few small commands: the socket buffer takes them at once. */
    return rlock__io_flush(s->ctx, rlock__deadline_after(c->settings.command_timeout_ms));
}

/*
 * An unlock message: one permit for each lock waited on through this
 * channel (the message does not say which of them was unlocked), or, for
 * "1" (Redisson's read unlock), one for every waiter.
 */
static void on_message(rlock_client *c, rlock__channel *ch, const redisReply *payload) {
    int everybody = payload->type == REDIS_REPLY_STRING && payload->len == 1 &&
                    payload->str[0] == '1';
    for (rlock__waiter *w = ch->queue; w != NULL; w = w->next) {
        if (everybody) {
            if (!w->permit && w->handoff == RLOCK__HANDOFF_NONE)
                give_permit(c, ch, w, 0);
        } else if (first_of_its_lock(ch, w)) {
            rlock__waiter *target = permit_target(ch, w);
            if (target != NULL)
                give_permit(c, ch, target, 1);
        }
    }
}

/* Redis refused the oldest command still pending (an ACL refusal of SUBSCRIBE). */
static void on_refused(rlock_client *c, rlock__pubsub *ps, subscriber *s, const redisReply *r) {
    sent_command cmd = sent_pop(s);
    rlock__channel *ch = cmd.channel;
    if (ch == NULL)
        return;
    if (ch->pending > 0)
        ch->pending--;
    if (cmd.subscribe) {
        ch->subscribe_sent = 0;
        ch->refused = 1;
        ch->confirmed = 0;
        nudge(ch); /* joiners stop waiting for a confirmation that will not come */
        /* Named by lock, as every event: the first waiter's (X and {X} share a channel). */
        const char *name = ch->queue != NULL ? ch->queue->name : ch->name;
        size_t len = ch->queue != NULL ? ch->queue->name_len : ch->len;
        rlock__event_post(c, RLOCK_EVENT_SUBSCRIBE_REFUSED, name, len, -1,
                          rlock__reply_status(r->str), r->str);
    }
    reap_channels(ps);
}

static void on_reply(rlock_client *c, rlock__pubsub *ps, subscriber *s, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) {
        on_refused(c, ps, s, r);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    rlock__channel *ch = find_channel(ps, r->element[1]->str, r->element[1]->len);
    if (ch == NULL)
        return;
    if (strcmp(kind, "message") == 0) {
        on_message(c, ch, r->element[2]);
        return;
    }
    if (strcmp(kind, "subscribe") != 0 && strcmp(kind, "unsubscribe") != 0)
        return;
    sent_pop(s); /* replies come in the order of the commands: this one's */
    if (ch->pending > 0)
        ch->pending--;
    ch->confirmed = ch->pending == 0 && ch->subscribe_sent;
    if (ch->confirmed)
        nudge(ch); /* joiners go on; sleepers retry in case we missed a message */
    reap_channels(ps);
}

static int read_replies(rlock__pubsub *ps, subscriber *s) {
    for (;;) {
        void *raw = NULL;
        if (redisGetReplyFromReader(s->ctx, &raw) != REDIS_OK)
            return RLOCK_EIO;
        if (raw == NULL)
            return RLOCK_OK;
        on_reply(s->client, ps, s, raw);
        freeReplyObject(raw);
    }
}

static void try_connect(rlock__pubsub *ps, subscriber *s) {
    rlock_client *c = s->client;
    redisContext *ctx = NULL;
    pthread_mutex_unlock(&ps->mutex);
    int status = rlock__connect(&c->settings, rlock__deadline_after(c->settings.connect_timeout_ms),
                                &ctx);
    if (status == RLOCK_OK)
        rlock__link_up(c);
    else
        rlock__link_down(c, status, rlock__last_message());
    pthread_mutex_lock(&ps->mutex);
    if (status == RLOCK_OK) {
        s->ctx = ctx;
        s->sent_count = 0;
        s->backoff_ms = BACKOFF_MIN_MS;
        ps->connected = 1;
        ps->dirty = 1;
        return;
    }
    unsigned seed = (unsigned)rlock__now_ms();
    s->next_connect_ms = rlock__now_ms() + s->backoff_ms / 2 + rand_r(&seed) % (s->backoff_ms / 2 + 1);
    s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
}

static int poll_timeout(const rlock__pubsub *ps, const subscriber *s) {
    if (s->ctx != NULL || !has_waiters(ps))
        return -1;
    int64_t left = s->next_connect_ms - rlock__now_ms();
    return left < 0 ? 0 : (int)left;
}

/* Sleeps in poll() without the mutex; returns 1 if the socket is readable. */
static int wait_for_events(rlock__pubsub *ps, subscriber *s, int timeout_ms) {
    struct pollfd fds[2] = {{.fd = ps->wake_pipe[0], .events = POLLIN}};
    nfds_t nfds = 1;
    char drain[64];
    if (s->ctx != NULL) {
        fds[1].fd = s->ctx->fd;
        fds[1].events = POLLIN;
        nfds = 2;
    }
    pthread_mutex_unlock(&ps->mutex);
    int n = poll(fds, nfds, timeout_ms);
    if (n > 0 && (fds[0].revents & POLLIN))
        while (read(ps->wake_pipe[0], drain, sizeof(drain)) > 0)
            ;
    int readable = n > 0 && nfds == 2 && fds[1].revents != 0;
    if (readable && redisBufferRead(s->ctx) != REDIS_OK)
        readable = -1;
    pthread_mutex_lock(&ps->mutex);
    return readable;
}

static void *subscriber_main(void *arg) {
    rlock_client *c = arg;
    rlock__pubsub *ps = &c->pubsub;
    subscriber s = {.client = c, .backoff_ms = BACKOFF_MIN_MS};

    pthread_setname_np(pthread_self(), "rlock-pubsub");
    pthread_mutex_lock(&ps->mutex);
    while (!ps->stop) {
        if (s.ctx == NULL && has_waiters(ps) && rlock__now_ms() >= s.next_connect_ms)
            try_connect(ps, &s);
        if (ps->stop)
            break;
        if (s.ctx != NULL && ps->dirty && send_changes(ps, &s) != RLOCK_OK)
            drop_connection(ps, &s);
        int readable = wait_for_events(ps, &s, poll_timeout(ps, &s));
        if (readable < 0 || (readable > 0 && read_replies(ps, &s) != RLOCK_OK))
            drop_connection(ps, &s);
    }
    if (s.ctx != NULL)
        redisFree(s.ctx);
    ps->connected = 0;
    pthread_mutex_unlock(&ps->mutex);
    rlock__buf_free(&s.sent);
    return NULL;
}

/* ---- waiters (application threads) -------------------------------------- */

static void enqueue(rlock__channel *ch, rlock__waiter *w) {
    rlock__waiter **link = &ch->queue;
    while (*link != NULL)
        link = &(*link)->next;
    w->next = NULL;
    *link = w;
}

static void dequeue(rlock__channel *ch, rlock__waiter *w) {
    for (rlock__waiter **link = &ch->queue; *link != NULL; link = &(*link)->next)
        if (*link == w) {
            *link = w->next;
            return;
        }
}

int rlock__pubsub_join(rlock_client *c, const char *channel, size_t len, int64_t deadline_ms,
                       rlock__waiter *w) {
    rlock__pubsub *ps = &c->pubsub;
    int64_t confirm_by = rlock__deadline_after(c->settings.command_timeout_ms);
    int status = RLOCK_OK;

    if (confirm_by > deadline_ms)
        confirm_by = deadline_ms;
    w->channel = NULL;
    w->sleeping = 0;
    w->permit = 0;
    w->handoff = RLOCK__HANDOFF_NONE;
    w->ahead = NULL;
    if (rlock__cond_init(&w->wakeup) != 0)
        return RLOCK_ENOMEM;
    pthread_mutex_lock(&ps->mutex);
    rlock__channel *ch = find_channel(ps, channel, len);
    if (ps->stop) {
        status = RLOCK_ECLOSED;
        goto out;
    }
    if (ch == NULL) {
        if ((ch = new_channel(channel, len)) == NULL) {
            status = RLOCK_ENOMEM;
            goto out;
        }
        ch->next = ps->channels;
        ps->channels = ch;
    }
    ch->waiters++;
    enqueue(ch, w);
    if (!ch->subscribe_sent) {
        ps->dirty = 1;
        wake_subscriber(ps);
    }
    /* Without a confirmed subscription we still go on: TTL-bounded sleeps. */
    while (!ch->confirmed && !ch->refused && !ps->stop)
        if (rlock__cond_wait_until(&ch->ready, &ps->mutex, confirm_by) == ETIMEDOUT)
            break;
    if (ps->stop) {
        ch->waiters--;
        dequeue(ch, w);
        status = RLOCK_ECLOSED;
        goto out;
    }
    w->channel = ch;
out:
    pthread_mutex_unlock(&ps->mutex);
    if (status != RLOCK_OK)
        pthread_cond_destroy(&w->wakeup);
    return status;
}

typedef struct sleeper {
    rlock__pubsub *ps;
    rlock__waiter *w;
} sleeper;

/* A cancelled sleeper is no sleeper: no permit or hand-off goes its way. */
static void unlock_on_cancel(void *arg) {
    sleeper *s = arg;
    s->w->sleeping = 0;
    pthread_mutex_unlock(&s->ps->mutex);
}

/*
 * Sleeps on w's condition variable (pubsub.mutex held), a cancellation point
 * when the caller's state allows it: a cancelled thread unwinds with the
 * mutex released.
 */
static int cancellable_wait(rlock__pubsub *ps, rlock__waiter *w, int64_t deadline_ms,
                            int cancel_state) {
    sleeper s = {ps, w};
    int rc, ignored;
    pthread_cleanup_push(unlock_on_cancel, &s);
    pthread_setcancelstate(cancel_state, &ignored);
    rc = rlock__cond_wait_until(&w->wakeup, &ps->mutex, deadline_ms);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
    pthread_cleanup_pop(0);
    return rc;
}

unsigned rlock__pubsub_epoch(rlock_client *c, const rlock__waiter *w) {
    pthread_mutex_lock(&c->pubsub.mutex);
    unsigned epoch = w->channel->epoch;
    pthread_mutex_unlock(&c->pubsub.mutex);
    return epoch;
}

/* Whether a sleeping waiter has a reason to get up (pubsub.mutex held). */
static int should_wake(const rlock__pubsub *ps, const rlock__waiter *w, unsigned epoch) {
    if (w->handoff == RLOCK__HANDOFF_OFFERED)
        return 0; /* the offer's outcome must reach us: nothing else counts */
    return w->handoff != RLOCK__HANDOFF_NONE || w->ahead != NULL || w->permit ||
           w->channel->epoch != epoch || ps->stop;
}

int rlock__pubsub_wait(rlock_client *c, rlock__waiter *w, unsigned epoch, int64_t deadline_ms,
                       int cancel_state, int *granted, rlock__conn **ahead, int64_t *sent_ms) {
    rlock__pubsub *ps = &c->pubsub;
    int status = RLOCK_OK;

    *granted = 0;
    pthread_mutex_lock(&ps->mutex);
    /* No unlock message will come on a refused channel: poll instead. */
    if (w->channel->refused) {
        int64_t poll_at = rlock__deadline_after(REFUSED_POLL_MS);
        if (poll_at < deadline_ms)
            deadline_ms = poll_at;
    }
    while (!should_wake(ps, w, epoch)) {
        /* Again on every round: a wake-up whose permit another waiter took
         * must leave us a sleeper, to be woken by the next one. */
        w->sleeping = 1;
        int64_t until = w->handoff == RLOCK__HANDOFF_OFFERED ? RLOCK__NO_DEADLINE : deadline_ms;
        if (cancellable_wait(ps, w, until, cancel_state) == ETIMEDOUT &&
            w->handoff == RLOCK__HANDOFF_NONE)
            break;
    }
    w->sleeping = 0;
    *ahead = w->ahead;
    *sent_ms = w->sent_ms;
    w->ahead = NULL;
    if (w->handoff == RLOCK__HANDOFF_GRANTED)
        *granted = 1;
    else if (w->handoff == RLOCK__HANDOFF_NONE && *ahead == NULL)
        w->permit = 0; /* used by the attempt that follows */
    w->handoff = RLOCK__HANDOFF_NONE; /* declined: simply try again */
    if (ps->stop && !*granted)
        status = RLOCK_ECLOSED;
    pthread_mutex_unlock(&ps->mutex);
    return status;
}

int rlock__pubsub_leave(rlock_client *c, rlock__waiter *w, rlock__conn **ahead) {
    rlock__pubsub *ps = &c->pubsub;
    rlock__channel *ch = w->channel;
    pthread_mutex_lock(&ps->mutex);
    /* Only a cancelled waiter gets here with an offer open: see it through. */
    while (w->handoff == RLOCK__HANDOFF_OFFERED)
        pthread_cond_wait(&w->wakeup, &ps->mutex);
    int unclaimed = w->handoff == RLOCK__HANDOFF_GRANTED;
    *ahead = w->ahead;
    w->ahead = NULL;
    dequeue(ch, w);
    ch->waiters--;
    /* A wake-up it did not use (cancelled, timed out): pass it on. */
    if (w->permit || *ahead != NULL) {
        rlock__waiter *target = permit_target(ch, w);
        if (target != NULL)
            give_permit(c, ch, target, 0);
    }
    if (ch->waiters == 0 && !ps->stop) {
        ps->dirty = 1;
        wake_subscriber(ps);
    }
    pthread_mutex_unlock(&ps->mutex);
    pthread_cond_destroy(&w->wakeup);
    return unclaimed;
}

/* ---- hand-offs (a releasing application thread) ------------------------- */

/*
 * Waiters are matched by lock name, not only by channel: Redisson's naming
 * gives locks "a" and "{a}" the same channel, and a hand-off must never
 * cross from one to the other.
 */
static int waits_for(const rlock__waiter *w, const rlock *lock) {
    return w->name_len == lock->name_len && memcmp(w->name, lock->name, lock->name_len) == 0;
}

int rlock__pubsub_queued(rlock_client *c, const rlock *lock) {
    rlock__pubsub *ps = &c->pubsub;
    int queued = 0;
    pthread_mutex_lock(&ps->mutex);
    rlock__channel *ch =
        ps->channels == NULL ? NULL : find_channel(ps, lock->channel, lock->channel_len);
    /* Unconfirmed (subscriber down): joining would wait; better try first. */
    for (rlock__waiter *w = ch != NULL && ch->confirmed ? ch->queue : NULL; w && !queued;
         w = w->next)
        queued = waits_for(w, lock);
    pthread_mutex_unlock(&ps->mutex);
    return queued;
}

int rlock__pubsub_offer(rlock_client *c, const rlock *lock, rlock__offer *offer) {
    rlock__pubsub *ps = &c->pubsub;
    int max_in_row = c->settings.local_handoffs, offered = 0;
    if (max_in_row == 0)
        return 0;
    pthread_mutex_lock(&ps->mutex);
    rlock__channel *ch = ps->stop ? NULL : find_channel(ps, lock->channel, lock->channel_len);
    if (ch == NULL)
        goto out;
    rlock__waiter *w = ch->queue;
    while (w != NULL && !(w->sleeping && w->handoff == RLOCK__HANDOFF_NONE && waits_for(w, lock)))
        w = w->next;
    if (w == NULL || ch->handoffs_in_row >= max_in_row) {
        ch->handoffs_in_row = 0; /* this unlock releases to everybody */
        goto out;
    }
    ch->handoffs_in_row++;
    w->handoff = RLOCK__HANDOFF_OFFERED;
    offer->waiter = w;
    offer->tid = w->tid;
    offer->lease_ms = w->lease_ms;
    offered = 1;
out:
    pthread_mutex_unlock(&ps->mutex);
    return offered;
}

void rlock__pubsub_settle(rlock_client *c, const rlock__offer *offer, int granted,
                          int64_t sent_ms) {
    pthread_mutex_lock(&c->pubsub.mutex);
    offer->waiter->handoff = granted ? RLOCK__HANDOFF_GRANTED : RLOCK__HANDOFF_DECLINED;
    offer->waiter->sent_ms = sent_ms;
    pthread_cond_signal(&offer->waiter->wakeup);
    pthread_mutex_unlock(&c->pubsub.mutex);
}

/* ---- lifetime (client open/close) --------------------------------------- */

int rlock__pubsub_start(rlock_client *c) {
    rlock__pubsub *ps = &c->pubsub;
    if (pipe2(ps->wake_pipe, O_NONBLOCK | O_CLOEXEC) != 0)
        return RLOCK_ENOMEM;
    if (pthread_mutex_init(&ps->mutex, NULL) != 0)
        goto fail_mutex;
    if (rlock__start_thread(&ps->thread, subscriber_main, c) != RLOCK_OK)
        goto fail_thread;
    ps->started = 1;
    return RLOCK_OK;
fail_thread:
    pthread_mutex_destroy(&ps->mutex);
fail_mutex:
    close(ps->wake_pipe[0]);
    close(ps->wake_pipe[1]);
    return RLOCK_ENOMEM;
}

void rlock__pubsub_stop(rlock_client *c) {
    rlock__pubsub *ps = &c->pubsub;
    if (!ps->started)
        return;
    pthread_mutex_lock(&ps->mutex);
    ps->stop = 1;
    for (rlock__channel *ch = ps->channels; ch != NULL; ch = ch->next) {
        wake_all(ch);
        pthread_cond_broadcast(&ch->ready);
    }
    wake_subscriber(ps);
    pthread_mutex_unlock(&ps->mutex);
    pthread_join(ps->thread, NULL);
}

void rlock__pubsub_destroy(rlock_client *c) {
    rlock__pubsub *ps = &c->pubsub;
    if (!ps->started)
        return;
    while (ps->channels != NULL) {
        rlock__channel *ch = ps->channels;
        ps->channels = ch->next;
        free_channel(ch);
    }
    pthread_mutex_destroy(&ps->mutex);
    close(ps->wake_pipe[0]);
    close(ps->wake_pipe[1]);
    ps->started = 0;
}
