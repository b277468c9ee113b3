/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cancel_skip.h - for cmocka test files only (it uses cmocka's skip() and
 * print_message(); the harness itself does not depend on cmocka): skips a
 * test that cancels a thread inside the library when built with ASan, which
 * reports a false stack-buffer-underflow when pthread_cancel unwinds through
 * the library's pthread_cleanup_push (google/sanitizers#1399). Such tests
 * still run plain, under TSan and under valgrind.
 */
#ifndef RLOCK_TEST_HARNESS_CANCEL_SKIP_H
#define RLOCK_TEST_HARNESS_CANCEL_SKIP_H

#if defined(__SANITIZE_ADDRESS__)
#define H_SKIP_CANCEL_UNDER_ASAN()                                                                 \
    do {                                                                                           \
        print_message("      skipped under ASan (false positive on pthread_cancel unwinding)\n"); \
        skip();                                                                                    \
    } while (0)
#else
#define H_SKIP_CANCEL_UNDER_ASAN() ((void)0)
#endif

#endif /* RLOCK_TEST_HARNESS_CANCEL_SKIP_H */
