/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fail.h - failing the current test from harness code (h_fail), and the
 * assertion and polling macros built on it. What a failure does in a child
 * process or on a helper thread: see harness.h.
 */
#ifndef RLOCK_TEST_HARNESS_FAIL_H
#define RLOCK_TEST_HARNESS_FAIL_H

#include <string.h>

#include "rlock.h"
#include "timing.h"

#if defined(__GNUC__)
#define H_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define H_NORETURN __attribute__((noreturn))
#else
#define H_PRINTF(fmt, args)
#define H_NORETURN
#endif

/* Reports "file:line: message" and fails the current test. */
H_NORETURN void h_fail(const char *file, int line, const char *fmt, ...) H_PRINTF(3, 4);
#define H_FAIL(...) h_fail(__FILE__, __LINE__, __VA_ARGS__)

/* Fails unless expr == want (rlock status codes, printed by name). */
#define H_ASSERT_RC(expr, want)                                                                    \
    do {                                                                                           \
        int h_rc_ = (expr), h_want_ = (want);                                                      \
        if (h_rc_ != h_want_)                                                                      \
            h_fail(__FILE__, __LINE__, "%s = %s (%d), expected %s (%d)", #expr,                    \
                   rlock_status_name(h_rc_), h_rc_, rlock_status_name(h_want_), h_want_);          \
    } while (0)

/* Fails unless lo <= v <= hi. */
#define H_ASSERT_BETWEEN(v, lo, hi)                                                                \
    do {                                                                                           \
        long long h_v_ = (v), h_lo_ = (lo), h_hi_ = (hi);                                          \
        if (h_v_ < h_lo_ || h_v_ > h_hi_)                                                          \
            h_fail(__FILE__, __LINE__, "%s = %lld, expected %lld..%lld", #v, h_v_, h_lo_, h_hi_);  \
    } while (0)

/*
 * Polls cond every few ms until it is true; fails the test if it is still
 * false after timeout_ms (scaled by TEST_TIMEOUT_SCALE). cond is evaluated
 * once more after the deadline, so a slow last poll cannot cause a failure.
 */
#define H_POLL_MS 3
#define H_WAIT_FOR(cond, timeout_ms)                                                               \
    do {                                                                                           \
        long long h_wf_limit_ = h_scaled(timeout_ms);                                              \
        long long h_wf_deadline_ = h_now_ms() + h_wf_limit_;                                       \
        while (!(cond)) {                                                                          \
            if (h_now_ms() >= h_wf_deadline_) {                                                    \
                if (cond)                                                                          \
                    break;                                                                         \
                h_fail(__FILE__, __LINE__, "condition still false after %lld ms: %s", h_wf_limit_, \
                       #cond);                                                                     \
            }                                                                                      \
            h_sleep_ms(H_POLL_MS);                                                                 \
        }                                                                                          \
    } while (0)

/* As H_WAIT_FOR, but evaluates to 1 if cond became true and 0 on timeout
 * instead of failing. */
#define H_POLL_UNTIL(cond, timeout_ms)                                                             \
    __extension__({                                                                                \
        long long h_pu_deadline_ = h_now_ms() + h_scaled(timeout_ms);                              \
        int h_pu_ok_ = 0;                                                                          \
        for (;;) {                                                                                 \
            if (cond) {                                                                            \
                h_pu_ok_ = 1;                                                                      \
                break;                                                                             \
            }                                                                                      \
            if (h_now_ms() >= h_pu_deadline_)                                                      \
                break;                                                                             \
            h_sleep_ms(H_POLL_MS);                                                                 \
        }                                                                                          \
        h_pu_ok_;                                                                                  \
    })

#endif /* RLOCK_TEST_HARNESS_FAIL_H */
