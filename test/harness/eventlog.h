/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * eventlog.h - a log of what a client's callbacks saw, in order: every
 * on_event (kind, name, lease left, status, detail, arrival time) and every
 * on_lock_lost call (name, time). Optionally, on_lock_lost for one named lock
 * blocks in a try_lock with a wait (a slow callback). The callbacks only
 * record; the test checks the log from its main thread (h_evlog_count,
 * h_evlog_get) and prints it when a check fails (h_evlog_dump).
 */
#ifndef RLOCK_TEST_HARNESS_EVENTLOG_H
#define RLOCK_TEST_HARNESS_EVENTLOG_H

#include <pthread.h>
#include <stdint.h>

#include "rlock.h"

#define H_EVLOG_MAX 1024

struct h_evlog_event {
    int kind;
    int has_name;
    char name[192];
    long long lease_left_ms;
    int status;
    int has_detail; /* detail was not NULL */
    char detail[256];
    long long at_ms; /* h_now_ms() on arrival */
    uint64_t owner;  /* event->owner */
};

struct h_evlog_lost {
    char name[192];
    long long at_ms;
};

struct h_evlog {
    pthread_mutex_t mu;
    int n;
    int dropped;
    struct h_evlog_event ev[H_EVLOG_MAX];
    int nlost;
    struct h_evlog_lost lost[64];
    /* Optional, a slow callback: on_lock_lost for block_name runs
     * try_lock(block_lock, block_wait_ms) (set them under mu). */
    char block_name[192];
    rlock *block_lock;
    long long block_wait_ms;
    int block_started;
    int block_done;
    int block_rc;
    long long block_start_ms, block_end_ms;
};

void h_evlog_init(struct h_evlog *r);
void h_evlog_destroy(struct h_evlog *r);
/* A client on url with watchdog timeout wd, command timeout cmd_ms (if > 0)
 * and r as its on_lock_lost and on_event recorder; fails the test if it
 * cannot be opened. */
rlock_client *h_evlog_open(const char *url, long long wd, long long cmd_ms, struct h_evlog *r);
/* 1 once on_lock_lost for block_name has started its blocking try_lock. */
int h_evlog_block_started(struct h_evlog *r);
/* Number of events of kind (for name if not NULL); *first_ms / *first_idx
 * of the first one (may be NULL). */
int h_evlog_count(struct h_evlog *r, int kind, const char *name, long long *first_ms,
                  int *first_idx);
/* on_lock_lost calls (for name if not NULL). */
int h_evlog_lost_count(struct h_evlog *r, const char *name);
/* A copy of event i (the main thread checks it without holding the lock). */
struct h_evlog_event h_evlog_get(struct h_evlog *r, int i);
/* Number of events recorded. */
int h_evlog_n(struct h_evlog *r);
/* Prints every recorded event relative to t0 (for a person reading a failure). */
void h_evlog_dump(struct h_evlog *r, long long t0);

#endif /* RLOCK_TEST_HARNESS_EVENTLOG_H */
