/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lossrec.h - a recorder of lost locks, counted per lock name: a client's
 * on_lock_lost calls and its RLOCK_EVENT_LOCK_LOST events (the ownership
 * truth tests, test_truth_*.c, check that each loss is reported exactly once,
 * to both, and that nothing else is reported).
 */
#ifndef RLOCK_TEST_HARNESS_LOSSREC_H
#define RLOCK_TEST_HARNESS_LOSSREC_H

#include <pthread.h>

#include "rlock.h"

#define H_LOSSREC_NAMES 16

struct h_lossrec_name {
    char name[256];
    int lost;        /* on_lock_lost calls */
    int lost_events; /* RLOCK_EVENT_LOCK_LOST events */
};

struct h_lossrec {
    pthread_mutex_t mu;
    struct h_lossrec_name names[H_LOSSREC_NAMES];
    int nnames;
    int overflow;       /* names that did not fit, or NULL names on LOCK_LOST */
    int kinds[8];       /* events per kind */
    int bad_lost_event; /* a LOCK_LOST event with a NULL name or NULL detail */
};

void h_lossrec_init(struct h_lossrec *r);
/* A client on url (NULL: h_url()) with watchdog timeout wd and the recorder
 * as on_lock_lost and on_event; fails the test if it cannot be opened. */
rlock_client *h_lossrec_open(const char *url, long long wd, struct h_lossrec *r);
/* on_lock_lost calls for name. */
int h_lossrec_lost(struct h_lossrec *r, const char *name);
/* RLOCK_EVENT_LOCK_LOST events for name. */
int h_lossrec_lost_events(struct h_lossrec *r, const char *name);
/* LOCK_LOST reports (calls + events) for names other than name, plus junk. */
int h_lossrec_others(struct h_lossrec *r, const char *name);

#endif /* RLOCK_TEST_HARNESS_LOSSREC_H */
