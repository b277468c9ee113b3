/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inspect.h - the read-only inspection seam of rlockctl (tools/rlockctl):
 * raw Redis commands run through an open client's own net layer, so the
 * tool reaches the right node on every kind of url (one server, the master
 * Sentinel names, each Cluster master) without routing of its own.
 *
 * PRIVATE and tool-only: not installed, not part of the API. The functions
 * are built into librlock.a (which rlockctl links statically) and hidden in
 * librlock.so (-fvisibility=hidden; only rlock_* is exported). Everything
 * else rlockctl does goes through include/rlock.h.
 *
 * Read-only by construction: rlock__inspect_run refuses any command but the
 * reads listed in inspect.c (SCAN, TYPE, HGETALL, PTTL, LRANGE, ZRANGE,
 * GET, EXISTS, PUBSUB NUMSUB/SHARDNUMSUB, CLIENT LIST, ...), and a listener
 * connection sends only (P|S)SUBSCRIBE. Changing a lock is left to the
 * public calls (rlock_force_unlock), but for one thing no public call does:
 * removing another process's entry from a fair queue (at the end).
 *
 * Threads: any thread, as the public calls (each call is guarded like one).
 * Replies are hiredis's (freeReplyObject).
 */
#ifndef RLOCK_API_INSPECT_H
#define RLOCK_API_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "rlock.h"

/* A server the client sends commands to; lives as long as the client. Opaque. */
typedef struct rlock__node rlock__inspect_node;

/*
 * The most masters rlockctl asks (or listens to) at once: Redis Cluster's own
 * guidance is an upper bound of about 1000 masters. Was 64, which cut a
 * larger cluster's answers short without saying so.
 */
#define RLOCK__INSPECT_MAX_MASTERS 1024

/*
 * The masters serving keys now (one server; the master Sentinel names; each
 * Cluster master with slots), at most max into out; *n receives how many.
 * RLOCK_OK, RLOCK_ECLOSED, RLOCK_EINVAL.
 */
int rlock__inspect_masters(rlock_client *c, rlock__inspect_node **out, int max, int *n);
/* The node where subscribers of channel sit (the master of its slot). */
rlock__inspect_node *rlock__inspect_channel_node(rlock_client *c, const char *channel, size_t len);
/* "host:port" (or the socket path) of node into buf; returns buf. */
const char *rlock__inspect_node_addr(const rlock__inspect_node *node, char *buf, size_t size);
/* 1 if the client's unlock messages use sharded pub/sub (SPUBLISH / SSUBSCRIBE). */
int rlock__inspect_sharded(rlock_client *c);
/* 1 if keys live on the master of their slot (a redis-cluster:// url). */
int rlock__inspect_clustered(rlock_client *c);

/*
 * Redisson's name of a lock's companion key or channel, from the library's
 * own layout (kind/layout.c): "<prefix>:{<name>}", or "<prefix>:<name>" when
 * the name holds a '{'. The caller free()s it; NULL if out of memory.
 */
char *rlock__inspect_prefixed(const char *prefix, const char *name, size_t len,
                              size_t *out_len);

/* One read-only command. */
typedef struct rlock__inspect_cmd {
    rlock__inspect_node *node; /* run there; NULL: at the master serving argv[1] (a key) */
    int argc;
    const char **argv;
    const size_t *argvlen;     /* NULL: strlen of each argv */
} rlock__inspect_cmd;

/*
 * Runs n read-only commands, one pipeline per node (one round trip each,
 * all nodes at once; a MOVED or ASK is followed), and stores each reply in
 * replies[i] (an error reply is a reply; NULL for the commands of a node
 * that failed). RLOCK_OK if every node answered; RLOCK_EINVAL (a command not
 * on the read-only list: nothing is sent), RLOCK_EIO, RLOCK_ECLOSED,
 * RLOCK_ENOMEM with rlock_last_error() telling where.
 */
int rlock__inspect_run(rlock_client *c, const rlock__inspect_cmd *cmds, int n,
                       redisReply **replies);

/*
 * A connection of its own to node (AUTH, SELECT as the url says) for
 * listening to unlock messages; rlock__inspect_close() it. RLOCK_OK or an error.
 */
int rlock__inspect_listen(rlock_client *c, rlock__inspect_node *node, redisContext **out);
/* Frees a listener (its TLS session too: never redisFree). NULL: nothing. */
void rlock__inspect_close(redisContext *ctx);
/* Sends SUBSCRIBE, PSUBSCRIBE or SSUBSCRIBE (nothing else) on a listener. */
int rlock__inspect_subscribe(redisContext *ctx, int argc, const char **argv,
                             const size_t *argvlen);
/*
 * The next message or reply on a listener, waiting until deadline_ms
 * (CLOCK_MONOTONIC ms, rlock's clock: rlock__inspect_now_ms). RLOCK_OK with
 * *reply; RLOCK_BUSY if none came in time (the connection stays usable);
 * RLOCK_EIO if it broke.
 */
int rlock__inspect_read(redisContext *ctx, int64_t deadline_ms, redisReply **reply);
int64_t rlock__inspect_now_ms(void);

/*
 * The one write of the seam, for `rlockctl dequeue`: removes the queue entry
 * field (an owner field "<uuid>:<thread>") from the fair lock of handle fair
 * (rlock_get_fair), as that waiter giving up would -- those behind it move
 * wait_ms earlier, and if it was the head while the lock is free the next
 * live waiter is woken (FAIR_LEAVE, kind/lua/fair_leave.lua). No public call removes
 * another process's waiter: a fair queue stuck behind a stopped head has no
 * other remedy. 1 removed, 0 not queued, RLOCK_EINVAL (not a fair handle),
 * or an error of the command.
 */
int rlock__inspect_fair_dequeue(rlock *fair, const char *field, size_t len, long long wait_ms);

#endif /* RLOCK_API_INSPECT_H */
