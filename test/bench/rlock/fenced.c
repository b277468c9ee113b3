/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fenced.c - bench_rlock fenced: a fenced lock's uncontended lock+unlock
 * cycle (rlock_try_lock_fenced, which also INCRs the token counter and
 * returns the token) beside a plain lock's (rlock_lock), one thread, in the
 * same run (test/bench/run.sh section 2).
 *
 * The two cycles alternate one by one and each is timed on its own: on a
 * shared machine the speed of a loopback round trip changes by 2-3x from
 * one second to the next (where the scheduler puts client and server), and
 * back-to-back pairs see the same conditions, so their ratio is steady where
 * the ratio of two separate runs is not. cycles/s is 1 / mean cycle time.
 */
#include <unistd.h>

#include "bench_rlock.h"

static rlock *make(rlock_client *c, int fenced) {
    char name[128];
    rlock *lock = NULL;
    snprintf(name, sizeof name, "bench:fenced:%ld:%d", (long)getpid(), fenced);
    if (check(fenced ? rlock_get_fenced(c, name, &lock) : rlock_get(c, name, &lock),
              "rlock_get") < 0)
        exit(1);
    return lock;
}

/* One timed cycle into s; -1 on an rlock error. */
static int timed_cycle(rlock *lock, int fenced, samples *s, long long *token) {
    uint64_t t0 = raw_now_ns();
    int rc = fenced ? rlock_try_lock_fenced(lock, -1, RLOCK_LEASE_WATCHDOG, token)
                    : rlock_lock(lock);
    if (check(rc, fenced ? "rlock_try_lock_fenced" : "rlock_lock") < 0 ||
        check(rlock_unlock(lock), "rlock_unlock") < 0)
        return -1;
    samples_add(s, raw_now_ns() - t0);
    return 0;
}

static double mean_ms(const samples *s) {
    double sum = 0;
    for (size_t i = 0; i < s->n; i++)
        sum += (double)s->v[i];
    return s->n ? sum / (double)s->n / 1e6 : 0;
}

int bench_fenced(const options *o) {
    rlock_client *c = open_client(o, 0, 1);
    rlock *plain = make(c, 0), *fen = make(c, 1);
    samples ps = {0}, fs = {0};
    long long token = 0, last = 0, errors = 0;
    double secs = o->secs * o->rounds;
    fprintf(stderr, "fenced: 1 thread, plain and fenced cycles alternating for %.1f s\n", secs);
    for (int i = 0; i < 1000 && errors == 0; i++) /* warm-up */
        errors += timed_cycle(plain, 0, &ps, &token) < 0 || timed_cycle(fen, 1, &fs, &token) < 0;
    ps.n = fs.n = 0;
    uint64_t end = raw_now_ns() + (uint64_t)(secs * 1e9);
    while (errors == 0 && raw_now_ns() < end) {
        errors += timed_cycle(plain, 0, &ps, &token) < 0 || timed_cycle(fen, 1, &fs, &token) < 0;
        errors += token <= last; /* tokens must grow */
        last = token;
    }
    rlock_free(plain);
    rlock_free(fen);
    rlock_client_close(c);
    double pm = mean_ms(&ps), fm = mean_ms(&fs);
    samples_sort(&ps);
    samples_sort(&fs);
    jsonw j;
    j_begin(&j, "fenced");
    j_num(&j, "plain_ops_per_s", pm > 0 ? 1000 / pm : 0);
    j_num(&j, "fenced_ops_per_s", fm > 0 ? 1000 / fm : 0);
    j_num(&j, "ratio", fm > 0 ? pm / fm : 0);
    j_num(&j, "plain_p50_ms", samples_pct_ms(&ps, 50));
    j_num(&j, "fenced_p50_ms", samples_pct_ms(&fs, 50));
    j_num(&j, "plain_p99_ms", samples_pct_ms(&ps, 99));
    j_num(&j, "fenced_p99_ms", samples_pct_ms(&fs, 99));
    j_int(&j, "pairs", (long long)fs.n);
    j_num(&j, "run_s", secs);
    j_int(&j, "last_token", last);
    j_int(&j, "errors", errors);
    j_end(&j);
    samples_free(&ps);
    samples_free(&fs);
    return errors ? 1 : 0;
}
