/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * time.c - monotonic time (and the wall clock, where other processes must
 * agree on a time), condition variables on the monotonic clock, and number
 * formatting for the hot path (no snprintf per lock call).
 *
 * Pure helpers: any thread, no shared state.
 */
#include <errno.h>
#include <time.h>

#include "internal.h"

int64_t rlock__now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t rlock__now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t rlock__wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t rlock__deadline_after(long long ms) {
    int64_t now = rlock__now_ms();
    if (ms < 0 || ms >= RLOCK__NO_DEADLINE - now)
        return RLOCK__NO_DEADLINE;
    return now + ms;
}

int rlock__cond_init(pthread_cond_t *cond) {
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc != 0)
        return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

int rlock__cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t deadline_ms) {
    if (deadline_ms == RLOCK__NO_DEADLINE)
        return pthread_cond_wait(cond, mutex);
    struct timespec ts = {.tv_sec = deadline_ms / 1000, .tv_nsec = (deadline_ms % 1000) * 1000000};
    int rc = pthread_cond_timedwait(cond, mutex, &ts);
    return rc == ETIMEDOUT ? ETIMEDOUT : 0;
}

size_t rlock__fmt_u64(char *buf, uint64_t v) {
    size_t n = 1;
    for (uint64_t rest = v; rest >= 10; rest /= 10)
        n++;
    buf[n] = '\0';
    for (size_t i = n; i-- > 0; v /= 10) /* written from the end: no copy to reverse */
        buf[i] = (char)('0' + v % 10);
    return n;
}

size_t rlock__fmt_i64(char *buf, int64_t v) {
    if (v >= 0)
        return rlock__fmt_u64(buf, (uint64_t)v);
    buf[0] = '-';
    return 1 + rlock__fmt_u64(buf + 1, (uint64_t)0 - (uint64_t)v);
}
