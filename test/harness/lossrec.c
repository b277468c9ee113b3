/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lossrec.c - the per-name recorder of on_lock_lost calls and LOCK_LOST
 * events (see lossrec.h). The callbacks only record (they run on the
 * client's event thread, where a failure must not be raised).
 */
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "lossrec.h"

void h_lossrec_init(struct h_lossrec *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
}

/* The slot for name (created); NULL if the table is full. Under r->mu. */
static struct h_lossrec_name *rec_slot(struct h_lossrec *r, const char *name) {
    int i;
    for (i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i].name, name) == 0)
            return &r->names[i];
    if (r->nnames == H_LOSSREC_NAMES || strlen(name) >= sizeof r->names[0].name)
        return NULL;
    snprintf(r->names[r->nnames].name, sizeof r->names[0].name, "%s", name);
    return &r->names[r->nnames++];
}

static void rec_lost_cb(const char *name, void *arg) {
    struct h_lossrec *r = arg;
    struct h_lossrec_name *s;
    pthread_mutex_lock(&r->mu);
    s = name ? rec_slot(r, name) : NULL;
    if (s)
        s->lost++;
    else
        r->overflow++;
    pthread_mutex_unlock(&r->mu);
}

static void rec_event_cb(const rlock_event *ev, void *arg) {
    struct h_lossrec *r = arg;
    pthread_mutex_lock(&r->mu);
    if ((int)ev->kind >= 0 && (int)ev->kind < 8)
        r->kinds[(int)ev->kind]++;
    if (ev->kind == RLOCK_EVENT_LOCK_LOST) {
        struct h_lossrec_name *s = ev->name ? rec_slot(r, ev->name) : NULL;
        if (s)
            s->lost_events++;
        else
            r->overflow++;
        if (ev->name == NULL || ev->detail == NULL)
            r->bad_lost_event++;
    }
    pthread_mutex_unlock(&r->mu);
}

int h_lossrec_lost(struct h_lossrec *r, const char *name) {
    int i, n = 0;
    pthread_mutex_lock(&r->mu);
    for (i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i].name, name) == 0)
            n = r->names[i].lost;
    pthread_mutex_unlock(&r->mu);
    return n;
}

int h_lossrec_lost_events(struct h_lossrec *r, const char *name) {
    int i, n = 0;
    pthread_mutex_lock(&r->mu);
    for (i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i].name, name) == 0)
            n = r->names[i].lost_events;
    pthread_mutex_unlock(&r->mu);
    return n;
}

int h_lossrec_others(struct h_lossrec *r, const char *name) {
    int i, n;
    pthread_mutex_lock(&r->mu);
    n = r->overflow + r->bad_lost_event;
    for (i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i].name, name) != 0)
            n += r->names[i].lost + r->names[i].lost_events;
    pthread_mutex_unlock(&r->mu);
    return n;
}

rlock_client *h_lossrec_open(const char *url, long long wd, struct h_lossrec *r) {
    rlock_config cfg;
    h_config(&cfg);
    if (url)
        cfg.url = url;
    cfg.watchdog_timeout_ms = wd;
    cfg.on_lock_lost = rec_lost_cb;
    cfg.on_event = rec_event_cb;
    cfg.callback_arg = r;
    return h_open_config(&cfg);
}
