/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster.c - a Redis Cluster of the tests' own: six nodes started and the
 * cluster created (redis-cli --cluster create), stopped; the slot rule; who
 * is master and who owns a slot, read from the nodes. The changes (slot
 * migration, kill, failover) and the client helpers are in cluster_change.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "cluster.h"
#include "cluster_priv.h"
#include "fail.h"
#include "redis.h"
#include "timing.h"

/* ---- the slot rule ------------------------------------------------------ */

unsigned h_crc16(const char *s, size_t len) {
    unsigned crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (unsigned)(unsigned char)s[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc;
}

int h_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(key + from, '}', len - from);
        if (close != NULL && close > key + from) /* a non-empty tag */
            return (int)(h_crc16(key + from, (size_t)(close - key) - from) % H_CLUSTER_SLOTS);
    }
    return (int)(h_crc16(key, len) % H_CLUSTER_SLOTS);
}

int h_cluster_keyslot(const h_server *s, const char *key, size_t len) {
    redisContext *c = h_server_redis(s);
    long long slot = h_cmd_int(c, "CLUSTER KEYSLOT %b", key, len);
    redisFree(c);
    return (int)slot;
}

/* ---- asking the nodes ----------------------------------------------------- */

redisContext *h_cluster_probe(const h_server *s) {
    struct timeval tv = {1, 0};
    redisContext *c;
    if (h_server_pid(s) == 0 || h_server_stopped(s))
        return NULL;
    c = redisConnectWithTimeout("127.0.0.1", h_server_port(s), tv);
    if (c == NULL || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}

char *h_cluster_ask_str(const h_server *s, const char *cmd) {
    redisContext *c = h_cluster_probe(s);
    redisReply *r = c ? redisCommand(c, cmd) : NULL;
    char *out = NULL;
    if (r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS))
        out = strdup(r->str);
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return out;
}

int h_cluster_index(const h_cluster *hc, const h_server *s) {
    for (int i = 0; i < hc->nodes; i++)
        if (hc->node[i] == s)
            return i;
    return -1;
}

/* ROLE's first element and, for a replica, its master's port. */
static int role_of(const h_server *s, int *master_port) {
    redisContext *c = h_cluster_probe(s);
    redisReply *r = c ? redisCommand(c, "ROLE") : NULL;
    int role = 0; /* 0 unknown, 1 master, 2 replica */
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
        if (strcmp(r->element[0]->str, "master") == 0)
            role = 1;
        else if (strcmp(r->element[0]->str, "slave") == 0 && r->elements > 2) {
            role = 2;
            if (master_port)
                *master_port = (int)r->element[2]->integer;
        }
    }
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return role;
}

int h_cluster_says_master(const h_server *s) {
    return role_of(s, NULL) == 1;
}

h_server *h_cluster_replica_of(const h_cluster *hc, const h_server *master) {
    for (int i = 0; i < hc->nodes; i++) {
        int port = 0;
        if (hc->node[i] != master && role_of(hc->node[i], &port) == 2 &&
            port == h_server_port(master))
            return hc->node[i];
    }
    return NULL;
}

/*
 * s's own line of CLUSTER NODES ("myself"): 1 if it is a master holding
 * slot (slot < 0: any slot), with *epoch its config epoch and *first (may be
 * NULL) the first slot of its first range.
 */
static int claims_first(const h_server *s, int slot, long long *epoch, int *first) {
    char *nodes = h_cluster_ask_str(s, "CLUSTER NODES"), *save = NULL;
    int yes = 0;
    for (char *line = nodes ? strtok_r(nodes, "\n", &save) : NULL; line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *f[64], *fs = NULL;
        int n = 0;
        for (char *w = strtok_r(line, " ", &fs); w != NULL && n < 64; w = strtok_r(NULL, " ", &fs))
            f[n++] = w;
        if (n < 8 || strstr(f[2], "myself") == NULL)
            continue;
        if (strstr(f[2], "master") == NULL)
            break;
        *epoch = atoll(f[6]);
        for (int k = 8; k < n && !yes; k++) {
            int lo, hi;
            if (f[k][0] == '[') /* [slot->-id] / [slot-<-id]: migrating, importing */
                continue;
            if (sscanf(f[k], "%d-%d", &lo, &hi) != 2)
                hi = lo = atoi(f[k]);
            yes = slot < 0 || (slot >= lo && slot <= hi);
            if (yes && first != NULL)
                *first = lo;
        }
        break;
    }
    free(nodes);
    return yes;
}

static int claims(const h_server *s, int slot, long long *epoch) {
    return claims_first(s, slot, epoch, NULL);
}

int h_cluster_first_slot(const h_server *s) {
    long long epoch;
    int first = -1;
    return claims_first(s, -1, &epoch, &first) ? first : -1;
}

