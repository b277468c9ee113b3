/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_tls.c - what TLS costs (run.sh section 13, issue 24 point 7), against
 * the main TLS redis-server of scripts/with-tls-redis.sh (a TLS port and a
 * plaintext port on the same server).
 *
 *   bench_tls cycles --port TLS_PORT --plain-port PORT --ca CA.pem [-d SECONDS] [-r ROUNDS]
 *   bench_tls memory --port TLS_PORT --plain-port PORT --ca CA.pem [-k CLIENTS]
 *
 * cycles: uncontended lock + unlock, one thread, first by a raw TLS client
 * (the baseline: one blocking TLS connection made with OpenSSL directly,
 * commands written with redisFormatCommandArgv, replies read with SSL_read
 * into hiredis's reader; the very scripts and arguments of bench_baseline.c),
 * by rlock over rediss://, and by rlock over the same server's plaintext port
 * (what TLS costs), in turn a round each (-r rounds each); the ratio is the
 * median of each round pair's (rlock TLS / raw TLS). Then the
 * steady state of that rlock client: its connections, and how many
 * connections (so TLS handshakes) it and the server saw during the rounds,
 * after its warm-up; counted by rlock_client_stats and by the server's
 * total_connections_received (read on the plaintext port, so reading it
 * makes no TLS connection).
 *
 * handoff: the floor of a cross-process hand-off (floor.h's raw clients),
 * over TLS (the raw TLS client's connections) and over the plaintext port,
 * in turn, -r rounds of -n each: medians of the rounds' p50 and p99.
 *
 * memory: the process's heap (mallinfo2) and RSS before and after K rlock
 * clients each do one lock + unlock over plaintext, then K more over TLS;
 * divided by the connections the server saw appear (connected_clients).
 *
 * Prints progress on stderr and one JSON line on stdout.
 */
#include <getopt.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "bench/bench.h"
#include "bench/floor.h"
#include "kind/kind.h"
#include "rlock.h"

typedef struct config {
    int port, plain_port, rounds, clients;
    long handoffs;
    double secs;
    const char *ca;
    char url[512], plain_url[64];
    char uuid[37];
    char acquire_sha[41], release_sha[41];
} config;

/* ---- the raw TLS client -------------------------------------------------------- */

/* One blocking TLS connection and hiredis's reader: no library in between. */
typedef struct tls_raw {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    redisReader *reader;
    floor_cycle cycle;
} tls_raw;

static int tcp_connect(int port) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0)
        return -1;
    /* As hiredis and rlock do: a request goes out at once, not after Nagle's wait. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The same verification rlock's default (tls_verify=full) does for an IP url. */
static int tls_raw_open(tls_raw *t, const config *cfg) {
    t->fd = tcp_connect(cfg->port);
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (t->fd < 0 || t->ctx == NULL || SSL_CTX_load_verify_locations(t->ctx, cfg->ca, NULL) != 1)
        return -1;
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    t->ssl = SSL_new(t->ctx);
    if (t->ssl == NULL || X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), "127.0.0.1") != 1 ||
        SSL_set_fd(t->ssl, t->fd) != 1 || SSL_connect(t->ssl) != 1) {
        ERR_print_errors_fp(stderr);
        return -1;
    }
    t->reader = redisReaderCreate();
    return t->reader != NULL ? 0 : -1;
}

static void tls_raw_close(tls_raw *t) {
    if (t->reader != NULL)
        redisReaderFree(t->reader);
    if (t->ssl != NULL)
        SSL_free(t->ssl);
    if (t->ctx != NULL)
        SSL_CTX_free(t->ctx);
    if (t->fd >= 0)
        close(t->fd);
}

/* The next reply (or pushed message), read as a blocking hiredis client does. */
static redisReply *tls_raw_reply(tls_raw *t) {
    void *reply = NULL;
    char buf[16384];
    for (;;) {
        if (redisReaderGetReply(t->reader, &reply) != REDIS_OK || reply != NULL)
            return reply;
        int got = SSL_read(t->ssl, buf, sizeof buf);
        if (got <= 0 || redisReaderFeed(t->reader, buf, (size_t)got) != REDIS_OK)
            return NULL;
    }
}

