/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * holds.h - PRIVATE to the holds table's two files: holds.c (the table, and
 * what application threads do with it) and holds_watchdog.c (what the
 * watchdog thread does with it: snapshots, renewals, sweeps). The rest of
 * the engine sees rlock__holds through engine.h only.
 *
 * Locking: holds.mutex (engine.h) guards the table and every field of every
 * entry below.
 */
#ifndef RLOCK_ENGINE_HOLDS_H
#define RLOCK_ENGINE_HOLDS_H

#include "internal.h"

enum { ENTRY_HELD, ENTRY_LOST };

struct rlock__hold {
    rlock__hold *next;   /* bucket chain */
    uint64_t owner;  /* the thread whose hold this is */
    const rlock__renewer *renewer; /* its kind of hold (static) */
    uint64_t serial;     /* new for every entry created */
    long long count;     /* last hold count Redis reported to the owner */
    int64_t expires_ms;  /* lease end by the client's clock (monotonic ms) */
    int64_t acquired_us; /* when this hold began (its hold time is measured from it) */
    int state;           /* ENTRY_HELD, or ENTRY_LOST: a reported tombstone */
    int renew;           /* the watchdog renews it */
    int releasing;       /* unlocks in flight: the watchdog must not call it lost */
    int unsure;          /* an unlock's outcome is unknown: Redis may hold count - 1 */
    uint32_t hash;
    size_t name_len;
    char name[];         /* not NUL-terminated */
};

/* Makes e a reported tombstone: no longer renewed, kept for its owner to learn (mutex held). */
void rlock__holds_bury(rlock__holds *h, rlock__hold *e);
/* Frees the entries unlinked while a round was open (mutex held, no round open). */
void rlock__holds_free_graveyard(rlock__holds *h);

#endif /* RLOCK_ENGINE_HOLDS_H */
