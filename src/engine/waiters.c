/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * waiters.c - the waiting threads' side: join a lock's channel (and wait for
 * the subscription to be confirmed), sleep until an unlock message, a
 * nudge, a hand-off or the deadline, and leave; and the releasing thread's
 * side of a hand-off (queued, offer, settle).
 *
 * Hand-offs: a thread about to release a lock may offer it to the oldest
 * sleeping waiter of the lock (rlock__wait_offer). From then on that waiter
 * stays asleep -- past its deadline, close or cancellation -- until the
 * offering thread settles the offer (rlock__wait_settle) with the
 * transfer's outcome, so the outcome always reaches a thread that can act
 * on it.
 *
 * Threads: application threads (waiting, releasing). Locking: the waiters'
 * mutex (rlock__waiters.worker.mutex) guards the channels and every
 * waiter's shared fields; a waiter sleeps on its own condition variable.
 */
#include <errno.h>
#include <string.h>

#include "channels.h"

int rlock__wait_queue_begin(rlock__engine *e) {
    rlock__waiters *ps = &e->waiters;
    int status = RLOCK_OK;
    pthread_mutex_lock(&ps->worker.mutex);
    if (ps->worker.stop) /* close may be past its drain: this call must queue nowhere */
        status = rlock__fail(RLOCK_ECLOSED, 0, "client closed");
    else
        ps->queue_calls++;
    pthread_mutex_unlock(&ps->worker.mutex);
    return status;
}

void rlock__wait_queue_end(rlock__engine *e) {
    rlock__waiters *ps = &e->waiters;
    pthread_mutex_lock(&ps->worker.mutex);
    if (--ps->queue_calls == 0)
        pthread_cond_broadcast(&ps->queues_left);
    pthread_mutex_unlock(&ps->worker.mutex);
}

int rlock__wait_closing(rlock__engine *e) {
    rlock__waiters *ps = &e->waiters;
    pthread_mutex_lock(&ps->worker.mutex);
    int stopping = ps->worker.stop;
    pthread_mutex_unlock(&ps->worker.mutex);
    return stopping;
}

void rlock__waiters_drain_queues(rlock__engine *e, int64_t deadline_ms) {
    rlock__waiters *ps = &e->waiters;
    if (!ps->worker.initialised)
        return;
    pthread_mutex_lock(&ps->worker.mutex);
    while (ps->queue_calls > 0 &&
           rlock__cond_wait_until(&ps->queues_left, &ps->worker.mutex, deadline_ms) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&ps->worker.mutex);
}

int rlock__wait_join(rlock__engine *e, const char *channel, size_t len, int64_t deadline_ms,
                     rlock__waiter *w) {
    rlock__waiters *ps = &e->waiters;
    int64_t confirm_by = rlock__deadline_after(e->settings->command_timeout_ms);
    rlock__channel *ch = NULL;
    int status = RLOCK_OK;

    if (confirm_by > deadline_ms)
        confirm_by = deadline_ms;
    w->channel = NULL;
    w->sleeping = 0;
    w->permit = 0;
    w->handoff = RLOCK__HANDOFF_NONE;
    w->ahead = NULL;
    w->unheard = !rlock__net_hears(e->net, w->name, w->name_len, channel, len);
    if (rlock__cond_init(&w->wakeup) != 0)
        return RLOCK_ENOMEM;
    pthread_mutex_lock(&ps->worker.mutex);
    if (ps->worker.stop) {
        status = RLOCK_ECLOSED;
        goto out;
    }
    if ((ch = rlock__channel_get(ps, channel, len)) == NULL) {
        status = RLOCK_ENOMEM;
        goto out;
    }
    ch->waiters++;
    rlock__channel_enqueue(ch, w);
    if (!ch->subscribe_sent) {
        ps->dirty = 1;
        rlock__wake_subscriber(ps);
    }
    /* Without a confirmed subscription we still go on: TTL-bounded sleeps. */
    while (!ch->confirmed && !ch->refused && !ps->worker.stop)
        if (rlock__cond_wait_until(&ch->ready, &ps->worker.mutex, confirm_by) == ETIMEDOUT)
            break;
    if (ps->worker.stop) {
        ch->waiters--;
        rlock__channel_dequeue(ch, w);
        status = RLOCK_ECLOSED;
        goto out;
    }
    w->channel = ch;
out:
    pthread_mutex_unlock(&ps->worker.mutex);
    if (status != RLOCK_OK)
        pthread_cond_destroy(&w->wakeup);
    return status;
}

typedef struct sleeper {
    rlock__waiters *ps;
    rlock__waiter *w;
} sleeper;

/* A cancelled sleeper is no sleeper: no permit or hand-off goes its way. */
static void unlock_on_cancel(void *arg) {
    sleeper *s = arg;
    s->w->sleeping = 0;
    pthread_mutex_unlock(&s->ps->worker.mutex);
}

/*
 * Sleeps on w's condition variable (pubsub.mutex held), a cancellation point
 * when the caller's state allows it: a cancelled thread unwinds with the
 * mutex released.
 */
static int cancellable_wait(rlock__waiters *ps, rlock__waiter *w, int64_t deadline_ms,
                            int cancel_state) {
    sleeper s = {ps, w};
    int rc, ignored;
    pthread_cleanup_push(unlock_on_cancel, &s);
    pthread_setcancelstate(cancel_state, &ignored);
    rc = rlock__cond_wait_until(&w->wakeup, &ps->worker.mutex, deadline_ms);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &ignored);
    pthread_cleanup_pop(0);
    return rc;
}

unsigned rlock__wait_epoch(rlock__engine *e, const rlock__waiter *w) {
    pthread_mutex_lock(&e->waiters.worker.mutex);
    unsigned epoch = w->channel->epoch;
    pthread_mutex_unlock(&e->waiters.worker.mutex);
    return epoch;
}

