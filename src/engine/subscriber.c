/*
 * subscriber.c - the subscriber thread: one per client, owning one Redis
 * connection (connected lazily, when the first thread has to wait) and
 * every subscription of the client's waiters (channels.c, waiters.c).
 *
 * Trouble: when the connection drops, every channel is marked unsubscribed
 * and its waiters retry at once; the thread reconnects with capped,
 * jittered exponential backoff, subscribes again every channel that still
 * has waiters, and wakes them once more when confirmed. Meanwhile waiters
 * still progress: each sleep is bounded by the lock's TTL.
 *
 * Refused subscriptions: an ACL may forbid SUBSCRIBE (or the channel). The
 * error reply names no channel, so the thread keeps the order of what it
 * sent (the `sent` queue) and pins the refusal on the command it answers:
 * the channel is marked refused, an RLOCK_EVENT_SUBSCRIBE_REFUSED is posted,
 * and its waiters poll every RLOCK__REFUSED_POLL_MS instead of sleeping
 * until the holder's TTL. A refused channel is not asked again on this
 * connection, and it is freed like any other once its last waiter leaves.
 *
 * The thread sleeps in poll() on the socket and a wake-up pipe, never in a
 * socket timeout (a timed-out hiredis 0.14 context is broken for good).
 *
 * Threads: the subscriber thread (a core worker); close stops it. Locking:
 * the worker's mutex (the waiters' mutex) guards the channels and the
 * waiters' shared fields; the thread's redisContext and `sent` ring are its
 * own. It never holds the mutex during connect or poll.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "channels.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000

typedef struct sent_command {
    rlock__channel *channel;    /* kept alive by its pending count */
    int subscribe;              /* SUBSCRIBE, else UNSUBSCRIBE */
} sent_command;

/* The subscriber thread's own state; only it touches this. */
typedef struct subscriber {
    rlock__engine *engine;
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

/* ---- the subscriber thread (pubsub.mutex held unless said otherwise) ---- */

/* Drops the connection (lost: it failed, else a new master took over). */
static void drop_connection(rlock__waiters *ps, subscriber *s, int lost) {
    if (s->ctx != NULL) {
        redisFree(s->ctx);
        if (lost)
            rlock__link_down(s->engine->events, RLOCK_EIO, "subscriber connection lost");
    }
    s->ctx = NULL;
    s->sent_count = 0;
    ps->connected = 0;
    for (rlock__channel *ch = ps->channels; ch != NULL; ch = ch->next) {
        ch->subscribe_sent = 0;
        ch->pending = 0;
        ch->confirmed = 0;
        ch->refused = 0; /* asked again on the next connection */
        rlock__channel_nudge(ch);
    }
    rlock__channels_reap(ps);
    s->next_connect_ms = rlock__now_ms();
}

static int send_command(redisContext *ctx, const char *verb, const rlock__channel *ch) {
    const char *argv[] = {verb, ch->name};
    size_t argvlen[] = {strlen(verb), ch->len};
    return redisAppendCommandArgv(ctx, 2, argv, argvlen) == REDIS_OK ? RLOCK_OK : RLOCK_EIO;
}

/* Sends SUBSCRIBE/UNSUBSCRIBE for every channel whose wish changed. */
static int send_changes(rlock__waiters *ps, subscriber *s) {
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
    rlock__channels_reap(ps);
    /* A few small commands: the socket buffer takes them at once. */
    return rlock__io_flush(s->ctx, rlock__deadline_after(s->engine->settings->command_timeout_ms));
}

/*
 * An unlock message: one permit for each lock waited on through this
 * channel (the message does not say which of them was unlocked), or, for
 * "1" (Redisson's read unlock), one for every waiter.
 */
static void on_refused(rlock__waiters *ps, subscriber *s, const redisReply *r) {
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
        rlock__channel_nudge(ch); /* joiners stop waiting for a confirmation that will not come */
        /* Named by lock, as every event: the first waiter's (X and {X} share a channel). */
        const char *name = ch->queue != NULL ? ch->queue->name : ch->name;
        size_t len = ch->queue != NULL ? ch->queue->name_len : ch->len;
        rlock__event_post(s->engine->events, RLOCK_EVENT_SUBSCRIBE_REFUSED, name, len, -1,
                          rlock__reply_status(r->str), r->str);
    }
    rlock__channels_reap(ps);
}

