/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * loglines.h - every line a client's log callback (rlock_config.log) got, in
 * order, with its level and whether it came on the client's event thread
 * (named "rlock-events"). The callback only records; the test reads the
 * record from its main thread (h_loglines_count, h_loglines_find) and
 * prints it when a check fails (h_loglines_dump).
 */
#ifndef RLOCK_TEST_HARNESS_LOGLINES_H
#define RLOCK_TEST_HARNESS_LOGLINES_H

#include <pthread.h>

#include "rlock.h"

#define H_LOGLINES_MAX 512

struct h_logline {
    int level;
    int on_event_thread; /* the callback ran on "rlock-events" */
    char text[640];
};

struct h_loglines {
    pthread_mutex_t mu;
    int n;
    int dropped;
    struct h_logline line[H_LOGLINES_MAX];
};

void h_loglines_init(struct h_loglines *r);
void h_loglines_destroy(struct h_loglines *r);
/* The callback: set cfg.log = h_loglines_cb and cfg.log_arg = r (h_loglines_init'ed). */
void h_loglines_cb(int level, const char *message, void *arg);
/* Lines whose text contains word (a " WORD" of the line's head: "LOCK_LOST", ...). */
int h_loglines_count(struct h_loglines *r, const char *word);
/* A copy of the first line containing word; fails the test if none does. */
struct h_logline h_loglines_find(struct h_loglines *r, const char *word);
/* Number of lines recorded. */
int h_loglines_n(struct h_loglines *r);
/* A copy of line i. */
struct h_logline h_loglines_get(struct h_loglines *r, int i);
/* Prints every line (for a person reading a failure). */
void h_loglines_dump(struct h_loglines *r);

#endif /* RLOCK_TEST_HARNESS_LOGLINES_H */