/* Writes one command and reads its reply, as redisCommandArgv does in bench_baseline.c. */
static redisReply *tls_raw_command(tls_raw *t, int argc, const char **argv, const size_t *len) {
    char *cmd;
    long long n = redisFormatCommandArgv(&cmd, argc, argv, len);
    if (n < 0)
        return NULL;
    int ok = SSL_write(t->ssl, cmd, (int)n) == (int)n; /* blocking, no partial writes */
    redisFreeCommand(cmd);
    return ok ? tls_raw_reply(t) : NULL;
}

static int tls_raw_load(tls_raw *t, const char *body, char *sha) {
    const char *argv[] = {"SCRIPT", "LOAD", body};
    size_t len[] = {6, 4, strlen(body)};
    redisReply *r = tls_raw_command(t, 3, argv, len);
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok)
        memcpy(sha, r->str, 41);
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

/* A raw TLS connection to arg's (a config's) TLS port; floor.h's transport open. */
static void *tls_raw_new(const void *arg, const char *url) {
    const config *cfg = arg;
    tls_raw *t = calloc(1, sizeof *t);
    (void)url; /* always cfg's TLS port */
    if (t == NULL)
        return NULL;
    t->fd = -1;
    if (tls_raw_open(t, cfg) < 0) {
        fprintf(stderr, "bench_tls: raw TLS connection to 127.0.0.1:%d failed\n", cfg->port);
        tls_raw_close(t);
        free(t);
        return NULL;
    }
    return t;
}

static void *raw_init(void *arg, int index) {
    const config *cfg = arg;
    tls_raw *t = tls_raw_new(cfg, NULL);
    if (t != NULL)
        floor_cycle_init(&t->cycle, "bench:tls:raw", index, cfg->uuid, cfg->acquire_sha,
                         cfg->release_sha);
    return t;
}

static redisReply *tls_raw_command_any(void *conn, int argc, const char **argv,
                                      const size_t *len) {
    return tls_raw_command(conn, argc, argv, len);
}

/* One lock + unlock; the replies must mean "acquired 1" and "released". */
static int raw_cycle(void *state) {
    tls_raw *t = state;
    return floor_cycle_run(&t->cycle, tls_raw_command_any, t);
}

static void raw_fini(void *state) {
    tls_raw_close(state);
    free(state);
}

/* ---- rlock over TLS ------------------------------------------------------------ */

static rlock_client *open_rlock(const char *url) {
    rlock_config rc;
    rlock_client *c = NULL;
    rlock_config_init(&rc);
    rc.url = url;
    int status = rlock_client_open(&rc, &c);
    if (status != RLOCK_OK) {
        fprintf(stderr, "rlock_client_open(%s): %s: %s\n", url, rlock_status_name(status),
                rlock_last_error());
        return NULL;
    }
    return c;
}

static int lock_cycle(rlock *lock) {
    int status = rlock_lock(lock);
    if (status == RLOCK_OK)
        status = rlock_unlock(lock);
    if (status != RLOCK_OK)
        fprintf(stderr, "bench_tls: %s: %s\n", rlock_status_name(status), rlock_last_error());
    return status == RLOCK_OK ? 0 : -1;
}

/*
 * The three clients take turns, a round each (raw TLS, rlock TLS, rlock
 * plaintext, again): on a shared machine the load moves within seconds, and
 * blocks of rounds one after the other compared different loads, not clients.
 */
static unsigned long long client_connections(rlock_client *c);
static long long info_field(redisContext *c, const char *section, const char *field);

enum { MODE_RAW, MODE_TLS, MODE_PLAIN, MODES };
#define MAX_ROUNDS 100

typedef struct mix_ctx {
    config *cfg;
    rlock_client *tls, *plain;
    atomic_int mode;
    redisContext *stats;                   /* the server's plaintext port */
    unsigned long long conn0;              /* at the steady state's start: */
    long long accepted0;                   /*   the client's and the server's counts */
    uint64_t t0;
    int n[MODES];
    double ops[MODES][MAX_ROUNDS], p50[MODES][MAX_ROUNDS], p99[MODES][MAX_ROUNDS];
} mix_ctx;

typedef struct mix_thread {
    mix_ctx *ctx;
    tls_raw *raw;
    rlock *tls_lock, *plain_lock;
} mix_thread;