static void on_reply(rlock__waiters *ps, subscriber *s, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) {
        on_refused(ps, s, r);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    rlock__channel *ch = rlock__channel_find(ps, r->element[1]->str, r->element[1]->len);
    if (ch == NULL)
        return;
    if (strcmp(kind, "message") == 0) {
        rlock__channel_unlocked(ch, r->element[2]);
        return;
    }
    if (strcmp(kind, "subscribe") != 0 && strcmp(kind, "unsubscribe") != 0)
        return;
    sent_pop(s); /* replies come in the order of the commands: this one's */
    if (ch->pending > 0)
        ch->pending--;
    ch->confirmed = ch->pending == 0 && ch->subscribe_sent;
    if (ch->confirmed)
        rlock__channel_nudge(ch); /* joiners go on; sleepers retry in case we missed a message */
    rlock__channels_reap(ps);
}

static int read_replies(rlock__waiters *ps, subscriber *s) {
    for (;;) {
        void *raw = NULL;
        if (redisGetReplyFromReader(s->ctx, &raw) != REDIS_OK)
            return RLOCK_EIO;
        if (raw == NULL)
            return RLOCK_OK;
        on_reply(ps, s, raw);
        freeReplyObject(raw);
    }
}

static void try_connect(rlock__waiters *ps, subscriber *s) {
    rlock__engine *e = s->engine;
    redisContext *ctx = NULL;
    pthread_mutex_unlock(&ps->worker.mutex);
    /* Classic pub/sub: any node hears every PUBLISH (one channel set, one connection). */
    int status = rlock__net_connect_for(
        e->net, NULL, 0, rlock__deadline_after(e->settings->connect_timeout_ms), &ctx);
    pthread_mutex_lock(&ps->worker.mutex);
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

static int poll_timeout(const rlock__waiters *ps, const subscriber *s) {
    if (s->ctx != NULL || !rlock__channels_have_waiters(ps))
        return -1;
    int64_t left = s->next_connect_ms - rlock__now_ms();
    return left < 0 ? 0 : (int)left;
}

/* Sleeps in poll() without the mutex; returns 1 if the socket is readable. */
static int wait_for_events(rlock__waiters *ps, subscriber *s, int timeout_ms) {
    struct pollfd fds[2] = {{.fd = ps->wake_pipe[0], .events = POLLIN}};
    nfds_t nfds = 1;
    char drain[64];
    if (s->ctx != NULL) {
        fds[1].fd = s->ctx->fd;
        fds[1].events = POLLIN;
        nfds = 2;
    }
    pthread_mutex_unlock(&ps->worker.mutex);
    int n = poll(fds, nfds, timeout_ms);
    if (n > 0 && (fds[0].revents & POLLIN))
        while (read(ps->wake_pipe[0], drain, sizeof(drain)) > 0)
            ;
    int readable = n > 0 && nfds == 2 && fds[1].revents != 0;
    if (readable && redisBufferRead(s->ctx) != REDIS_OK)
        readable = -1;
    pthread_mutex_lock(&ps->worker.mutex);
    return readable;
}

static void *subscriber_main(void *arg) {
    rlock__engine *e = arg;
    rlock__waiters *ps = &e->waiters;
    subscriber s = {.engine = e, .backoff_ms = BACKOFF_MIN_MS};

    pthread_setname_np(pthread_self(), "rlock-pubsub");
    pthread_mutex_lock(&ps->worker.mutex);
    while (!ps->worker.stop) {
        if (atomic_exchange(&ps->resubscribe, 0))
            drop_connection(ps, &s, 0); /* waiters retry now; reconnects to the new master */
        if (s.ctx == NULL && rlock__channels_have_waiters(ps) && rlock__now_ms() >= s.next_connect_ms)
            try_connect(ps, &s);
        if (ps->worker.stop)
            break;
        if (s.ctx != NULL && ps->dirty && send_changes(ps, &s) != RLOCK_OK)
            drop_connection(ps, &s, 1);
        int readable = wait_for_events(ps, &s, poll_timeout(ps, &s));
        if (readable < 0 || (readable > 0 && read_replies(ps, &s) != RLOCK_OK))
            drop_connection(ps, &s, 1);
    }
    if (s.ctx != NULL)
        redisFree(s.ctx);
    ps->connected = 0;
    pthread_mutex_unlock(&ps->worker.mutex);
    rlock__buf_free(&s.sent);
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
    int status = rlock__worker_init(&ws->worker);
    if (status != RLOCK_OK)
        return status;
    ws->wake_pipe[0] = ws->wake_pipe[1] = -1;
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
    for (int i = 0; i < 2; i++)
        if (ws->wake_pipe[i] >= 0)
            close(ws->wake_pipe[i]);
    ws->wake_pipe[0] = ws->wake_pipe[1] = -1;
}

void rlock__wake_subscriber(rlock__waiters *ws) {
    ssize_t rc = write(ws->wake_pipe[1], "x", 1);
    (void)rc; /* a full pipe already means "wake up" */
}
