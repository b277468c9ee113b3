/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * migration.c - bench_cluster's migration section: a thread runs lock+unlock
 * cycles on one name while its slot is migrated M times; unlock latency
 * inside the migration windows and outside them, redirects, failed calls,
 * and a watchdog lock held in the same slot throughout.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_cluster.h"

typedef struct mig_sample {
    uint64_t at_ns, unlock_ns;
} mig_sample;

typedef struct mig_run {
    rlock *lock;
    atomic_int stop;
    atomic_long failed, cycles;
    mig_sample *s;
    long cap, n;
} mig_run;

static void *mig_cycler(void *arg) {
    mig_run *r = arg;
    while (!atomic_load(&r->stop)) {
        int rc = rlock_lock(r->lock);
        if (rc != RLOCK_OK) {
            fprintf(stderr, "  migration: rlock_lock: %s\n", rlock_last_error());
            atomic_fetch_add(&r->failed, 1);
            raw_sleep_ms(1);
            continue;
        }
        uint64_t t1 = raw_now_ns();
        rc = rlock_unlock(r->lock);
        uint64_t t2 = raw_now_ns();
        if (rc != RLOCK_OK) {
            fprintf(stderr, "  migration: rlock_unlock: %s\n", rlock_last_error());
            atomic_fetch_add(&r->failed, 1);
        }
        if (r->n < r->cap)
            r->s[r->n++] = (mig_sample){t1, t2 - t1};
        atomic_fetch_add(&r->cycles, 1);
    }
    return NULL;
}

static atomic_long mig_lost;

static void mig_on_event(const rlock_event *ev, void *arg) {
    (void)arg;
    if (ev->kind == RLOCK_EVENT_LOCK_LOST)
        atomic_fetch_add(&mig_lost, 1);
    if (ev->kind == RLOCK_EVENT_LOCK_LOST || ev->kind == RLOCK_EVENT_RENEWAL_FAILED)
        fprintf(stderr, "  migration: event %d %s: %s\n", (int)ev->kind, ev->name ? ev->name : "-",
                ev->detail);
}

