/*
 * fenced.c - bench_rlock fenced: a fenced lock's uncontended lock+unlock
 * cycle (rlock_try_lock_fenced, which also INCRs the token counter and
 * returns the token) beside a plain lock's (rlock_lock), one thread, in the
 * same run: the rounds alternate plain / fenced so that drift of the
 * machine's speed falls on both alike (test/bench/run.sh section 2).
 */
#include <unistd.h>

#include "bench_rlock.h"

typedef struct fen_ctx {
    rlock_client *client;
    int fenced;
} fen_ctx;

static void *fen_init(void *arg, int index) {
    fen_ctx *ctx = arg;
    char name[128];
    rlock *lock = NULL;
    snprintf(name, sizeof name, "bench:fenced:%ld:%d:%d", (long)getpid(), ctx->fenced, index);
    int rc = ctx->fenced ? rlock_get_fenced(ctx->client, name, &lock)
                         : rlock_get(ctx->client, name, &lock);
    if (check(rc, "rlock_get") < 0)
        exit(1);
    return lock;
}

static int plain_cycle(void *state) {
    if (check(rlock_lock(state), "rlock_lock") < 0)
        return -1;
    return check(rlock_unlock(state), "rlock_unlock");
}

static int fenced_cycle(void *state) {
    long long token = 0;
    if (check(rlock_try_lock_fenced(state, -1, RLOCK_LEASE_WATCHDOG, &token),
              "rlock_try_lock_fenced") < 0)
        return -1;
    return check(rlock_unlock(state), "rlock_unlock");
}

static void fen_fini(void *state) {
    rlock_free(state);
}

int bench_fenced(const options *o) {
    fen_ctx plain = {open_client(o, 0, 1), 0}, fen = {plain.client, 1};
    cycle_ops plain_ops = {fen_init, plain_cycle, fen_fini, &plain};
    cycle_ops fen_ops = {fen_init, fenced_cycle, fen_fini, &fen};
    double plain_ops_s[64], fen_ops_s[64], plain_p50[64], fen_p50[64], plain_p99[64], fen_p99[64];
    int rounds = o->rounds < 64 ? o->rounds : 64, rc = 0;
    long long errors = 0;
    fprintf(stderr, "fenced: 1 thread, %d alternating rounds of %.1f s each, plain then fenced\n",
            rounds, o->secs);
    for (int r = 0; r < rounds; r++) {
        cycle_result p, f;
        rc |= run_cycles(&plain_ops, 1, o->secs, 1, &p);
        rc |= run_cycles(&fen_ops, 1, o->secs, 1, &f);
        plain_ops_s[r] = p.ops_per_s, plain_p50[r] = p.p50_ms, plain_p99[r] = p.p99_ms;
        fen_ops_s[r] = f.ops_per_s, fen_p50[r] = f.p50_ms, fen_p99[r] = f.p99_ms;
        errors += p.errors + f.errors;
    }
    rlock_client_close(plain.client);
    double po = median(plain_ops_s, rounds), fo = median(fen_ops_s, rounds);
    jsonw j;
    j_begin(&j, "fenced");
    j_num(&j, "plain_ops_per_s", po);
    j_num(&j, "fenced_ops_per_s", fo);
    j_num(&j, "ratio", po > 0 ? fo / po : 0);
    j_num(&j, "plain_p50_ms", median(plain_p50, rounds));
    j_num(&j, "fenced_p50_ms", median(fen_p50, rounds));
    j_num(&j, "plain_p99_ms", median(plain_p99, rounds));
    j_num(&j, "fenced_p99_ms", median(fen_p99, rounds));
    j_int(&j, "rounds", rounds);
    j_num(&j, "round_s", o->secs);
    j_int(&j, "errors", errors);
    j_end(&j);
    return rc < 0 ? 1 : 0;
}
