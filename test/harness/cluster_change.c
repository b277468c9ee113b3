/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_change.c - what a Cluster test does to its cluster: a slot moved
 * in the three phases of topology.md section 3b (IMPORTING/MIGRATING,
 * MIGRATE, SETSLOT NODE), a master killed until its replica is promoted, a
 * coordinated CLUSTER FAILOVER; lock keys read on one node (ASKING, a
 * replica with READONLY). The librlock side is in cluster_client.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "cluster_priv.h"
#include "fail.h"
#include "redis.h"
#include "timing.h"

/* ---- slot migration ------------------------------------------------------- */

static const char *id_of(const h_cluster *hc, const h_server *s) {
    int i = h_cluster_index(hc, s);
    if (i < 0)
        H_FAIL("not a node of this cluster");
    return hc->id[i];
}

void h_cluster_migrate_begin(const h_cluster *hc, int slot, h_server *target, h_migration *m) {
    m->slot = slot;
    m->target = target;
    m->moved = 0;
    m->source = h_cluster_owner(hc, slot);
    if (m->source == NULL || m->source == target)
        H_FAIL("slot %d: no owner, or the target owns it already", slot);
    redisContext *t = h_server_redis(target), *s = h_server_redis(m->source);
    h_cmd_ok(t, "CLUSTER SETSLOT %d IMPORTING %s", slot, id_of(hc, m->source));
    h_cmd_ok(s, "CLUSTER SETSLOT %d MIGRATING %s", slot, id_of(hc, target));
    redisFree(t);
    redisFree(s);
}

/* MIGRATE of the keys in reply r (GETKEYSINSLOT) in one command. */
static void migrate_batch(redisContext *s, const h_migration *m, const redisReply *keys) {
    const char *argv[110];
    size_t lens[110];
    char port[16];
    int n = 0;
    snprintf(port, sizeof port, "%d", h_server_port(m->target));
    const char *head[] = {"MIGRATE", "127.0.0.1", port, "", "0", "5000", "KEYS"};
    for (size_t i = 0; i < sizeof head / sizeof *head; i++) {
        argv[n] = head[i];
        lens[n++] = strlen(head[i]);
    }
    for (size_t i = 0; i < keys->elements && n < 110; i++) {
        argv[n] = keys->element[i]->str;
        lens[n++] = keys->element[i]->len;
    }
    redisReply *r = redisCommandArgv(s, n, argv, lens);
    if (r == NULL)
        H_FAIL("MIGRATE: connection to the source broke");
    if (r->type == REDIS_REPLY_ERROR) {
        char err[256];
        snprintf(err, sizeof err, "%s", r->str);
        freeReplyObject(r);
        H_FAIL("MIGRATE of slot %d: %s", m->slot, err);
    }
    freeReplyObject(r); /* OK, or NOKEY if they were deleted meanwhile */
}

int h_cluster_migrate_keys(const h_cluster *hc, h_migration *m) {
    redisContext *s = h_server_redis(m->source);
    int moved = 0;
    (void)hc;
    for (;;) {
        redisReply *keys = h_cmd(s, "CLUSTER GETKEYSINSLOT %d 100", m->slot);
        if (keys->type != REDIS_REPLY_ARRAY)
            H_FAIL("CLUSTER GETKEYSINSLOT: not an array");
        if (keys->elements == 0) {
            freeReplyObject(keys);
            break;
        }
        moved += (int)keys->elements;
        migrate_batch(s, m, keys);
        freeReplyObject(keys);
    }
    redisFree(s);
    m->moved += moved;
    return moved;
}

/* Whether s's CLUSTER SLOTS gives slot to the target's port. */
static int says_owner(const h_server *s, int slot, const h_server *target) {
    redisContext *c = h_cluster_probe(s);
    redisReply *r = c ? redisCommand(c, "CLUSTER SLOTS") : NULL;
    int yes = 0;
    for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *e = r->element[i];
        if (e->elements >= 3 && e->element[0]->integer <= slot && slot <= e->element[1]->integer)
            yes = e->element[2]->element[1]->integer == h_server_port(target);
    }
    if (r)
        freeReplyObject(r);
    if (c)
        redisFree(c);
    return yes;
}

static void setslot_node(const h_cluster *hc, h_server *s, const h_migration *m) {
    redisContext *c = h_server_redis(s);
    h_cmd_ok(c, "CLUSTER SETSLOT %d NODE %s", m->slot, id_of(hc, m->target));
    redisFree(c);
}

void h_cluster_migrate_finish(const h_cluster *hc, h_migration *m) {
    h_server *masters[H_CLUSTER_NODES];
    int n = h_cluster_masters(hc, masters);
    setslot_node(hc, m->target, m); /* the target first, then the source (Redis docs) */
    setslot_node(hc, m->source, m);
    for (int i = 0; i < n; i++)
        if (masters[i] != m->target && masters[i] != m->source)
            setslot_node(hc, masters[i], m);
    masters[n++] = m->source; /* no longer a master of anything, maybe */
    for (int i = 0; i < n; i++)
        H_WAIT_FOR(says_owner(masters[i], m->slot, m->target), 5000);
}

void h_cluster_migrate(const h_cluster *hc, int slot, h_server *target) {
    h_migration m;
    h_cluster_migrate_begin(hc, slot, target, &m);
    h_cluster_migrate_keys(hc, &m);
    h_cluster_migrate_finish(hc, &m);
}

/* ---- failures and failovers ---------------------------------------------- */

