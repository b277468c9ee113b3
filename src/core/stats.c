/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stats.c - a client's counters, gauges and histograms (rlock_client_stats):
 * the histogram buckets and reading everything out.
 *
 * Every field is a relaxed atomic, written by whichever thread sees the
 * happening and read by rlock_client_stats; the increments themselves are
 * inline in core.h (one atomic add, no call). No locking, no allocation.
 * Threads: any.
 */
#include "internal.h"

/* The buckets' upper bounds: a 1-2-5 series of microseconds (the header's). */
static const long long bounds_us[RLOCK_STATS_BUCKETS - 1] = {
    10,      20,      50,      100,      200,      500,      1000,     2000,
    5000,    10000,   20000,   50000,    100000,   200000,   500000,   1000000,
    2000000, 5000000, 10000000, 20000000, 50000000, 100000000};

long long rlock_stats_bucket_us(int i) {
    return i >= 0 && i < RLOCK_STATS_BUCKETS - 1 ? bounds_us[i] : -1;
}

void rlock__observe_us(rlock__histogram *h, int64_t us) {
    int i = 0;
    if (us < 0)
        us = 0;
    while (i < RLOCK_STATS_BUCKETS - 1 && us > bounds_us[i])
        i++; /* short durations, the common ones, end the scan early */
    atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, (unsigned long long)us, memory_order_relaxed);
}

static unsigned long long get(atomic_ullong *v) {
    return atomic_load_explicit(v, memory_order_relaxed);
}

/* A gauge never reads below 0 (an increment and its decrement may be seen out of order). */
static unsigned long long get_gauge(atomic_llong *v) {
    long long n = atomic_load_explicit(v, memory_order_relaxed);
    return n > 0 ? (unsigned long long)n : 0;
}

static void read_histogram(rlock__histogram *h, rlock_histogram *out) {
    out->count = 0;
    for (int i = 0; i < RLOCK_STATS_BUCKETS; i++) {
        out->buckets[i] = get(&h->buckets[i]);
        out->count += out->buckets[i];
    }
    out->sum_us = get(&h->sum_us);
}

void rlock__stats_read(rlock__stats *st, rlock_stats *out) {
    atomic_ullong *c = st->counters;
    out->acquired_immediately = get(&c[RLOCK__COUNT_ACQUIRED_IMMEDIATELY]);
    out->acquired_after_wait = get(&c[RLOCK__COUNT_ACQUIRED_AFTER_WAIT]);
    out->acquisitions = out->acquired_immediately + out->acquired_after_wait;
    out->busy = get(&c[RLOCK__COUNT_BUSY]);
    out->unlocks = get(&c[RLOCK__COUNT_UNLOCKS]);
    for (int i = 0; i < RLOCK_STATS_ERROR_SLOTS; i++)
        out->errors[i] = get(&st->errors[i]);
    out->handoffs_local = get(&c[RLOCK__COUNT_HANDOFFS_LOCAL]);
    out->handoffs_remote = get(&c[RLOCK__COUNT_HANDOFFS_REMOTE]);
    out->renewals = get(&c[RLOCK__COUNT_RENEWALS]);
    out->renewal_failures = get(&c[RLOCK__COUNT_RENEWAL_FAILURES]);
    out->losses = get(&c[RLOCK__COUNT_LOSSES]);
    out->connections = get(&c[RLOCK__COUNT_CONNECTIONS]);
    out->connection_failures = get(&c[RLOCK__COUNT_CONNECTION_FAILURES]);
    out->reconnects = get(&c[RLOCK__COUNT_RECONNECTS]);
    out->resubscriptions = get(&c[RLOCK__COUNT_RESUBSCRIPTIONS]);
    out->master_switches = get(&c[RLOCK__COUNT_MASTER_SWITCHES]);
    out->subscribe_refusals = get(&c[RLOCK__COUNT_SUBSCRIBE_REFUSALS]);
    out->name_refusals = get(&c[RLOCK__COUNT_NAME_REFUSALS]);
    out->registration_failures = get(&c[RLOCK__COUNT_REGISTRATION_FAILURES]);
    out->waiting_threads = get_gauge(&st->waiting_threads);
    out->pool_in_use = get_gauge(&st->pool_in_use);
    read_histogram(&st->wait_time, &out->wait_time);
    read_histogram(&st->hold_time, &out->hold_time);
}
