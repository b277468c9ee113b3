/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * internal.h - PRIVATE to the engine's own files: what they share and the
 * layers above do not call (engine.h is the face). The holds table's set-up
 * and its watchdog side, the registration's set-up and refresh, the two
 * threads' starts (rlock__engine_start calls them).
 */
#ifndef RLOCK_ENGINE_INTERNAL_H
#define RLOCK_ENGINE_INTERNAL_H

#include "engine.h"

/* ---- holds.c, holds_watchdog.c ------------------------------------------------- */

int rlock__holds_init(rlock__holds *h);
void rlock__holds_destroy(rlock__holds *h);
/*
 * Copies the renewed entries into entries (rlock__renewal[]) and their names
 * into names; both buffers belong to the caller and are reused across calls.
 * Opens a round: no entry is freed until rlock__holds_round_end, so the
 * records can reach their entries without a lookup (one caller at a time:
 * the watchdog thread).
 */
int rlock__holds_snapshot(rlock__holds *h, rlock__buf *entries, rlock__buf *names, size_t *n);
/* Ends the round the last snapshot opened (if any): frees the entries unlinked meanwhile. */
void rlock__holds_round_end(rlock__holds *h);
/* A renewal of the snapshotted hold r was confirmed: its lease now ends at expires_ms. */
void rlock__holds_renewed(rlock__holds *h, const rlock__renewal *r, int64_t expires_ms);
/* Makes the snapshotted hold a tombstone if it is still that hold; 1 if so (report it). */
int rlock__holds_drop_lost(rlock__holds *h, const rlock__renewal *r);
/*
 * Makes every renewed hold past its lease at now_ms a tombstone and copies
 * them out (to report); *next_expiry_ms receives the earliest lease end left.
 */
int rlock__holds_sweep(rlock__holds *h, int64_t now_ms, rlock__buf *entries, rlock__buf *names,
                       size_t *n, int64_t *next_expiry_ms);

/* ---- registration.c ------------------------------------------------------------- */

int rlock__registration_init(rlock__registration *r);
void rlock__registration_destroy(rlock__registration *r);
/* The watchdog thread, after a round that worked: a rewrite if one is due, by by_ms. */
void rlock__registration_refresh(rlock__engine *e, int64_t by_ms);

/* ---- watchdog.c, subscriber.c: the threads --------------------------------------- */

int rlock__watchdog_start(rlock__engine *e, const void *owner_arg);
int rlock__waiters_start(rlock__engine *e);

#endif /* RLOCK_ENGINE_INTERNAL_H */