/* A slot the master owns now (its first): followed through a kill or failover. */
static int first_slot_of(const h_cluster *hc, const h_server *master) {
    int slot = h_cluster_first_slot(master);
    (void)hc;
    if (slot < 0)
        H_FAIL("the node on port %d owns no slot", h_server_port(master));
    return slot;
}

static int live_nodes_ok(const h_cluster *hc) {
    for (int i = 0; i < hc->nodes; i++) {
        char *info;
        int ok;
        if (h_server_pid(hc->node[i]) == 0)
            continue;
        info = h_cluster_ask_str(hc->node[i], "CLUSTER INFO");
        ok = info != NULL && strstr(info, "cluster_state:ok") != NULL;
        free(info);
        if (!ok)
            return 0;
    }
    return 1;
}

h_server *h_cluster_kill_master(const h_cluster *hc, h_server *master) {
    h_server *heir = h_cluster_replica_of(hc, master);
    int slot = first_slot_of(hc, master);
    if (heir == NULL)
        H_FAIL("the master on port %d has no replica", h_server_port(master));
    h_server_kill(master);
    if (!H_POLL_UNTIL(h_cluster_says_master(heir) && h_cluster_owner(hc, slot) == heir &&
                          live_nodes_ok(hc),
                      20000)) {
        h_cluster_dump(hc);
        H_FAIL("replica :%d not promoted after %lld ms", h_server_port(heir), h_scaled(20000));
    }
    return heir;
}

/* CLUSTER FAILOVER on c, asked again while refused (the replica not in sync yet). */
static void ask_failover(redisContext *c, long long deadline) {
    for (;;) {
        redisReply *r = h_cmd(c, "CLUSTER FAILOVER");
        int ok = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (ok)
            return;
        if (h_now_ms() > deadline)
            H_FAIL("CLUSTER FAILOVER kept being refused");
        h_sleep_ms(200);
    }
}

/*
 * A manual failover the masters do not vote for is given up silently after
 * 5 s (CLUSTER_MF_TIMEOUT): a master votes for the replicas of one master at
 * most once per 2 x node timeout, so a failover back right after another
 * one is dropped. Asked again every 6 s until done.
 */
h_server *h_cluster_failover(const h_cluster *hc, h_server *replica) {
    h_server *old = NULL;
    for (int i = 0; i < hc->nodes; i++)
        if (h_server_pid(hc->node[i]) != 0 && h_cluster_replica_of(hc, hc->node[i]) == replica)
            old = hc->node[i];
    if (old == NULL)
        H_FAIL("the node on port %d is not a replica", h_server_port(replica));
    int slot = first_slot_of(hc, old), asked = 0;
    redisContext *c = h_server_redis(replica);
    long long deadline = h_now_ms() + h_scaled(30000);
    for (;;) {
        ask_failover(c, deadline);
        asked++;
        if (H_POLL_UNTIL(h_cluster_owner(hc, slot) == replica &&
                             h_cluster_replica_of(hc, replica) == old && live_nodes_ok(hc),
                         6000))
            break;
        if (h_now_ms() > deadline) {
            h_cluster_dump(hc);
            H_FAIL("CLUSTER FAILOVER to :%d: not done after %d requests", h_server_port(replica),
                   asked);
        }
    }
    redisFree(c);
    if (asked > 1)
        printf("      (CLUSTER FAILOVER to :%d asked %d times)\n", h_server_port(replica), asked);
    return replica;
}

/* ---- lock keys on one node ------------------------------------------------ */

long long h_cluster_pttl(const h_server *node, const char *name, size_t len) {
    redisContext *c = h_server_redis(node);
    long long v;
    redisAppendCommand(c, "ASKING");
    redisAppendCommand(c, "PTTL %b", name, len);
    redisReply *a = NULL, *r = NULL;
    if (redisGetReply(c, (void **)&a) != REDIS_OK || redisGetReply(c, (void **)&r) != REDIS_OK)
        H_FAIL("PTTL on port %d: connection broke", h_server_port(node));
    v = r->type == REDIS_REPLY_INTEGER ? r->integer : -3;
    freeReplyObject(a);
    freeReplyObject(r);
    redisFree(c);
    return v;
}

void h_cluster_wait_renewed(const h_server *node, const char *name, long long wd,
                            long long within_ms, const char *what) {
    size_t len = strlen(name);
    long long last = h_cluster_pttl(node, name, len), deadline = h_now_ms() + within_ms;
    for (;;) {
        long long now = h_cluster_pttl(node, name, len);
        if (now < 0)
            H_FAIL("%s: %s is not on :%d (PTTL %lld)", what, name, h_server_port(node), now);
        if (now > last + wd / 6)
            return;
        if (h_now_ms() > deadline)
            H_FAIL("%s: no renewal of %s on :%d within %lld ms", what, name, h_server_port(node),
                   within_ms);
        last = now;
        h_sleep_ms(20);
    }
}

long long h_cluster_keys_in_slot(const h_server *node, int slot) {
    redisContext *c = h_server_redis(node);
    long long n = h_cmd_int(c, "CLUSTER COUNTKEYSINSLOT %d", slot);
    redisFree(c);
    return n;
}

int h_cluster_replica_has(const h_server *r, const char *name, size_t len) {
    redisContext *c = h_server_redis(r);
    h_cmd_ok(c, "READONLY");
    int yes = h_exists(c, name, len);
    redisFree(c);
    return yes;
}