h_server *h_cluster_owner(const h_cluster *hc, int slot) {
    h_server *best = NULL;
    long long best_epoch = -1;
    for (int i = 0; i < hc->nodes; i++) {
        long long epoch = -1;
        if (claims(hc->node[i], slot, &epoch) && epoch > best_epoch) {
            best = hc->node[i];
            best_epoch = epoch;
        }
    }
    return best;
}

int h_cluster_masters(const h_cluster *hc, h_server **out) {
    int n = 0;
    for (int i = 0; i < hc->nodes; i++) {
        long long epoch;
        if (claims(hc->node[i], -1, &epoch))
            out[n++] = hc->node[i];
    }
    return n;
}

const char *h_cluster_name_on(const h_cluster *hc, const h_server *master, const char *prefix,
                              char *buf, size_t size) {
    for (int n = 0; n < 100000; n++) {
        snprintf(buf, size, "%s:lock-%d", prefix, n);
        if (h_cluster_owner(hc, h_slot(buf, strlen(buf))) == master)
            return buf;
    }
    H_FAIL("no name %s:lock-N hashes to the master on port %d", prefix, h_server_port(master));
}

/* ---- settled ---------------------------------------------------------------- */

static int state_ok(const h_server *s) {
    char *info = h_cluster_ask_str(s, "CLUSTER INFO");
    int ok = info != NULL && strstr(info, "cluster_state:ok") != NULL;
    free(info);
    return ok;
}

/* "start-end:masterport;..." of CLUSTER SLOTS, in the order given (sorted by
 * the server); 0 if the node does not answer. */
static int slots_view(const h_server *s, char *out, size_t size) {
    redisContext *c = h_cluster_probe(s);
    redisReply *r = c ? redisCommand(c, "CLUSTER SLOTS") : NULL;
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY;
    size_t n = 0;
    out[0] = '\0';
    /* Order the ranges by start: CLUSTER SLOTS lists them per node. */
    for (int slot = 0; ok && slot < H_CLUSTER_SLOTS;) {
        int next = H_CLUSTER_SLOTS;
        for (size_t i = 0; i < r->elements; i++) {
            redisReply *e = r->element[i];
            if (e->elements < 3)
                continue;
            if (e->element[0]->integer == slot) {
                n += (size_t)snprintf(out + n, size - n, "%lld-%lld:%lld;", e->element[0]->integer,
                                      e->element[1]->integer, e->element[2]->element[1]->integer);
                next = (int)e->element[1]->integer + 1;
                break;
            }
            if (e->element[0]->integer > slot && e->element[0]->integer < next)
                next = (int)e->element[0]->integer; /* a hole: skip to the next range */
        }
        if (n >= size)
            ok = 0;
        slot = next;
    }
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return ok;
}

/*
 * A replica's link to its master is up; a master sees each replica it has
 * online (with diskless sync a master puts a replica online at its first
 * REPLCONF ACK, up to a second after the replica says its link is up).
 */
static int link_up(const h_server *s) {
    char *info = h_cluster_ask_str(s, "INFO replication");
    int ok = 0;
    if (info != NULL && strstr(info, "role:master") != NULL) {
        ok = 1;
        for (char *line = strstr(info, "\nslave"); line != NULL; line = strstr(line + 1, "\nslave")) {
            size_t len = strcspn(line + 1, "\r\n");
            if (line[6] >= '0' && line[6] <= '9' && !memmem(line + 1, len, "state=online", 12))
                ok = 0;
        }
    } else if (info != NULL) {
        ok = strstr(info, "master_link_status:up") != NULL;
    }
    free(info);
    return ok;
}

int h_cluster_settled(const h_cluster *hc, int links) {
    char first[1024] = "", view[1024];
    for (int i = 0; i < hc->nodes; i++) {
        if (h_server_pid(hc->node[i]) == 0)
            continue;
        if (!state_ok(hc->node[i]) || !slots_view(hc->node[i], view, sizeof view))
            return 0;
        if (first[0] == '\0')
            snprintf(first, sizeof first, "%s", view);
        else if (strcmp(first, view) != 0)
            return 0;
        if (links && !link_up(hc->node[i]))
            return 0;
    }
    return first[0] != '\0';
}

void h_cluster_wait_settled(const h_cluster *hc, int links, long long timeout_ms) {
    if (!H_POLL_UNTIL(h_cluster_settled(hc, links), timeout_ms)) {
        h_cluster_dump(hc);
        H_FAIL("cluster not settled%s after %lld ms", links ? " (replicas linked)" : "",
               h_scaled(timeout_ms));
    }
}

