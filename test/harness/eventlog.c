/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eventlog.c - the ordered log of a client's on_event and on_lock_lost calls
 * (see eventlog.h).
 */
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "eventlog.h"
#include "timing.h"

void h_evlog_init(struct h_evlog *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
}

void h_evlog_destroy(struct h_evlog *r) {
    pthread_mutex_destroy(&r->mu);
}

/* on_event: runs on the client's event thread; records only (no asserts here:
 * a harness failure off the main thread aborts). */
static void rec_on_event(const rlock_event *event, void *arg) {
    struct h_evlog *r = arg;
    long long now = h_now_ms();
    pthread_mutex_lock(&r->mu);
    if (r->n < H_EVLOG_MAX) {
        struct h_evlog_event *e = &r->ev[r->n++];
        e->kind = (int)event->kind;
        e->has_name = event->name != NULL;
        snprintf(e->name, sizeof e->name, "%s", event->name ? event->name : "");
        e->lease_left_ms = event->lease_left_ms;
        e->status = event->status;
        e->owner = event->owner;
        e->has_detail = event->detail != NULL;
        snprintf(e->detail, sizeof e->detail, "%s", event->detail ? event->detail : "");
        e->at_ms = now;
    } else {
        r->dropped++;
    }
    pthread_mutex_unlock(&r->mu);
}

/* on_lock_lost: records; for block_name, blocks in a try_lock with a wait. */
static void rec_on_lost(const char *name, void *arg) {
    struct h_evlog *r = arg;
    long long now = h_now_ms();
    rlock *block = NULL;
    long long wait_ms = 0;

    pthread_mutex_lock(&r->mu);
    if (r->nlost < (int)(sizeof r->lost / sizeof r->lost[0])) {
        snprintf(r->lost[r->nlost].name, sizeof r->lost[0].name, "%s", name ? name : "(null)");
        r->lost[r->nlost].at_ms = now;
    }
    r->nlost++;
    if (name != NULL && r->block_lock != NULL && strcmp(name, r->block_name) == 0 &&
        !r->block_started) {
        r->block_started = 1;
        r->block_start_ms = now;
        block = r->block_lock;
        wait_ms = r->block_wait_ms;
    }
    pthread_mutex_unlock(&r->mu);

    if (block != NULL) {
        /* Allowed by the header: a callback may call rlock functions. This one
         * blocks for its whole wait (the lock is held by another client). */
        int rc = rlock_try_lock(block, wait_ms, 10000);
        if (rc == RLOCK_OK)
            rlock_unlock(block);
        pthread_mutex_lock(&r->mu);
        r->block_rc = rc;
        r->block_end_ms = h_now_ms();
        r->block_done = 1;
        pthread_mutex_unlock(&r->mu);
    }
}

int h_evlog_block_started(struct h_evlog *r) {
    pthread_mutex_lock(&r->mu);
    int started = r->block_started;
    pthread_mutex_unlock(&r->mu);
    return started;
}

/* Number of events of kind (for name if not NULL); *first_ms / *first_idx
 * of the first one (may be NULL). */
int h_evlog_count(struct h_evlog *r, int kind, const char *name, long long *first_ms,
                  int *first_idx) {
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n; i++) {
        if (r->ev[i].kind != kind || (name != NULL && strcmp(r->ev[i].name, name) != 0))
            continue;
        if (n++ == 0) {
            if (first_ms)
                *first_ms = r->ev[i].at_ms;
            if (first_idx)
                *first_idx = i;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* on_lock_lost calls (for name if not NULL). */
int h_evlog_lost_count(struct h_evlog *r, const char *name) {
    int n = 0;
    pthread_mutex_lock(&r->mu);
    if (name == NULL) {
        n = r->nlost;
    } else {
        int m = r->nlost < 64 ? r->nlost : 64;
        for (int i = 0; i < m; i++)
            n += strcmp(r->lost[i].name, name) == 0;
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* A copy of event i (the main thread checks it without holding the lock). */
struct h_evlog_event h_evlog_get(struct h_evlog *r, int i) {
    struct h_evlog_event e;
    pthread_mutex_lock(&r->mu);
    e = r->ev[i];
    pthread_mutex_unlock(&r->mu);
    return e;
}

int h_evlog_n(struct h_evlog *r) {
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static const char *kind_name(int kind) {
    switch (kind) {
    case RLOCK_EVENT_RENEWAL_FAILED: return "RENEWAL_FAILED";
    case RLOCK_EVENT_LOCK_LOST: return "LOCK_LOST";
    case RLOCK_EVENT_CONNECTION_LOST: return "CONNECTION_LOST";
    case RLOCK_EVENT_RECONNECTED: return "RECONNECTED";
    case RLOCK_EVENT_SUBSCRIBE_REFUSED: return "SUBSCRIBE_REFUSED";
    default: return "?";
    }
}

/* Prints every recorded event relative to t0 (for a person reading a failure). */
void h_evlog_dump(struct h_evlog *r, long long t0) {
    int n = h_evlog_n(r);
    for (int i = 0; i < n; i++) {
        struct h_evlog_event e = h_evlog_get(r, i);
        printf("        event %2d at %+6lld ms: %-17s name=%s lease_left=%lld status=%s "
               "detail=\"%.120s\"\n",
               i, e.at_ms - t0, kind_name(e.kind), e.has_name ? e.name : "(null)",
               e.lease_left_ms, rlock_status_name(e.status), e.detail);
    }
}

rlock_client *h_evlog_open(const char *url, long long wd, long long cmd_ms, struct h_evlog *r) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = url;
    cfg.watchdog_timeout_ms = wd;
    if (cmd_ms > 0)
        cfg.command_timeout_ms = (int)cmd_ms;
    cfg.on_lock_lost = rec_on_lost;
    cfg.on_event = rec_on_event;
    cfg.callback_arg = r;
    return h_open_config(&cfg);
}
