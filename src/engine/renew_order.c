/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * renew_order.c - the order of a renewal round's scripts and how its entries
 * are cut into batches. On one server the snapshot goes as it is, but for
 * the holds of a renewer that renews by lock (a read-write lock's readers),
 * which are kept together, sorted by name, so that one script re-arms each
 * such lock once. On a Cluster the entries are grouped by node (a counting
 * sort) for RENEW_NODE scripts; what a node says is not its own goes in a
 * second pass, by slot, whose RENEW scripts follow their redirects.
 *
 * Threads: the watchdog thread only (watchdog.c); the round's buffers are
 * its own.
 */
#include <stdlib.h>
#include <string.h>

#include "watchdog.h"

/* On a Cluster, per round: the number of slot's node (in order of first sight); -1 on ENOMEM. */
static int node_number(rlock__engine *e, round_buffers *b, const rlock__renewal *r, int *nnodes) {
    int *slot_node = b->slot_node.data;
    const void **nodes = b->nodes.data;
    if (slot_node[r->slot] >= 0)
        return slot_node[r->slot];
    const void *node = rlock__net_node_of(e->net, r->name, r->name_len);
    int k = 0;
    while (k < *nnodes && nodes[k] != node)
        k++;
    if (k == *nnodes)
        nodes[(*nnodes)++] = node;
    return slot_node[r->slot] = k;
}

/* The holds of one lock together, in snapshot order (renewers that renew by lock). */
static int by_name(const void *a, const void *b) {
    const rlock__renewal *x = a, *y = b;
    size_t len = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, len);
    if (c == 0)
        c = (x->name_len > y->name_len) - (x->name_len < y->name_len);
    return c != 0 ? c : (x->index > y->index) - (x->index < y->index);
}

/* Sorts each run of one group whose renewer renews by lock by name (r in group order). */
static void sort_lock_runs(rlock__renewal *r, size_t n) {
    for (size_t first = 0, k; first < n; first += k) {
        for (k = 1; first + k < n && r[first + k].node == r[first].node; k++)
            ;
        if (r[first].renewer->by_lock)
            qsort(r + first, k, sizeof(*r), by_name);
    }
}

/*
 * The entries in the order the scripts take them: grouped by node on a
 * Cluster, and apart by renewer kind (a counting sort into b->sorted: O(n),
 * stable, and writing one stream per group, which the caches take well; by
 * slot it would be 16 384 streams), the holds of a renewer that renews by
 * lock sorted by name. On one server with no such holds: the snapshot
 * itself. Each keeps its place in the snapshot, so that the replies are
 * applied in the holds table's own order (settle_round), which keeps its
 * lookups in cache: applied in any other order they cost more than the
 * scripts.
 */
rlock__renewal *rlock__renew_in_script_order(rlock__engine *e, round_buffers *b, size_t n) {
    rlock__renewal *r = b->entries.data;
    int nnodes = 1, by_lock = 0;
    for (size_t i = 0; i < n; i++) {
        r[i].index = i;
        r[i].slot = rlock__net_slot_of(e->net, r[i].name, r[i].name_len);
        r[i].node = r[i].renewer->by_lock;
        by_lock |= r[i].node;
    }
    if (n == 0 || (r[0].slot < 0 && !by_lock))
        return r;
    if (rlock__buf_reserve(&b->sorted, n * sizeof(*r)) != RLOCK_OK ||
        rlock__buf_reserve(&b->slot_node, RLOCK__CLUSTER_SLOTS * sizeof(int)) != RLOCK_OK ||
        rlock__buf_reserve(&b->nodes, RLOCK__CLUSTER_SLOTS * sizeof(void *)) != RLOCK_OK ||
        rlock__buf_reserve(&b->counts, (2 * RLOCK__CLUSTER_SLOTS + 1) * sizeof(size_t)) != RLOCK_OK)
        return NULL;
    if (r[0].slot >= 0) {
        nnodes = 0;
        memset(b->slot_node.data, 0xff, RLOCK__CLUSTER_SLOTS * sizeof(int)); /* all -1 */
        for (size_t i = 0; i < n; i++)
            r[i].node += 2 * node_number(e, b, &r[i], &nnodes); /* node held by_lock */
    }
    int ngroups = 2 * nnodes;
    size_t *start = b->counts.data;
    rlock__renewal *sorted = b->sorted.data;
    memset(start, 0, ((size_t)ngroups + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++)
        start[r[i].node + 1]++;
    for (int k = 0; k < ngroups; k++)
        start[k + 1] += start[k];
    for (size_t i = 0; i < n; i++)
        sorted[start[r[i].node]++] = r[i];
    if (by_lock)
        sort_lock_runs(sorted, n);
    return sorted;
}

/* A Cluster's second pass: by slot, and within a slot as in_script_order. */
static int by_slot(const void *a, const void *b) {
    const rlock__renewal *x = a, *y = b;
    if (x->slot != y->slot)
        return (x->slot > y->slot) - (x->slot < y->slot);
    if (x->renewer->by_lock != y->renewer->by_lock)
        return x->renewer->by_lock - y->renewer->by_lock;
    return x->renewer->by_lock ? by_name(a, b) : (x->index > y->index) - (x->index < y->index);
}

/*
 * The number of entries from first on that one RENEW script takes: one
 * slot's of one script, <= RENEW_BATCH.
 */
size_t rlock__renew_slot_batch(const rlock__renewal *r, size_t first, size_t n) {
    size_t k = 1;
    while (first + k < n && k < RENEW_BATCH && r[first + k].slot == r[first].slot &&
           (r[first + k].renewer == r[first].renewer || /* the common case: no load */
            r[first + k].renewer->script == r[first].renewer->script))
        k++;
    return k;
}

/* The same for RENEW_NODE (r grouped by node and kind): one group's, <= RENEW_BATCH. */
size_t rlock__renew_node_batch(const rlock__renewal *r, size_t first, size_t n) {
    size_t k = 1;
    while (first + k < n && k < RENEW_BATCH && r[first + k].node == r[first].node)
        k++;
    return k;
}

/* The entries of r a RENEW_NODE pass found served elsewhere, into b->again by slot; how many. */
size_t rlock__renew_served_elsewhere(round_buffers *b, const rlock__renewal *r, size_t n) {
    const signed char *outcomes = b->outcomes.data;
    rlock__renewal *again = b->again.data;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (outcomes[r[i].index] == OUTCOME_ELSEWHERE)
            again[m++] = r[i];
    qsort(again, m, sizeof(*again), by_slot);
    return m;
}
