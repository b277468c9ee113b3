/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel.c - a master, two replicas and three sentinels of the tests' own,
 * and the faults a Sentinel test needs. The sentinels are configured as
 * topology.md section 3a measured: peers and replicas pre-declared, down
 * after 1000 ms, failover timeout 3000 ms; the data servers sync without the
 * diskless delay.
 */
#include <sys/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "redis.h"
#include "sentinel.h"
#include "timing.h"

static void random_id(char *id) {
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 40; i++)
        id[i] = hex[rand() % 16];
    id[40] = '\0';
}

/* Sentinel i's config: the master, its replicas, the other sentinels. */
static void sentinel_conf(const h_sentinels *hs, const int *ports, char ids[3][41], int i,
                          const char *password, char *conf, size_t size) {
    int n = 0;
    if (password != NULL) /* clients must AUTH; the sentinels use it with each other */
        n = snprintf(conf, size, "requirepass %s\nsentinel sentinel-pass %s\n", password,
                     password);
    n += snprintf(conf + n, size - (size_t)n,
                     "sentinel myid %s\nsentinel monitor %s 127.0.0.1 %d 2\n"
                     "sentinel down-after-milliseconds %s 1000\n"
                     "sentinel failover-timeout %s 3000\n",
                     ids[i], H_SENTINEL_MASTER_NAME, h_server_port(hs->data[0]),
                     H_SENTINEL_MASTER_NAME, H_SENTINEL_MASTER_NAME);
    for (int r = 1; r < 3; r++)
        n += snprintf(conf + n, size - (size_t)n, "sentinel known-replica %s 127.0.0.1 %d\n",
                      H_SENTINEL_MASTER_NAME, h_server_port(hs->data[r]));
    for (int j = 0; j < 3; j++)
        if (j != i)
            n += snprintf(conf + n, size - (size_t)n,
                          "sentinel known-sentinel %s 127.0.0.1 %d %s\n", H_SENTINEL_MASTER_NAME,
                          ports[j], ids[j]);
}

/* A value of SENTINEL MASTER <name> (a flat list of names and values). */
static long long master_field(h_server *sentinel, const char *field) {
    redisContext *c = h_server_redis(sentinel);
    redisReply *r = h_cmd(c, "SENTINEL MASTER %s", H_SENTINEL_MASTER_NAME);
    long long v = -1;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2)
        if (strcmp(r->element[i]->str, field) == 0)
            v = atoll(r->element[i + 1]->str);
    freeReplyObject(r);
    redisFree(c);
    return v;
}

int h_replicas_linked(const h_server *m) {
    redisContext *c = h_server_redis(m);
    char *info = h_cmd_str(c, "INFO replication"), *save = NULL;
    int n = 0;
    /* "slave0:ip=127.0.0.1,port=...,state=online,offset=...,lag=0" */
    for (char *line = strtok_r(info, "\r\n", &save); line != NULL;
         line = strtok_r(NULL, "\r\n", &save))
        n += strncmp(line, "slave", 5) == 0 && line[5] >= '0' && line[5] <= '9' &&
             strstr(line, "state=online") != NULL;
    free(info);
    redisFree(c);
    return n;
}

/* Both replicas acknowledge a write within 100 ms (WAIT), as they do once settled. */
static int acks_promptly(const h_server *m) {
    redisContext *c = h_server_redis(m);
    h_cmd_ok(c, "INCR h:sentinel-ready");
    long long acks = h_cmd_int(c, "WAIT 2 100");
    redisFree(c);
    return acks == 2;
}

static int ready(h_sentinels *hs) {
    for (int i = 0; i < 3; i++)
        if (master_field(hs->sentinel[i], "num-other-sentinels") != 2 ||
            master_field(hs->sentinel[i], "num-slaves") != 2)
            return 0;
    return h_replicas_linked(hs->data[0]) == 2 && acks_promptly(hs->data[0]);
}

/* Three sentinels on fresh ports; 0 (none left running) if a port was taken meanwhile. */
static int start_sentinels(h_sentinels *hs, int *ports, char ids[3][41], const char *password,
                           char *conf, size_t size) {
    for (int i = 0; i < 3; i++) {
        ports[i] = h_free_port();
        random_id(ids[i]);
    }
    for (int i = 0; i < 3; i++) {
        sentinel_conf(hs, ports, ids, i, password, conf, size);
        if ((hs->sentinel[i] = h_sentinel_start(ports[i], conf, password)) == NULL) {
            for (int j = 0; j < i; j++)
                h_server_stop(hs->sentinel[j]);
            return 0;
        }
    }
    return 1;
}

h_sentinels *h_sentinels_start(void) {
    return h_sentinels_start_password(NULL);
}

