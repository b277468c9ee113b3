/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redlock.c - bench_rlock redlock: the latency of acquiring a Redlock over
 * 3 masters of its own (redis-servers the harness starts, not the url's),
 * beside, in the same run and on the same masters:
 *
 *   single      rlock_try_lock(0, lease) on one master: the floor;
 *   redlock     rlock_redlock_try_lock(0, lease) over the 3: one fan-out;
 *   sequential  rlock_try_lock(0, lease) on each master in turn: the way
 *               Redisson's RedissonRedLock tries its members (one after
 *               another), the anchor to beat.
 *
 * Each cycle times one acquisition of each kind, in a rotating order (no
 * kind always runs first, on a warmer or colder CPU), and releases it
 * untimed; the Redlock's unlock is timed apart. Uncontended, lease locks,
 * one thread. The target -- Redlock p50 <= 1.3 x single -- is printed by
 * test/bench/run.sh, not asserted here.
 */
#include "bench_rlock.h"
#include "harness/server.h"

#define MASTERS 3
#define LEASE_MS 10000
#define WARMUP 300

enum { SINGLE, REDLOCK, SEQUENTIAL, UNLOCK, KINDS };

typedef struct redlock_bench {
    rlock_client *c[MASTERS];
    rlock *member[MASTERS];     /* the name on each master, for single and sequential */
    rlock_redlock *rl;
    samples lat[KINDS];
    int errors;
} redlock_bench;

static rlock_client *open_master(const char *url) {
    options o = {.url = url, .local_handoffs = -1};
    return open_client(&o, 0, 1);
}

/*
 * One timed acquisition of kind (released untimed; a Redlock's unlock is
 * recorded apart when record is set); its latency, or 0 after an error.
 */
static uint64_t acquire_timed(redlock_bench *b, int kind, int record) {
    long long validity;
    uint64_t start = raw_now_ns(), took = 0;
    int status = RLOCK_OK;
    switch (kind) {
    case SINGLE:
        status = rlock_try_lock(b->member[0], 0, LEASE_MS);
        took = raw_now_ns() - start;
        if (status == RLOCK_OK)
            status = rlock_unlock(b->member[0]);
        break;
    case REDLOCK:
        status = rlock_redlock_try_lock(b->rl, 0, LEASE_MS, &validity);
        took = raw_now_ns() - start;
        if (status == RLOCK_OK) {
            start = raw_now_ns();
            status = rlock_redlock_unlock(b->rl);
            if (record)
                samples_add(&b->lat[UNLOCK], raw_now_ns() - start);
        }
        break;
    default:
        for (int i = 0; i < MASTERS && status == RLOCK_OK; i++)
            status = rlock_try_lock(b->member[i], 0, LEASE_MS);
        took = raw_now_ns() - start;
        for (int i = 0; i < MASTERS && status == RLOCK_OK; i++)
            status = rlock_unlock(b->member[i]);
    }
    if (check(status, kind == REDLOCK ? "redlock" : "rlock_try_lock") < 0) {
        b->errors++;
        return 0;
    }
    return took;
}

static void put_kind(jsonw *j, const char *kind, samples *s) {
    char key[64];
    samples_sort(s);
    snprintf(key, sizeof key, "%s_p50_ms", kind);
    j_num(j, key, samples_pct_ms(s, 50));
    snprintf(key, sizeof key, "%s_p99_ms", kind);
    j_num(j, key, samples_pct_ms(s, 99));
}

int bench_redlock(const options *o) {
    h_server *srv[MASTERS];
    redlock_bench b = {.errors = 0};
    char name[96];
    snprintf(name, sizeof name, "bench:redlock:%d", (int)getpid());
    h_servers_start(MASTERS, srv);
    for (int i = 0; i < MASTERS; i++) {
        b.c[i] = open_master(h_server_url(srv[i]));
        if (check(rlock_get(b.c[i], name, &b.member[i]), "rlock_get") < 0)
            exit(1);
    }
    if (check(rlock_redlock_new(b.c, MASTERS, name, &b.rl), "rlock_redlock_new") < 0)
        exit(1);
    fprintf(stderr, "redlock: %ld cycles over %d masters of its own (+%d warm-up)\n", o->count,
            MASTERS, WARMUP);
    for (long i = -WARMUP; i < o->count && b.errors == 0; i++)
        for (int k = 0; k < 3; k++) {
            int kind = (int)((i + k) % 3 + 3) % 3;
            uint64_t took = acquire_timed(&b, kind, i >= 0);
            if (i >= 0 && took > 0)
                samples_add(&b.lat[kind], took);
        }
    jsonw j;
    j_begin(&j, "redlock");
    j_int(&j, "masters", MASTERS);
    j_int(&j, "cycles", o->count);
    j_int(&j, "lease_ms", LEASE_MS);
    put_kind(&j, "single", &b.lat[SINGLE]);
    put_kind(&j, "redlock", &b.lat[REDLOCK]);
    put_kind(&j, "sequential", &b.lat[SEQUENTIAL]);
    put_kind(&j, "redlock_unlock", &b.lat[UNLOCK]);
    j_num(&j, "redlock_to_single_p50",
          samples_pct_ms(&b.lat[REDLOCK], 50) / samples_pct_ms(&b.lat[SINGLE], 50));
    j_num(&j, "redlock_to_single_p99",
          samples_pct_ms(&b.lat[REDLOCK], 99) / samples_pct_ms(&b.lat[SINGLE], 99));
    j_num(&j, "sequential_to_single_p50",
          samples_pct_ms(&b.lat[SEQUENTIAL], 50) / samples_pct_ms(&b.lat[SINGLE], 50));
    j_int(&j, "errors", b.errors);
    j_end(&j);
    for (int k = 0; k < KINDS; k++)
        samples_free(&b.lat[k]);
    rlock_redlock_free(b.rl);
    for (int i = 0; i < MASTERS; i++) {
        rlock_free(b.member[i]);
        rlock_client_close(b.c[i]);
    }
    h_servers_stop(MASTERS, srv);
    return b.errors == 0 ? 0 : 1;
}
