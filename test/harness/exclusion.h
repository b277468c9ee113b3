/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * exclusion.h - a mutual-exclusion contest across processes: N forked
 * processes x M threads take one lock over and over (rlock_try_lock with a
 * 2 s wait, watchdog lease). Each process opens its own client from the
 * rlock_config the caller filled (url, replica_acks, retries...). Each holder
 * checks, in memory the processes share (MAP_SHARED before fork), that
 * nobody else is inside, and increments a counter with a read, a 300 us
 * pause and a write: the counter is exact only if no two holders overlapped.
 *
 * Refused attempts (timeouts, ENOREPL, EIO, BUSY...) are counted per process
 * and tried again after 20 ms. Unlocks that do not return RLOCK_OK are
 * counted, with the last status and one rlock_last_error() message: whether
 * one is allowed is the caller's decision (with replica_acks an unlock can
 * legitimately say RLOCK_ENOREPL).
 *
 * Start, stop and the waiting helpers run on the test's main thread; they
 * fail the test (h_fail) on a harness failure. The assertions on the result
 * are the caller's.
 */
#ifndef RLOCK_TEST_HARNESS_EXCLUSION_H
#define RLOCK_TEST_HARNESS_EXCLUSION_H

#include <sys/types.h>

#include "rlock.h"

#define H_EXCL_MAX_PROCESSES 16
#define H_EXCL_MAX_THREADS 64

typedef struct h_excl_shared h_excl_shared;

typedef struct h_exclusion {
    h_excl_shared *sh; /* MAP_SHARED, read by the parent while the contest runs */
    pid_t pid[H_EXCL_MAX_PROCESSES];
    int processes;
} h_exclusion;

/* What the contest did, collected after every process has ended. */
typedef struct h_excl_result {
    int processes;
    long acquisitions;
    long counter; /* == acquisitions only if no two holders overlapped */
    int overlaps; /* times a holder found another inside */
    long overruns; /* holders that left after their validity (h_excl_ops) */
    long per_process[H_EXCL_MAX_PROCESSES];
    long refused[H_EXCL_MAX_PROCESSES];     /* try_lock not RLOCK_OK: tried again */
    int last_refusal[H_EXCL_MAX_PROCESSES]; /* its last status (RLOCK_OK if none) */
    long bad_unlocks;                       /* unlocks not RLOCK_OK (a hold lost, or ENOREPL) */
    int last_bad_unlock;                    /* the last one's status */
    char bad_unlock_msg[256];               /* rlock_last_error() of one of them */
} h_excl_result;

/*
 * What the contest's threads take and give back, for a contest over another
 * kind of lock than one rlock handle (a Redlock, a multi-lock). In each
 * process: open(arg, process) once (NULL: the process exits 2), then per
 * thread acquire / release on what it returned, and close at the end.
 * acquire returns an rlock status; on RLOCK_OK it sets *valid_ms to how long
 * from now the holder may count on the lock (a Redlock's validity), or -1
 * for no such bound. A holder still inside after that counts as an overrun:
 * an overlap then would not be the lock's fault.
 */
typedef struct h_excl_ops {
    void *(*open)(const void *arg, int process);
    int (*acquire)(void *ctx, long long *valid_ms);
    int (*release)(void *ctx);
    void (*close)(void *ctx);
    const void *arg;
} h_excl_ops;

/* rlock_config_init, then the contest's client settings: url, watchdog
 * timeout 3 s, 40 retries 250 ms apart (a failover or a slot move takes
 * seconds). The caller may change or add fields before h_excl_start. */
void h_excl_config(rlock_config *cfg, const char *url);
/*
 * Forks processes (<= H_EXCL_MAX_PROCESSES) processes of threads (<=
 * H_EXCL_MAX_THREADS) threads each on lock name, each process with its own
 * client opened from *cfg (as it is at the fork). A process gets SIGKILL if
 * the test's thread dies; it exits 2 if its client cannot be opened, 3 if
 * rlock_get fails, 4 if a thread cannot be started. Returns at once.
 */
void h_excl_start(h_exclusion *ex, const rlock_config *cfg, const char *name, int processes,
                  int threads);
/* The same contest over ops (h_excl_start runs it over one rlock handle per process). */
void h_excl_start_ops(h_exclusion *ex, const h_excl_ops *ops, int processes, int threads);
/* Acquisitions so far (all processes). */
long h_excl_acquisitions(const h_exclusion *ex);
/* Waits up to timeout_ms (scaled) for more acquisitions than there are now
 * ("still going"); fails the test otherwise. */
void h_excl_wait_more(const h_exclusion *ex, long more, long long timeout_ms);
/*
 * Tells every thread to stop, waits up to timeout_ms (scaled) for each
 * process, fills *r and frees the shared memory. Fails the test if a process
 * did not exit with status 0.
 */
void h_excl_stop(h_exclusion *ex, long long timeout_ms, h_excl_result *r);
/* Prints the totals, one unlock message if any, and a line per process. */
void h_excl_print(const h_excl_result *r);

#endif /* RLOCK_TEST_HARNESS_EXCLUSION_H */