h_sentinels *h_sentinels_start_password(const char *password) {
    static const char *const master_args[] = {"--repl-diskless-sync-delay", "0", NULL};
    h_sentinels *hs = calloc(1, sizeof *hs);
    char port[16], ids[3][41], conf[2048];
    int ports[3];
    if (!hs)
        abort();
    srand((unsigned)h_now_us());
    hs->data[0] = h_server_start_args(master_args);
    snprintf(port, sizeof port, "%d", h_server_port(hs->data[0]));
    const char *const replica_args[] = {"--replicaof", "127.0.0.1", port,
                                        "--repl-diskless-sync-delay", "0", NULL};
    for (int r = 1; r < 3; r++)
        hs->data[r] = h_server_start_args(replica_args);
    for (int attempt = 0; !start_sentinels(hs, ports, ids, password, conf, sizeof conf);
         attempt++)
        if (attempt == 5)
            H_FAIL("could not start three sentinels on free ports");
    snprintf(hs->url, sizeof hs->url,
             "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/%s%s%s", ports[0], ports[1],
             ports[2], H_SENTINEL_MASTER_NAME, password ? "?sentinel_password=" : "",
             password ? password : "");
    H_WAIT_FOR(ready(hs), 15000);
    return hs;
}

void h_sentinels_stop(h_sentinels *hs) {
    if (!hs)
        return;
    for (int i = 0; i < 3; i++)
        h_server_stop(hs->sentinel[i]);
    for (int i = 0; i < 3; i++)
        h_server_stop(hs->data[i]);
    free(hs);
}

h_server *h_sentinels_named_master(h_sentinels *hs, int i) {
    redisContext *c = h_server_redis(hs->sentinel[i]);
    redisReply *r = h_cmd(c, "SENTINEL GET-MASTER-ADDR-BY-NAME %s", H_SENTINEL_MASTER_NAME);
    h_server *named = NULL;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        for (int d = 0; d < 3; d++)
            if (atoi(r->element[1]->str) == h_server_port(hs->data[d]))
                named = hs->data[d];
    freeReplyObject(r);
    redisFree(c);
    return named;
}

/* Whether s answers ROLE with master. A failed probe is a "no": Sentinel kills the
 * clients of a master it demotes, and this probe may be one of them. */
static int says_master(const h_server *s) {
    struct timeval tv = {1, 0};
    redisContext *c;
    redisReply *r;
    int yes;
    if (h_server_pid(s) == 0 || h_server_stopped(s))
        return 0;
    c = redisConnectWithTimeout("127.0.0.1", h_server_port(s), tv);
    if (c == NULL || c->err) {
        if (c)
            redisFree(c);
        return 0;
    }
    redisSetTimeout(c, tv);
    r = redisCommand(c, "ROLE");
    yes = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
          strcmp(r->element[0]->str, "master") == 0;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return yes;
}

h_server *h_sentinels_role_master(h_sentinels *hs) {
    for (int d = 0; d < 3; d++)
        if (says_master(hs->data[d]))
            return hs->data[d];
    return NULL;
}

static int all_name(h_sentinels *hs, const h_server *s) {
    for (int i = 0; i < 3; i++)
        if (h_server_pid(hs->sentinel[i]) != 0 && h_sentinels_named_master(hs, i) != s)
            return 0;
    return 1;
}

void h_sentinels_wait_named(h_sentinels *hs, const h_server *s, long long timeout_ms) {
    H_WAIT_FOR(all_name(hs, s), timeout_ms);
}

/* The first sentinel still running. */
static int live_sentinel(const h_sentinels *hs) {
    for (int i = 0; i < 3; i++)
        if (h_server_pid(hs->sentinel[i]) != 0)
            return i;
    H_FAIL("no sentinel is running");
}

h_server *h_sentinels_failover(h_sentinels *hs) {
    int live = live_sentinel(hs);
    h_server *old = h_sentinels_named_master(hs, live), *now = NULL;
    redisContext *c = h_server_redis(hs->sentinel[live]);
    long long deadline = h_now_ms() + h_scaled(15000);
    /* A sentinel refuses while a previous failover is still settling: ask again. */
    for (;;) {
        redisReply *r = h_cmd(c, "SENTINEL FAILOVER %s", H_SENTINEL_MASTER_NAME);
        int ok = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (ok)
            break;
        if (h_now_ms() > deadline)
            H_FAIL("SENTINEL FAILOVER kept being refused");
        h_sleep_ms(200);
    }
    redisFree(c);
    H_WAIT_FOR((now = h_sentinels_named_master(hs, live)) != old && now != NULL &&
                   says_master(now),
               15000);
    return now;
}

void h_replica_cut(h_server *r) {
    redisContext *c = h_server_redis(r);
    h_cmd_ok(c, "CONFIG SET masterauth bogus-password");
    h_cmd_ok(c, "CLIENT KILL TYPE master");
    redisFree(c);
}

void h_replica_heal(h_server *r) {
    redisContext *c = h_server_redis(r);
    h_cmd_ok(c, "CONFIG SET masterauth %s", "");
    redisFree(c);
}

int h_sentinels_fixture_start(void **state) {
    *state = h_sentinels_start();
    return 0;
}

int h_sentinels_fixture_stop(void **state) {
    h_sentinels_stop(*state);
    *state = NULL;
    return 0;
}
