/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_client.c - librlock clients on a test cluster: their config, an
 * event recorder that prints what matters, and a waiter thread that takes a
 * lock, notes when, and gives it back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "cluster.h"
#include "fail.h"
#include "timing.h"

/* ---- clients --------------------------------------------------------------- */

static const char *event_name(int kind) {
    static const char *const names[] = {
        "?",           "RENEWAL_FAILED",    "LOCK_LOST",      "CONN_LOST",
        "RECONNECTED", "SUBSCRIBE_REFUSED", "MASTER_SWITCHED"};
    return kind > 0 && kind <= 6 ? names[kind] : "?";
}

static pthread_mutex_t recorders_mu = PTHREAD_MUTEX_INITIALIZER;
static h_cseen *recorders;

static void seen_event(const rlock_event *ev, void *arg) {
    h_cseen *s = arg;
    if (atomic_load(&s->muted))
        return;
    int k = ev->kind >= 0 && ev->kind < 8 ? (int)ev->kind : 0;
    atomic_fetch_add(&s->kinds[k], 1);
    int noisy = k == RLOCK_EVENT_RENEWAL_FAILED || k == RLOCK_EVENT_CONNECTION_LOST ||
                k == RLOCK_EVENT_RECONNECTED;
    if (noisy && atomic_fetch_add(&s->printed, 1) >= 6)
        return;
    printf("      [%s] %s %s: %s (%s)\n", s->who ? s->who : "?", event_name(k),
           ev->name ? ev->name : "-", ev->detail, rlock_status_name(ev->status));
}

static void seen_lost(const char *name, void *arg) {
    h_cseen *s = arg;
    (void)name;
    if (!atomic_load(&s->muted))
        atomic_fetch_add(&s->lost_calls, 1);
}

h_cseen *h_cseen_new(const char *who) {
    h_cseen *s = calloc(1, sizeof *s);
    if (!s)
        abort();
    s->who = who;
    pthread_mutex_lock(&recorders_mu);
    s->next = recorders;
    recorders = s;
    pthread_mutex_unlock(&recorders_mu);
    return s;
}

void h_cseen_free(h_cseen *seen) {
    pthread_mutex_lock(&recorders_mu);
    for (h_cseen **pp = &recorders; *pp != NULL; pp = &(*pp)->next)
        if (*pp == seen) {
            *pp = seen->next;
            break;
        }
    pthread_mutex_unlock(&recorders_mu);
    free(seen);
}

void h_cseen_mute_all(void) {
    pthread_mutex_lock(&recorders_mu);
    for (h_cseen *s = recorders; s != NULL; s = s->next)
        atomic_store(&s->muted, 1);
    pthread_mutex_unlock(&recorders_mu);
}

int h_cseen_lost(h_cseen *seen) {
    return atomic_load(&seen->kinds[RLOCK_EVENT_LOCK_LOST]) + atomic_load(&seen->lost_calls);
}

void h_cluster_config(const h_cluster *hc, rlock_config *cfg, long long wd, int pubsub_mode,
                      h_cseen *seen) {
    h_config(cfg);
    cfg->url = hc->url;
    cfg->watchdog_timeout_ms = wd;
    cfg->pubsub_mode = pubsub_mode;
    cfg->retry_attempts = 20;
    cfg->retry_interval_ms = 250;
    if (seen != NULL) {
        cfg->on_event = seen_event;
        cfg->on_lock_lost = seen_lost;
        cfg->callback_arg = seen;
    }
}

rlock_client *h_cluster_open(const h_cluster *hc, long long wd, int pubsub_mode, h_cseen *seen) {
    rlock_config cfg;
    h_cluster_config(hc, &cfg, wd, pubsub_mode, seen);
    return h_open_config(&cfg);
}

static void *waiter_main(void *arg) {
    h_cwaiter *w = arg;
    w->rc = rlock_try_lock(w->lock, w->wait_ms, RLOCK_LEASE_WATCHDOG);
    atomic_store(&w->done_ms, h_now_ms());
    if (w->rc == RLOCK_OK) {
        w->unlock_rc = rlock_unlock(w->lock);
    }
    atomic_store(&w->finished, 1);
    return NULL;
}

h_cwaiter *h_cwaiter_start(rlock *lock, long long wait_ms) {
    h_cwaiter *w = calloc(1, sizeof *w);
    if (!w)
        abort();
    w->lock = lock;
    w->wait_ms = wait_ms;
    w->rc = w->unlock_rc = 12345;
    atomic_store(&w->done_ms, 0);
    atomic_store(&w->finished, 0);
    w->started_ms = h_now_ms();
    if (pthread_create(&w->th, NULL, waiter_main, w) != 0)
        H_FAIL("pthread_create failed");
    return w;
}

long long h_cwaiter_done_ms(h_cwaiter *w) {
    return atomic_load(&w->done_ms);
}

void h_cwaiter_join(h_cwaiter *w, long long timeout_ms) {
    H_WAIT_FOR(atomic_load(&w->finished), timeout_ms);
    pthread_join(w->th, NULL);
}

void h_cwaiter_free(h_cwaiter *w) {
    free(w);
}