/* Whether a sleeping waiter has a reason to get up (pubsub.mutex held). */
static int should_wake(const rlock__waiters *ps, const rlock__waiter *w, unsigned epoch) {
    if (w->handoff == RLOCK__HANDOFF_OFFERED)
        return 0; /* the offer's outcome must reach us: nothing else counts */
    return w->handoff != RLOCK__HANDOFF_NONE || w->ahead != NULL || w->permit ||
           w->channel->epoch != epoch || ps->worker.stop;
}

int rlock__wait_sleep(rlock__engine *e, rlock__waiter *w, unsigned epoch, int64_t deadline_ms,
                      int cancel_state, int *granted, rlock__conn **ahead, int64_t *sent_ms) {
    rlock__waiters *ps = &e->waiters;
    int status = RLOCK_OK;

    *granted = 0;
    pthread_mutex_lock(&ps->worker.mutex);
    /* No unlock message will come on a refused channel, nor one it cannot hear: poll. */
    if (w->channel->refused || w->unheard) {
        int64_t poll_at = rlock__deadline_after(RLOCK__REFUSED_POLL_MS);
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
    if (ps->worker.stop && !*granted)
        status = RLOCK_ECLOSED;
    pthread_mutex_unlock(&ps->worker.mutex);
    return status;
}

int rlock__wait_leave(rlock__engine *e, rlock__waiter *w, int acquired, rlock__conn **ahead) {
    rlock__waiters *ps = &e->waiters;
    rlock__channel *ch = w->channel;
    pthread_mutex_lock(&ps->worker.mutex);
    /* Only a cancelled waiter gets here with an offer open: see it through. */
    while (w->handoff == RLOCK__HANDOFF_OFFERED)
        pthread_cond_wait(&w->wakeup, &ps->worker.mutex);
    int unclaimed = w->handoff == RLOCK__HANDOFF_GRANTED;
    *ahead = w->ahead;
    w->ahead = NULL;
    rlock__channel_dequeue(ch, w);
    ch->waiters--;
    /* A wake-up it did not use (cancelled, timed out): pass it on. */
    if (w->permit || *ahead != NULL)
        rlock__channel_pass_permit(ch, w);
    if (ch->waiters == 0) {
        /* Its subscription lingers (RLOCK__LINGER_MS says when); the subscriber must wake
         * by its end to drop it. */
        ch->linger_until_ms = rlock__now_ms() + (acquired ? 0 : RLOCK__LINGER_MS);
        if (!ps->worker.stop &&
            (!ch->subscribe_sent || ps->subscriber_wakes_ms > ch->linger_until_ms)) {
            ps->dirty = 1;
            rlock__wake_subscriber(ps);
        }
    }
    pthread_mutex_unlock(&ps->worker.mutex);
    pthread_cond_destroy(&w->wakeup);
    return unclaimed;
}

/* ---- hand-offs (a releasing application thread) ------------------------- */

/*
 * Waiters are matched by lock name, not only by channel: Redisson's naming
 * gives locks "a" and "{a}" the same channel, and a hand-off must never
 * cross from one to the other.
 */
int rlock__wait_queued(rlock__engine *e, const char *channel, size_t channel_len,
                       const char *name, size_t name_len) {
    rlock__waiters *ps = &e->waiters;
    int queued = 0;
    pthread_mutex_lock(&ps->worker.mutex);
    rlock__channel *ch =
        ps->channels == NULL ? NULL : rlock__channel_find(ps, channel, channel_len);
    /* Unconfirmed (subscriber down): joining would wait; better try first. */
    for (rlock__waiter *w = ch != NULL && ch->confirmed ? ch->queue : NULL; w && !queued;
         w = w->next)
        queued = rlock__waiter_is_for(w, name, name_len);
    pthread_mutex_unlock(&ps->worker.mutex);
    return queued;
}

int rlock__wait_offer(rlock__engine *e, const char *channel, size_t channel_len,
                      const char *name, size_t name_len, rlock__offer *offer) {
    rlock__waiters *ps = &e->waiters;
    int max_in_row = e->settings->local_handoffs, offered = 0;
    if (max_in_row == 0)
        return 0;
    pthread_mutex_lock(&ps->worker.mutex);
    rlock__channel *ch = ps->worker.stop ? NULL : rlock__channel_find(ps, channel, channel_len);
    if (ch == NULL)
        goto out;
    rlock__waiter *w = ch->queue;
    while (w != NULL &&
           !(w->sleeping && w->handoff == RLOCK__HANDOFF_NONE && rlock__waiter_is_for(w, name, name_len)))
        w = w->next;
    if (w == NULL || ch->handoffs_in_row >= max_in_row) {
        ch->handoffs_in_row = 0; /* this unlock releases to everybody */
        goto out;
    }
    ch->handoffs_in_row++;
    w->handoff = RLOCK__HANDOFF_OFFERED;
    offer->waiter = w;
    offer->owner = w->owner;
    offer->lease_ms = w->lease_ms;
    offer->token = 0;
    offered = 1;
out:
    pthread_mutex_unlock(&ps->worker.mutex);
    return offered;
}

void rlock__wait_settle(rlock__engine *e, const rlock__offer *offer, int granted, int64_t sent_ms) {
    pthread_mutex_lock(&e->waiters.worker.mutex);
    offer->waiter->handoff = granted ? RLOCK__HANDOFF_GRANTED : RLOCK__HANDOFF_DECLINED;
    offer->waiter->sent_ms = sent_ms;
    offer->waiter->token = granted ? offer->token : 0;
    pthread_cond_signal(&offer->waiter->wakeup);
    pthread_mutex_unlock(&e->waiters.worker.mutex);
}
