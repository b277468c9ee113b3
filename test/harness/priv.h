/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * priv.h - what the harness's own files share and the tests do not use: who
 * the test program's main process and thread are, and the run's time stamp
 * (all set by fail.c before main()).
 */
#ifndef RLOCK_TEST_HARNESS_PRIV_H
#define RLOCK_TEST_HARNESS_PRIV_H

/* 1 in the process that started the program (0 in a forked child). */
int h_in_main_process(void);
/* 1 on the main thread of that process. */
int h_on_main_thread(void);
/* CLOCK_REALTIME in ms at start-up (makes h_unique_name unique across runs). */
long long h_run_stamp(void);

#endif /* RLOCK_TEST_HARNESS_PRIV_H */
