/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * events.c - the event thread: delivers rlock_event to on_event and lost
 * locks to on_lock_lost, one at a time, in order, away from the threads
 * that find them.
 *
 * Why a thread of its own: the header lets callbacks call rlock functions,
 * and one that blocks (a try_lock with a wait) must not stop the watchdog
 * from renewing every other lock, nor the subscriber from waking waiters.
 * Those threads only queue an event (a copy; never blocking on a callback).
 *
 * Link state: rlock__link_down / rlock__link_up turn connection failures and
 * recoveries into CONNECTION_LOST / RECONNECTED events, once per transition.
 *
 * Log lines (rlock_config.log) travel the same queue, so they come in order
 * with the events and the callback runs here too: each event becomes a line
 * (log.c formats it) when its level is wanted, and log-only lines come
 * formatted (rlock__post_line). Every event is counted in the statistics as
 * it is posted, whoever listens.
 *
 * Threads: any thread posts; the event thread runs the callbacks; close
 * stops it after the watchdog and subscriber threads, delivering what is
 * queued first (worker.c). Locking: the worker's mutex guards the queue and
 * stop; no mutex is held during a callback.
 */
#include <string.h>

#include "internal.h"

struct rlock__event_item {
    rlock__event_item *next;
    int log_level;              /* a log-only line (event.detail) at this level; 0: an event */
    rlock_event event;          /* name and detail point into text[] */
    char text[];
};

static int wanted(const rlock__settings *s, rlock_event_kind kind) {
    return s->on_event != NULL || (kind == RLOCK_EVENT_LOCK_LOST && s->on_lock_lost != NULL) ||
           rlock__log_wanted(s, rlock__event_level(kind));
}

/* The counter each kind of event feeds (RENEWAL_FAILED: the watchdog counts per lock). */
static void count_event(rlock__stats *st, rlock_event_kind kind) {
    static const struct {
        rlock_event_kind kind;
        rlock__counter counter;
    } counted[] = {{RLOCK_EVENT_LOCK_LOST, RLOCK__COUNT_LOSSES},
                   {RLOCK_EVENT_CONNECTION_LOST, RLOCK__COUNT_CONNECTION_FAILURES},
                   {RLOCK_EVENT_RECONNECTED, RLOCK__COUNT_RECONNECTS},
                   {RLOCK_EVENT_SUBSCRIBE_REFUSED, RLOCK__COUNT_SUBSCRIBE_REFUSALS},
                   {RLOCK_EVENT_MASTER_SWITCHED, RLOCK__COUNT_MASTER_SWITCHES}};
    for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++)
        if (counted[i].kind == kind)
            rlock__count(st, counted[i].counter, 1);
}

static void enqueue(rlock__events *ev, rlock__event_item *item) {
    pthread_mutex_lock(&ev->worker.mutex);
    if (ev->tail != NULL)
        ev->tail->next = item;
    else
        ev->head = item;
    ev->tail = item;
    pthread_cond_signal(&ev->worker.wake);
    pthread_mutex_unlock(&ev->worker.mutex);
}

void rlock__post_line(rlock__events *ev, int level, const char *line) {
    if (!ev->worker.started)
        return;
    size_t len = strlen(line);
    rlock__event_item *item = rlock__malloc(sizeof(*item) + len + 1);
    if (item == NULL)
        return; /* out of memory: the line is dropped, never the caller's work */
    memcpy(item->text, line, len + 1);
    item->next = NULL;
    item->log_level = level;
    item->event = (rlock_event){.detail = item->text};
    enqueue(ev, item);
}

void rlock__event_post(rlock__events *ev, rlock_event_kind kind, const char *name,
                       size_t name_len, long long lease_left_ms, int status, const char *detail) {
    rlock__event_post_owner(ev, kind, name, name_len, 0, lease_left_ms, status, detail);
}

void rlock__event_post_owner(rlock__events *ev, rlock_event_kind kind, const char *name,
                             size_t name_len, uint64_t owner, long long lease_left_ms, int status,
                             const char *detail) {
    count_event(&ev->stats, kind);
    if (!ev->worker.started || !wanted(ev->settings, kind))
        return;
    if (detail == NULL)
        detail = "";
    size_t detail_len = strlen(detail);
    rlock__event_item *item = rlock__malloc(sizeof(*item) + name_len + 1 + detail_len + 1);
    if (item == NULL)
        return; /* out of memory: the event is dropped, never the caller's work */
    char *text = item->text;
    item->next = NULL;
    item->log_level = 0;
    item->event = (rlock_event){.kind = kind, .lease_left_ms = lease_left_ms, .status = status,
                                .owner = owner};
    if (name != NULL) {
        memcpy(text, name, name_len);
        text[name_len] = '\0';
        item->event.name = text;
        text += name_len + 1;
    }
    memcpy(text, detail, detail_len + 1);
    item->event.detail = text;
    enqueue(ev, item);
}

static void deliver(const rlock__settings *s, const rlock__event_item *item) {
    const rlock_event *event = &item->event;
    if (item->log_level != 0) {
        s->log(item->log_level, event->detail, s->log_arg);
        return;
    }
    if (event->kind == RLOCK_EVENT_LOCK_LOST && s->on_lock_lost != NULL)
        s->on_lock_lost(event->name, s->callback_arg);
    if (s->on_event != NULL)
        s->on_event(event, s->callback_arg);
    int level = rlock__event_level(event->kind);
    if (rlock__log_wanted(s, level)) {
        char line[RLOCK__LOG_LINE_MAX];
        rlock__event_line(s, event, line, sizeof(line));
        s->log(level, line, s->log_arg);
    }
}

static void *events_main(void *arg) {
    rlock__events *ev = arg;
    rlock__worker *w = &ev->worker;
    pthread_setname_np(pthread_self(), "rlock-events");
    pthread_mutex_lock(&w->mutex);
    for (;;) {
        while (ev->head == NULL && !w->stop)
            pthread_cond_wait(&w->wake, &w->mutex);
        rlock__event_item *item = ev->head;
        if (item == NULL)
            break; /* stopping, and everything queued was delivered */
        ev->head = item->next;
        if (ev->head == NULL)
            ev->tail = NULL;
        pthread_mutex_unlock(&w->mutex);
        deliver(ev->settings, item);
        rlock__free(item);
        pthread_mutex_lock(&w->mutex);
    }
    pthread_mutex_unlock(&w->mutex);
    return NULL;
}

int rlock__events_start(rlock__events *ev, const rlock__settings *settings) {
    ev->settings = settings;
    return rlock__worker_start(&ev->worker, events_main, ev);
}

/* The thread delivers what is queued before it sees stop (events_main). */
void rlock__events_stop(rlock__events *ev) {
    rlock__worker_stop(&ev->worker);
    rlock__worker_destroy(&ev->worker);
}

void rlock__link_down(rlock__events *ev, int status, const char *detail) {
    if (atomic_exchange(&ev->link_down, 1) == 0)
        rlock__event_post(ev, RLOCK_EVENT_CONNECTION_LOST, NULL, 0, -1, status, detail);
}

void rlock__link_up(rlock__events *ev) {
    if (atomic_load(&ev->link_down) && atomic_exchange(&ev->link_down, 0) == 1)
        rlock__event_post(ev, RLOCK_EVENT_RECONNECTED, NULL, 0, -1, RLOCK_OK,
                          "connection works again");
}