void bench_migration(int migrations, mig_result *out) {
    char name[64];
    snprintf(name, sizeof name, "bench:cl:mig:%d", (int)getpid());
    int slot = h_slot(name, strlen(name));
    /* A watchdog lock held all along in the same slot (no braces: its channel is
     * in that slot too), so MIGRATE moves a real lock and renewals cross it. */
    char held_name[64];
    for (int i = 0;; i++) {
        snprintf(held_name, sizeof held_name, "bench:cl:mig:held:%d:%d", (int)getpid(), i);
        if (h_slot(held_name, strlen(held_name)) == slot)
            break;
    }
    redisContext *mc[NMASTERS];
    for (int m = 0; m < NMASTERS; m++)
        mc[m] = master_conn(m);
    rlock_client *c = open_cluster_client(RLOCK_PUBSUB_AUTO, 3000, mig_on_event, NULL);
    mig_run run = {.cap = 2000000};
    run.s = calloc((size_t)run.cap, sizeof *run.s);
    rlock *held;
    if (rlock_get(c, name, &run.lock) != RLOCK_OK || rlock_get(c, held_name, &held) != RLOCK_OK ||
        rlock_lock(held) != RLOCK_OK)
        die("migration set-up: %s", rlock_last_error());
    uint64_t (*win)[2] = calloc((size_t)migrations, sizeof *win);
    redirects a, b;
    fprintf(stderr, "migration: lock+unlock cycles on %s (slot %d) through %d migrations\n", name,
            slot, migrations);
    pthread_t th;
    pthread_create(&th, NULL, mig_cycler, &run);
    raw_sleep_ms(300);
    redirects_take(mc, &a);
    double total_ms = 0;
    for (int k = 0; k < migrations; k++) {
        h_server *from = h_cluster_owner(hc, slot), *to = NULL;
        for (int m = 0; m < NMASTERS && to == NULL; m++) /* the next master after the owner */
            if (masters[m] == from)
                to = masters[(m + 1) % NMASTERS];
        if (to == NULL)
            die("%s", "the slot has no owner among the masters");
        long c0 = atomic_load(&run.cycles);
        h_migration mg;
        win[k][0] = raw_now_ns();
        h_cluster_migrate_begin(hc, slot, to, &mg);
        raw_sleep_ms(150); /* cycles in IMPORTING/MIGRATING, the key on the source */
        long c1 = atomic_load(&run.cycles);
        int keys = h_cluster_migrate_keys(hc, &mg);
        raw_sleep_ms(150); /* the key (if it was there) on the target: ASK */
        long c2 = atomic_load(&run.cycles);
        h_cluster_migrate_finish(hc, &mg);
        raw_sleep_ms(100); /* the first MOVED and after */
        win[k][1] = raw_now_ns();
        long c3 = atomic_load(&run.cycles);
        total_ms += (double)(win[k][1] - win[k][0]) / 1e6;
        fprintf(stderr, "  migration %d: :%d -> :%d, %d key(s) moved; cycles: %ld while "
                        "migrating, %ld after MIGRATE, %ld after SETSLOT NODE; %.0f ms\n",
                k + 1, h_server_port(from), h_server_port(to), keys, c1 - c0, c2 - c1, c3 - c2,
                (double)(win[k][1] - win[k][0]) / 1e6);
        raw_sleep_ms(200); /* steady state between migrations */
    }
    redirects_take(mc, &b);
    atomic_store(&run.stop, 1);
    pthread_join(th, NULL);
    int held_ok = rlock_unlock(held) == RLOCK_OK;
    if (!held_ok)
        fprintf(stderr, "  migration: unlock of the held lock: %s\n", rlock_last_error());
    samples in = {0}, outside = {0};
    for (long i = 0; i < run.n; i++) {
        int inside = 0;
        for (int k = 0; k < migrations && !inside; k++)
            inside = run.s[i].at_ns >= win[k][0] && run.s[i].at_ns <= win[k][1];
        samples_add(inside ? &in : &outside, run.s[i].unlock_ns);
    }
    samples_sort(&in);
    samples_sort(&outside);
    *out = (mig_result){.migrations = migrations,
                        .in_windows = (long)in.n,
                        .outside = (long)outside.n,
                        .p50 = samples_pct_ms(&in, 50),
                        .p99 = samples_pct_ms(&in, 99),
                        .max = samples_pct_ms(&in, 100),
                        .out_p50 = samples_pct_ms(&outside, 50),
                        .out_p99 = samples_pct_ms(&outside, 99),
                        .window_ms = total_ms / migrations,
                        .failed = atomic_load(&run.failed),
                        .moved = b.moved - a.moved,
                        .ask = b.ask - a.ask,
                        .tryagain = b.tryagain - a.tryagain,
                        .lost = atomic_load(&mig_lost),
                        .held_ok = held_ok};
    fprintf(stderr, "  unlock in windows: %ld cycles, p50 %.3f ms, p99 %.3f ms, max %.3f ms; "
                    "outside: %ld cycles, p50 %.3f ms, p99 %.3f ms; failed calls %lld; MOVED %lld "
                    "ASK %lld TRYAGAIN %lld\n",
            out->in_windows, out->p50, out->p99, out->max, out->outside, out->out_p50, out->out_p99,
            out->failed, out->moved, out->ask, out->tryagain);
    fprintf(stderr, "  held watchdog lock %s: unlocked %s, LOCK_LOST %lld\n", held_name,
            held_ok ? "OK" : "FAILED", out->lost);
    samples_free(&in);
    rlock_free(held);
    samples_free(&outside);
    rlock_free(run.lock);
    rlock_client_close(c);
    for (int m = 0; m < NMASTERS; m++)
        redisFree(mc[m]);
    free(run.s);
    free(win);
}
