/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * internal.h - PRIVATE to the core's own files (core.h is the face): a
 * library thread's start, the log lines of events, and the allocator's test
 * hook (test_alloc includes this header for it).
 */
#ifndef RLOCK_CORE_INTERNAL_H
#define RLOCK_CORE_INTERNAL_H

#include "core.h"

/* ---- alloc.c ------------------------------------------------------------------ */

/* Test hook: the n-th allocation from now fails (n >= 1); 0 disables. */
void rlock__alloc_fail_after(long n);

/* ---- worker.c ------------------------------------------------------------------ */

/* Starts a library thread with every signal blocked. */
int rlock__start_thread(pthread_t *thread, void *(*main_fn)(void *), void *arg);

/* ---- log.c, events.c: events as log lines ---------------------------------------- */

/* The level an event is logged at. */
int rlock__event_level(rlock_event_kind kind);
/* Formats event as its log line into buf (size bytes). */
void rlock__event_line(const rlock__settings *s, const rlock_event *event, char *buf,
                       size_t size);
/* events.c: queues a formatted line for the event thread to pass to the log callback. */
void rlock__post_line(rlock__events *ev, int level, const char *line);

#endif /* RLOCK_CORE_INTERNAL_H */