static rlock *named_lock(rlock_client *c, const char *kind, int index) {
    char name[64];
    rlock *lock = NULL;
    snprintf(name, sizeof name, "bench:tls:%s:%d:%d", kind, (int)getpid(), index);
    return rlock_get(c, name, &lock) == RLOCK_OK ? lock : NULL;
}

static void mix_fini(void *state) {
    mix_thread *t = state;
    if (t->raw != NULL)
        raw_fini(t->raw);
    rlock_free(t->tls_lock);
    rlock_free(t->plain_lock);
    free(t);
}

static void *mix_init(void *arg, int index) {
    mix_ctx *ctx = arg;
    mix_thread *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->ctx = ctx;
    t->raw = raw_init(ctx->cfg, index);
    t->tls_lock = named_lock(ctx->tls, "rlock", index);
    t->plain_lock = named_lock(ctx->plain, "plain", index);
    if (t->raw == NULL || t->tls_lock == NULL || t->plain_lock == NULL) {
        mix_fini(t);
        return NULL;
    }
    return t;
}

static int mix_cycle(void *state) {
    mix_thread *t = state;
    switch (atomic_load(&t->ctx->mode)) {
    case MODE_RAW: return raw_cycle(t->raw);
    case MODE_TLS: return lock_cycle(t->tls_lock);
    default: return lock_cycle(t->plain_lock);
    }
}

/* Round 0 starts the steady state: every connection of the run (the raw
 * client's, both rlock clients' pool connections) is open by then. */
static void mix_before(void *arg, int round) {
    mix_ctx *ctx = arg;
    if (round == 0) {
        ctx->conn0 = client_connections(ctx->tls);
        ctx->accepted0 = info_field(ctx->stats, "stats", "total_connections_received");
        ctx->t0 = raw_now_ns();
    }
    atomic_store(&ctx->mode, round % MODES);
}

static void mix_after(void *arg, int round, double ops, double p50, double p99) {
    mix_ctx *ctx = arg;
    int m = round % MODES, i = ctx->n[m]++;
    ctx->ops[m][i] = ops;
    ctx->p50[m][i] = p50;
    ctx->p99[m][i] = p99;
}

static unsigned long long client_connections(rlock_client *c) {
    rlock_stats st = {.struct_size = sizeof st};
    return rlock_client_stats(c, &st) == RLOCK_OK ? st.connections : 0;
}

/* ---- the server's counters (plaintext port) ------------------------------------ */