void h_cluster_dump(const h_cluster *hc) {
    for (int i = 0; i < hc->nodes; i++) {
        char *nodes = h_cluster_ask_str(hc->node[i], "CLUSTER NODES");
        char *info = h_cluster_ask_str(hc->node[i], "CLUSTER INFO");
        char *mine = nodes ? strstr(nodes, "myself") : NULL;
        char *state = info ? strstr(info, "cluster_state:") : NULL;
        while (mine != NULL && mine > nodes && mine[-1] != '\n')
            mine--;
        fprintf(stderr, "  node %d :%d pid %d %.*s| %.*s\n", i, h_server_port(hc->node[i]),
                (int)h_server_pid(hc->node[i]), state ? (int)strcspn(state, "\r\n") : 4,
                state ? state : "down", mine ? (int)strcspn(mine, "\n") : 0, mine ? mine : "");
        free(nodes);
        free(info);
    }
}

/* ---- start and stop ------------------------------------------------------- */

/* Node i on a fresh port and bus port; NULL if either was taken meanwhile. */
static h_server *start_node(h_cluster *hc, int i) {
    char bus[16];
    int port = h_free_port();
    do
        hc->bus_port[i] = h_free_port();
    while (hc->bus_port[i] == port);
    snprintf(bus, sizeof bus, "%d", hc->bus_port[i]);
    const char *const args[] = {"--cluster-enabled",
                                "yes",
                                "--cluster-port",
                                bus,
                                "--cluster-config-file",
                                "nodes.conf",
                                "--cluster-node-timeout",
                                "1000",
                                "--repl-diskless-sync-delay",
                                "0",
                                NULL};
    return h_server_start_port(port, args);
}

/* redis-cli --cluster create ... --cluster-replicas R --cluster-yes (R 1 with
 * 6 nodes, 0 with 3), its output in a temporary file (printed if it fails). */
static void create_cluster(h_cluster *hc) {
    char ports[H_CLUSTER_NODES][32], logpath[256];
    const char *tmp = getenv("TMPDIR");
    char *argv[H_CLUSTER_NODES + 8];
    int n = 0, fd;
    snprintf(logpath, sizeof logpath, "%s/rlock-cluster-create.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if ((fd = mkstemp(logpath)) < 0)
        H_FAIL("mkstemp: %s", strerror(errno));
    argv[n++] = (char *)"redis-cli";
    argv[n++] = (char *)"--cluster";
    argv[n++] = (char *)"create";
    for (int i = 0; i < hc->nodes; i++) {
        snprintf(ports[i], sizeof ports[i], "127.0.0.1:%d", h_server_port(hc->node[i]));
        argv[n++] = ports[i];
    }
    argv[n++] = (char *)"--cluster-replicas";
    argv[n++] = (char *)(hc->nodes == H_CLUSTER_NODES ? "1" : "0");
    argv[n++] = (char *)"--cluster-yes";
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        H_FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fd);
    int code = h_child_code(h_wait_child(pid, 20000));
    if (code != 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "cat %s >&2", logpath);
        if (system(cmd) != 0)
            fprintf(stderr, "(no redis-cli output)\n");
    }
    unlink(logpath);
    if (code != 0)
        H_FAIL("redis-cli --cluster create exited with %d (127: redis-cli not in PATH)", code);
}

static h_cluster *start_cluster(int nodes) {
    h_cluster *hc = calloc(1, sizeof *hc);
    if (!hc)
        abort();
    hc->nodes = nodes;
    for (int i = 0; i < hc->nodes; i++) {
        int attempt = 0;
        while ((hc->node[i] = start_node(hc, i)) == NULL)
            if (++attempt == 10)
                H_FAIL("could not start cluster node %d on free ports", i);
    }
    create_cluster(hc);
    for (int i = 0; i < hc->nodes; i++) {
        char *id = h_cluster_ask_str(hc->node[i], "CLUSTER MYID");
        if (id == NULL || strlen(id) != 40)
            H_FAIL("CLUSTER MYID of node %d: %s", i, id ? id : "(no answer)");
        memcpy(hc->id[i], id, 41);
        free(id);
    }
    snprintf(hc->url, sizeof hc->url, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d",
             h_server_port(hc->node[0]), h_server_port(hc->node[1]));
    h_cluster_wait_settled(hc, 1, 20000);
    return hc;
}

h_cluster *h_cluster_start(void) {
    return start_cluster(H_CLUSTER_NODES);
}

h_cluster *h_cluster_start_masters(void) {
    return start_cluster(H_CLUSTER_MASTERS);
}

void h_cluster_stop(h_cluster *hc) {
    if (!hc)
        return;
    for (int i = 0; i < hc->nodes; i++)
        h_server_stop(hc->node[i]);
    free(hc);
}

int h_cluster_fixture_start(void **state) {
    *state = h_cluster_start();
    return 0;
}

int h_cluster_fixture_stop(void **state) {
    h_cseen_mute_all();
    h_cluster_stop(*state);
    *state = NULL;
    return 0;
}
