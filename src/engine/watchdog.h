/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watchdog.h - PRIVATE to the engine's renewal files: what watchdog.c (the
 * thread and its rounds) and renew_order.c (the order and batches of a
 * round's scripts, a Cluster's by node) share. The rest of the engine sees
 * only rlock__watchdog_start/stop (engine.h).
 *
 * Threads: the watchdog thread only.
 */
#ifndef RLOCK_ENGINE_WATCHDOG_H
#define RLOCK_ENGINE_WATCHDOG_H

#include "internal.h"

#define RENEW_BATCH 500

/*
 * Scratch memory of the renewal rounds, owned by the watchdog thread and
 * reused from round to round (100k locks would otherwise cost megabytes of
 * fresh, page-faulting memory every round).
 */
typedef struct round_buffers {
    rlock__buf entries;  /* rlock__renewal[n], the snapshot (the holds table's order) */
    rlock__buf sorted;   /* on a Cluster: the same in slot order */
    rlock__buf counts;   /* on a Cluster: size_t per node, for the counting sort */
    rlock__buf slot_node; /* on a Cluster: int per slot, its node's number this round or -1 */
    rlock__buf nodes;    /* on a Cluster: the round's nodes (identities) by number */
    rlock__buf outcomes; /* signed char[n] by snapshot place: what the round found */
    rlock__buf names;    /* the snapshot's names */
    rlock__buf owners;   /* one "<uuid>:<tid>" per distinct owning thread */
    rlock__buf argv;     /* per batch: k names, lease, k owners */
    rlock__buf argvlen;
    rlock__buf cmds;
    rlock__buf firsts;   /* per command: the index of its first entry */
    rlock__buf replies;
    rlock__buf failed;   /* rlock__renewal[]: the entries whose renewal failed */
    rlock__buf again;    /* rlock__renewal[]: a Cluster's second pass (served elsewhere) */
} round_buffers;

/* What a round found of an entry (round_buffers.outcomes). */
enum { OUTCOME_NONE, OUTCOME_RENEWED, OUTCOME_GONE, OUTCOME_ELSEWHERE };

/*
 * The entries of b->entries[0..n) in the order the scripts take them (see
 * renew_order.c); NULL on ENOMEM.
 */
rlock__renewal *rlock__renew_in_script_order(rlock__engine *e, round_buffers *b, size_t n);
/* The number of entries from first on that one RENEW script takes: one slot's of one script. */
size_t rlock__renew_slot_batch(const rlock__renewal *r, size_t first, size_t n);
/* The same for RENEW_NODE (r grouped by node and kind): one group's, <= RENEW_BATCH. */
size_t rlock__renew_node_batch(const rlock__renewal *r, size_t first, size_t n);
/* The entries of r a RENEW_NODE pass found served elsewhere, into b->again by slot; how many. */
size_t rlock__renew_served_elsewhere(round_buffers *b, const rlock__renewal *r, size_t n);

#endif /* RLOCK_ENGINE_WATCHDOG_H */