static long long info_field(redisContext *c, const char *section, const char *field) {
    redisReply *r = redisCommand(c, "INFO %s", section);
    long long v = -1;
    size_t flen = strlen(field);
    if (r && r->type == REDIS_REPLY_STRING)
        for (const char *p = r->str; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
            if (strncmp(p, field, flen) == 0 && p[flen] == ':') {
                v = atoll(p + flen + 1);
                break;
            }
    if (r)
        freeReplyObject(r);
    return v;
}

/* ---- cycles ----------------------------------------------------------------------- */

static int load_scripts(config *cfg) {
    tls_raw t = {.fd = -1};
    int rc = tls_raw_open(&t, cfg) < 0 ||
                     tls_raw_load(&t, rlock__script_body(RLOCK__SCRIPT_ACQUIRE), cfg->acquire_sha) < 0 ||
                     tls_raw_load(&t, rlock__script_body(RLOCK__SCRIPT_RELEASE), cfg->release_sha) < 0
                 ? -1
                 : 0;
    tls_raw_close(&t);
    return rc;
}

/* One client's figures: medians over its own rounds. */
static void j_mode(jsonw *j, const char *prefix, mix_ctx *ctx, int m) {
    char k[64];
    snprintf(k, sizeof k, "%sops_per_s", prefix);
    j_num(j, k, median(ctx->ops[m], ctx->n[m]));
    snprintf(k, sizeof k, "%sp50_ms", prefix);
    j_num(j, k, median(ctx->p50[m], ctx->n[m]));
    snprintf(k, sizeof k, "%sp99_ms", prefix);
    j_num(j, k, median(ctx->p99[m], ctx->n[m]));
}

/* Each round's rlock-TLS / raw-TLS ratio: the pairs' median and spread. */
static void pair_ratios(mix_ctx *ctx, double *med, double *lo, double *hi) {
    double r[MAX_ROUNDS];
    int n = ctx->n[MODE_TLS] < ctx->n[MODE_RAW] ? ctx->n[MODE_TLS] : ctx->n[MODE_RAW];
    for (int i = 0; i < n; i++)
        r[i] = ctx->ops[MODE_TLS][i] / ctx->ops[MODE_RAW][i];
    spread(r, n, lo, hi);
    *med = median(r, n);
}

/* 200 cycles on a lock of its own: the client's pool connection is made here. */
static int warm_up(rlock_client *c) {
    rlock *lock = named_lock(c, "warm", 0);
    int rc = lock == NULL ? -1 : 0;
    for (int i = 0; i < 200 && rc == 0; i++)
        rc = lock_cycle(lock);
    rlock_free(lock);
    return rc;
}

static int bench_cycles_tls(config *cfg) {
    redisContext *plain = raw_connect(cfg->plain_url);
    if (plain == NULL || load_scripts(cfg) < 0) {
        fprintf(stderr, "bench_tls: cannot load the scripts over TLS\n");
        return 1;
    }
    long long clients0 = info_field(plain, "clients", "connected_clients");
    mix_ctx ctx = {.cfg = cfg, .stats = plain, .tls = open_rlock(cfg->url)};
    if (ctx.tls == NULL)
        return 1;
    /* Warm-up: the pool's connection and any first-use work happen here, not in
     * the steady state counted from round 0. */
    int rc = warm_up(ctx.tls);
    long long clients1 = info_field(plain, "clients", "connected_clients");
    ctx.plain = open_rlock(cfg->plain_url);
    if (rc == 0)
        rc = ctx.plain != NULL ? warm_up(ctx.plain) : -1;

    fprintf(stderr, "1 thread, %d rounds of %.1f s each, in turn: raw TLS client, rlock over rediss://, "
                    "rlock over redis:// (same server)\n", cfg->rounds, cfg->secs);
    cycle_ops ops = {mix_init, mix_cycle, mix_fini, &ctx, mix_before, mix_after};
    cycle_result res = {0};
    if (rc == 0)
        rc = run_cycles(&ops, 1, cfg->secs, cfg->rounds * MODES, &res);

    double minutes = (double)(raw_now_ns() - ctx.t0) / 60e9;
    long long accepted1 = info_field(plain, "stats", "total_connections_received");
    unsigned long long conn1 = client_connections(ctx.tls);
    rlock_client_close(ctx.tls);
    rlock_client_close(ctx.plain);
    redisFree(plain);
    double ratio, lo, hi;
    pair_ratios(&ctx, &ratio, &lo, &hi); /* before j_mode: median() sorts the rounds in place */
    jsonw j;
    j_begin(&j, "tls_cycles");
    j_mode(&j, "raw_", &ctx, MODE_RAW);
    j_mode(&j, "rlock_", &ctx, MODE_TLS);
    j_mode(&j, "plain_", &ctx, MODE_PLAIN);
    j_num(&j, "ratio", ratio);
    j_num(&j, "ratio_min", lo);
    j_num(&j, "ratio_max", hi);
    j_num(&j, "tls_to_plain", median(ctx.ops[MODE_TLS], ctx.n[MODE_TLS]) /
                                  median(ctx.ops[MODE_PLAIN], ctx.n[MODE_PLAIN]));
    j_int(&j, "connections_per_client", clients1 - clients0);
    j_int(&j, "client_connections_opened_warmup", (long long)ctx.conn0);
    j_num(&j, "steady_minutes", minutes);
    /* Every connection of the run was open before round 0, so the server's
     * count is new connections of either rlock client (none expected). */
    j_num(&j, "client_handshakes_per_min", (double)(conn1 - ctx.conn0) / minutes);
    j_num(&j, "server_connections_per_min", (double)(accepted1 - ctx.accepted0) / minutes);
    j_int(&j, "errors", res.errors);
    j_int(&j, "rounds", cfg->rounds);
    j_num(&j, "round_s", cfg->secs);
    j_end(&j);
    return rc < 0 ? 1 : 0;
}

/* ---- the hand-off floor over TLS (floor.h) ---------------------------------------- */

static redisReply *tls_raw_next_message(void *conn) {
    return tls_raw_reply(conn);
}

static void tls_raw_free(void *conn) {
    tls_raw_close(conn);
    free(conn);
}

/* floor_handoffs' n hand-offs, over TLS (transport) or hiredis (NULL); p50 and p99 in ms. */
static long floor_round(const config *cfg, const floor_transport *transport, long n,
                        double *p50, double *p99) {
    char key[64];
    snprintf(key, sizeof key, "bench:tls:handoff:%d", (int)getpid());
    floor_cfg f = {.cmd_url = cfg->plain_url, .sub_url = cfg->plain_url,
                   .subscribe = "SUBSCRIBE", .publish = "publish",
                   .acquire_sha = cfg->acquire_sha, .release_sha = cfg->release_sha,
                   .key = key, .uuid = cfg->uuid, .transport = transport};
    samples s = {0};
    long errors = floor_handoffs(&f, n, &s);
    *p50 = samples_pct_ms(&s, 50);
    *p99 = samples_pct_ms(&s, 99);
    samples_free(&s);
    return errors;
}

/*
 * The floor of a cross-process hand-off over TLS (floor.h: raw clients, two
 * round trips and a message) and over the same server's plaintext port, in
 * turn, -r rounds of -n hand-offs each: what a TLS hand-off costs before any
 * library, beside which run.sh puts bench_rlock handoff over rediss://.
 */
static int bench_handoff_tls(config *cfg) {
    const floor_transport tls = {tls_raw_new, tls_raw_command_any, tls_raw_next_message,
                                 tls_raw_free, cfg};
    double tls50[MAX_ROUNDS], tls99[MAX_ROUNDS], plain50[MAX_ROUNDS], plain99[MAX_ROUNDS];
    long errors = 0;
    int rounds = 0; /* completed: a failed one ends the run */
    if (load_scripts(cfg) < 0) {
        fprintf(stderr, "bench_tls: cannot load the scripts over TLS\n");
        return 1;
    }
    fprintf(stderr, "hand-off floor: %d rounds of %ld hand-offs between two processes, in turn "
                    "over TLS and plaintext (same server)\n", cfg->rounds, cfg->handoffs);
    for (; rounds < cfg->rounds && errors == 0; rounds++) {
        errors += floor_round(cfg, &tls, cfg->handoffs, &tls50[rounds], &tls99[rounds]);
        errors += floor_round(cfg, NULL, cfg->handoffs, &plain50[rounds], &plain99[rounds]);
    }
    jsonw j;
    j_begin(&j, "tls_handoff_floor");
    j_int(&j, "handoffs", cfg->handoffs);
    j_int(&j, "rounds", rounds);
    j_num(&j, "tls_p50_ms", median(tls50, rounds));
    j_num(&j, "tls_p99_ms", median(tls99, rounds));
    j_num(&j, "plain_p50_ms", median(plain50, rounds));
    j_num(&j, "plain_p99_ms", median(plain99, rounds));
    j_int(&j, "errors", errors);
    j_end(&j);
    return errors != 0 ? 1 : 0;
}

/* ---- memory ----------------------------------------------------------------------- */

static long long heap_bytes(void) {
    struct mallinfo2 mi = mallinfo2();
    return (long long)mi.uordblks + (long long)mi.hblkhd;
}

static long long rss_bytes(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (long long)resident * sysconf(_SC_PAGESIZE);
}

typedef struct mem_result {
    long long heap, rss, connections;
} mem_result;

/* K clients of url, each after one lock + unlock (so its pool has a live
 * connection); what the process and the server gained. */
static int mem_clients(const char *url, int k, redisContext *plain, mem_result *out) {
    rlock_client **cs = calloc((size_t)k, sizeof *cs);
    long long conns0 = info_field(plain, "clients", "connected_clients");
    long long heap0 = heap_bytes(), rss0 = rss_bytes();
    int rc = 0;
    for (int i = 0; i < k && rc == 0; i++) {
        rlock *lock = NULL;
        cs[i] = open_rlock(url);
        rc = cs[i] == NULL || rlock_get(cs[i], "bench:tls:mem", &lock) != RLOCK_OK ? -1 : lock_cycle(lock);
        rlock_free(lock);
    }
    out->heap = heap_bytes() - heap0;
    out->rss = rss_bytes() - rss0;
    out->connections = info_field(plain, "clients", "connected_clients") - conns0;
    for (int i = 0; i < k; i++)
        rlock_client_close(cs[i]);
    free(cs);
    return rc;
}

static int bench_memory_tls(const config *cfg) {
    redisContext *plain = raw_connect(cfg->plain_url);
    mem_result p, t;
    if (plain == NULL)
        return 1;
    fprintf(stderr, "memory: %d rlock clients over redis://, then %d over rediss://\n",
            cfg->clients, cfg->clients);
    /* One of each first, kept open: OpenSSL's and the library's one-off state
     * (error strings, the first client's globals) counts against neither row. */
    mem_result warm;
    int rc = mem_clients(cfg->plain_url, 1, plain, &warm) | mem_clients(cfg->url, 1, plain, &warm);
    rc |= mem_clients(cfg->plain_url, cfg->clients, plain, &p);
    rc |= mem_clients(cfg->url, cfg->clients, plain, &t);
    redisFree(plain);
    double pc = p.connections > 0 ? (double)p.connections : 1, tc = t.connections > 0 ? (double)t.connections : 1;
    jsonw j;
    j_begin(&j, "tls_memory");
    j_int(&j, "clients", cfg->clients);
    j_int(&j, "plain_connections", p.connections);
    j_int(&j, "tls_connections", t.connections);
    j_num(&j, "plain_heap_per_conn", (double)p.heap / pc);
    j_num(&j, "tls_heap_per_conn", (double)t.heap / tc);
    j_num(&j, "plain_rss_per_conn", (double)p.rss / pc);
    j_num(&j, "tls_rss_per_conn", (double)t.rss / tc);
    j_num(&j, "tls_extra_heap_per_conn", (double)t.heap / tc - (double)p.heap / pc);
    j_int(&j, "errors", rc != 0);
    j_end(&j);
    return rc != 0 ? 1 : 0;
}

/* ---- main --------------------------------------------------------------------------- */

static void usage(FILE *out) {
    fprintf(out, "usage: bench_tls cycles --port TLS_PORT --plain-port PORT --ca CA.pem [-d SECONDS] [-r ROUNDS]\n"
                 "       bench_tls handoff --port TLS_PORT --plain-port PORT --ca CA.pem [-n HANDOFFS] [-r ROUNDS]\n"
                 "       bench_tls memory --port TLS_PORT --plain-port PORT --ca CA.pem [-k CLIENTS]\n");
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"port", required_argument, NULL, 'p'}, {"plain-port", required_argument, NULL, 'P'},
        {"ca", required_argument, NULL, 'c'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    config cfg = {.rounds = 3, .secs = 1, .clients = 50, .handoffs = 2000};
    if (argc < 2 || (strcmp(argv[1], "cycles") != 0 && strcmp(argv[1], "memory") != 0 &&
                     strcmp(argv[1], "handoff") != 0)) {
        usage(stderr);
        return 2;
    }
    const char *what = argv[1];
    int ch;
    optind = 2;
    while ((ch = getopt_long(argc, argv, "d:r:k:n:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'p': cfg.port = (int)arg_num("--port", optarg, 1, 65535); break;
        case 'P': cfg.plain_port = (int)arg_num("--plain-port", optarg, 1, 65535); break;
        case 'c': cfg.ca = optarg; break;
        case 'd': cfg.secs = arg_num("-d", optarg, 0.1, 600); break;
        case 'r': cfg.rounds = (int)arg_num("-r", optarg, 1, MAX_ROUNDS / MODES); break;
        case 'k': cfg.clients = (int)arg_num("-k", optarg, 1, 1000); break;
        case 'n': cfg.handoffs = (long)arg_num("-n", optarg, 1, 1000000); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (cfg.port == 0 || cfg.plain_port == 0 || cfg.ca == NULL) {
        usage(stderr);
        return 2;
    }
    snprintf(cfg.url, sizeof cfg.url, "rediss://127.0.0.1:%d?tls_ca=%s", cfg.port, cfg.ca);
    snprintf(cfg.plain_url, sizeof cfg.plain_url, "redis://127.0.0.1:%d", cfg.plain_port);
    uuid_t id;
    uuid_generate_random(id);
    uuid_unparse_lower(id, cfg.uuid);
    if (strcmp(what, "handoff") == 0)
        return bench_handoff_tls(&cfg);
    return strcmp(what, "cycles") == 0 ? bench_cycles_tls(&cfg) : bench_memory_tls(&cfg);
}
