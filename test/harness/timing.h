/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * timing.h - clocks, sleeping, and TEST_TIMEOUT_SCALE: every deadline of the
 * tests goes through h_scaled().
 */
#ifndef RLOCK_TEST_HARNESS_TIMING_H
#define RLOCK_TEST_HARNESS_TIMING_H

#include <time.h>

/* CLOCK_MONOTONIC in milliseconds. */
long long h_now_ms(void);
/* CLOCK_MONOTONIC in microseconds. */
long long h_now_us(void);
/* Sleeps ms milliseconds (restarting on EINTR). For pacing only: never use
 * it to wait for a condition, use H_WAIT_FOR. */
void h_sleep_ms(long long ms);
/* TEST_TIMEOUT_SCALE (>= 1; default 1, or 2 under ASan and 4 under TSan). */
double h_scale(void);
/* ms * TEST_TIMEOUT_SCALE, rounded up. */
long long h_scaled(long long ms);
#define H_MS(ms) h_scaled(ms)
/* The time ms milliseconds (used as given) from now on clock, as an absolute
 * timespec for pthread_cond_timedwait, pthread_timedjoin_np and the like. */
struct timespec h_timespec_in(clockid_t clock, long long ms);

/* Starts SIGALRM every interval_us (setitimer ITIMER_REAL, SA_RESTART), as a
 * profiler or a timer library would; a handler counts them. */
void h_alarms_start(long interval_us);
/* Stops the timer; returns how many SIGALRMs arrived since h_alarms_start.
 * The counting handler stays installed: a SIGALRM raised before the timer
 * stopped can still be pending (valgrind delivers signals late), and the
 * default action would end the test process. */
long h_alarms_stop(void);

#endif /* RLOCK_TEST_HARNESS_TIMING_H */
