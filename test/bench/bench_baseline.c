/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_baseline.c - the floor rlock is measured against: a raw hiredis
 * client doing exactly what an ideal lock client must do for one
 * uncontended lock + unlock, and nothing else.
 *
 * One cycle = EVALSHA acquire + EVALSHA release on the thread's own
 * connection, with the very Lua text of src/scripts.c (read from the
 * library), the same key layout (hash <name>, field "<uuid>:<thread>",
 * channel redisson_lock__channel:{<name>}) and the same arguments rlock sends
 * for a watchdog lock (lease 30000 ms, expected hold counts 0 and 1). Each
 * thread has its own connection and its own key, so the threads never
 * contend; the only shared resources are the CPU and the server.
 *
 *   bench_baseline [--url URL] [-t THREADS] [-d SECONDS] [-r ROUNDS]
 *   bench_baseline [--url URL] --handoff N [--samples FILE]
 *
 * The second form measures the floor of a hand-off between two processes
 * (floor.h): the waiter blocks reading its own SUBSCRIBE connection, the
 * holder's release script publishes to it, the waiter runs the acquire
 * script again. Two round trips and one message, no threads in between:
 * what no library can beat on this machine.
 *
 * Prints progress on stderr and one JSON line on stdout.
 */
#include <getopt.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "bench/bench.h"
#include "bench/floor.h"
#include "kind/kind.h"

/*
 * The library's own Lua text (src/scripts.c), taken from librlock.a so the
 * baseline can never drift from what rlock runs; only the client side here is
 * raw hiredis.
 */
#define acquire_lua rlock__script_body(RLOCK__SCRIPT_ACQUIRE)
#define release_lua rlock__script_body(RLOCK__SCRIPT_RELEASE)

typedef struct config {
    const char *url;
    char uuid[37];
    char acquire_sha[41], release_sha[41];
} config;

/* One thread's connection and the argv of its two commands, built once. */
typedef struct base_thread {
    redisContext *c;
    floor_cycle cycle;
} base_thread;

static int load_script(redisContext *c, const char *body, char *sha) {
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", body);
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok)
        memcpy(sha, r->str, 41);
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

static void *base_init(void *arg, int index) {
    const config *cfg = arg;
    base_thread *t = calloc(1, sizeof *t);
    if (t == NULL || (t->c = raw_connect(cfg->url)) == NULL) {
        free(t);
        return NULL;
    }
    floor_cycle_init(&t->cycle, "bench:base", index, cfg->uuid, cfg->acquire_sha,
                     cfg->release_sha);
    return t;
}

static redisReply *send_plain(void *conn, int argc, const char **argv, const size_t *len) {
    return redisCommandArgv(conn, argc, argv, len);
}

/* One lock + unlock; checks the replies mean "acquired 1" and "released". */
static int base_cycle(void *state) {
    base_thread *t = state;
    return floor_cycle_run(&t->cycle, send_plain, t->c);
}

static void base_fini(void *state) {
    base_thread *t = state;
    redisFree(t->c);
    free(t);
}

/* ---- hand-off floor (floor.h) ------------------------------------------- */

static int handoff_floor(const config *cfg, long n, const char *samples_path) {
    char key[64];
    snprintf(key, sizeof key, "bench:base:handoff:%d", (int)getpid());
    floor_cfg f = {.cmd_url = cfg->url, .sub_url = cfg->url, .subscribe = "SUBSCRIBE",
                   .publish = "publish", .acquire_sha = cfg->acquire_sha,
                   .release_sha = cfg->release_sha, .key = key, .uuid = cfg->uuid};
    fprintf(stderr, "baseline hand-off floor: %ld hand-offs between two processes\n", n);
    samples s = {0};
    long errors = floor_handoffs(&f, n, &s);
    samples_write_cdf(&s, samples_path);
    jsonw j;
    j_begin(&j, "baseline_handoff");
    j_int(&j, "handoffs", (long long)s.n);
    j_num(&j, "p50_ms", samples_pct_ms(&s, 50));
    j_num(&j, "p90_ms", samples_pct_ms(&s, 90));
    j_num(&j, "p99_ms", samples_pct_ms(&s, 99));
    j_num(&j, "p999_ms", samples_pct_ms(&s, 99.9));
    j_num(&j, "max_ms", samples_pct_ms(&s, 100));
    j_int(&j, "errors", errors);
    j_end(&j);
    samples_free(&s);
    return errors ? 1 : 0;
}

static void usage(FILE *out) {
    fprintf(out, "usage: bench_baseline [--url URL] [-t THREADS] [-d SECONDS] [-r ROUNDS]\n"
                 "       bench_baseline [--url URL] --handoff N [--samples FILE]\n"
                 "  raw hiredis EVALSHA acquire + release cycles with rlock's scripts,\n"
                 "  or the floor of a cross-process hand-off (SUBSCRIBE + PUBLISH)\n");
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"url", required_argument, NULL, 'u'},     {"help", no_argument, NULL, 'h'},
        {"handoff", required_argument, NULL, 'H'}, {"samples", required_argument, NULL, 'F'},
        {NULL, 0, NULL, 0}};
    config cfg = {.url = default_url()};
    const char *samples_path = NULL;
    long handoffs = 0;
    int threads = 1, rounds = 3, ch;
    double secs = 1.5;
    while ((ch = getopt_long(argc, argv, "t:d:r:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'u': cfg.url = optarg; break;
        case 't': threads = (int)arg_num("-t", optarg, 1, 1024); break;
        case 'd': secs = arg_num("-d", optarg, 0.1, 600); break;
        case 'r': rounds = (int)arg_num("-r", optarg, 1, 100); break;
        case 'H': handoffs = (long)arg_num("--handoff", optarg, 2, 1e7); break;
        case 'F': samples_path = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    uuid_t id;
    uuid_generate_random(id);
    uuid_unparse_lower(id, cfg.uuid);
    redisContext *c = raw_connect(cfg.url);
    if (c == NULL || load_script(c, acquire_lua, cfg.acquire_sha) < 0 ||
        load_script(c, release_lua, cfg.release_sha) < 0) {
        fprintf(stderr, "bench_baseline: cannot load the scripts\n");
        return 1;
    }
    if (handoffs > 0) {
        redisFree(c);
        return handoff_floor(&cfg, handoffs, samples_path);
    }

    fprintf(stderr, "baseline: %d thread(s), %d rounds of %.1f s\n", threads, rounds, secs);
    cycle_ops ops = {base_init, base_cycle, base_fini, &cfg};
    cycle_result res;
    rstats s0, s1;
    rstats_take(c, "commandstats", &s0);
    double cpu0 = cpu_seconds(RUSAGE_SELF);
    int rc = run_cycles(&ops, threads, secs, rounds, &res);
    double cpu = cpu_seconds(RUSAGE_SELF) - cpu0; /* all our threads, the library's too */
    rstats_take(c, "commandstats", &s1);
    redisFree(c);
    jsonw j;
    j_begin(&j, "baseline");
    j_int(&j, "threads", threads);
    j_cycle_result(&j, &res);
    j_num(&j, "client_cpu_us_per_cycle", cpu * 1e6 / (double)res.all_cycles);
    j_num(&j, "scripts_per_cycle", (double)(rstats_scripts(&s1) - rstats_scripts(&s0)) / (double)res.all_cycles);
    j_int(&j, "rounds", rounds);
    j_num(&j, "round_s", secs);
    j_end(&j);
    return rc < 0 ? 1 : 0;
}
