/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * timing.c - the monotonic clock, sleeping, and the TEST_TIMEOUT_SCALE that
 * stretches every deadline of the tests; an interval timer's SIGALRMs.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "timing.h"

long long h_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

long long h_now_ms(void) {
    return h_now_us() / 1000;
}

void h_sleep_ms(long long ms) {
    struct timespec ts;
    if (ms <= 0)
        return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Default scale when TEST_TIMEOUT_SCALE is not set: sanitizer builds are
 * slower (make test SAN=thread does not set it). */
#if defined(__SANITIZE_THREAD__)
#define H_DEFAULT_SCALE 4
#elif defined(__SANITIZE_ADDRESS__)
#define H_DEFAULT_SCALE 2
#else
#define H_DEFAULT_SCALE 1
#endif

double h_scale(void) {
    static double scale;
    if (scale == 0) {
        const char *s = getenv("TEST_TIMEOUT_SCALE");
        double v = H_DEFAULT_SCALE;
        if (s && *s) {
            char *end;
            v = strtod(s, &end);
            if (*end || !(v >= 1) || v > 1000)
                v = H_DEFAULT_SCALE;
        }
        scale = v;
    }
    return scale;
}

long long h_scaled(long long ms) {
    double v = (double)ms * h_scale();
    long long r = (long long)v;
    return (double)r < v ? r + 1 : r;
}

struct timespec h_timespec_in(clockid_t clock, long long ms) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* ---- interval timer ---------------------------------------------------- */

static atomic_long h_alarms;

static void h_count_alarm(int sig) {
    (void)sig;
    atomic_fetch_add(&h_alarms, 1);
}

void h_alarms_start(long interval_us) {
    struct sigaction sa;
    struct itimerval every = {.it_interval = {.tv_sec = interval_us / 1000000,
                                              .tv_usec = interval_us % 1000000}};
    every.it_value = every.it_interval;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h_count_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    atomic_store(&h_alarms, 0);
    setitimer(ITIMER_REAL, &every, NULL);
}

long h_alarms_stop(void) {
    struct itimerval off;
    memset(&off, 0, sizeof off);
    setitimer(ITIMER_REAL, &off, NULL);
    return atomic_load(&h_alarms);
}
