/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.h - the network layer's own helpers for one command's round trip,
 * shared by exec.c, migrate.c and pipeline.c; the layers above do not see it.
 */
#ifndef RLOCK_WIRE_H
#define RLOCK_WIRE_H

#include "route.h"

/* What a round trip did: the command surely never reached Redis, or may have. */
enum { RLOCK__REACHED_NONE, RLOCK__REACHED_MAYBE };

/* Replicas a WAIT after cmd must count (0: no WAIT). */
int rlock__wait_for(const rlock__net *net, const rlock__cmd *cmd);
/* Appends WAIT n timeout to ctx. */
int rlock__append_wait(const rlock__net *net, redisContext *ctx, int n);
/* A WAIT reply's count (an error reply counts none). */
int rlock__wait_acks(const redisReply *reply);
/*
 * Sends cmd (and WAIT when rlock__wait_for says so) on ctx and reads the
 * reply (and *acks, else -1) by deadline_ms. An EVALSHA answered NOSCRIPT is
 * sent again as EVAL (which also caches the script). *reached says whether a
 * failure may have let the command run (a failed write sends nothing Redis
 * would run: a partial command is never executed).
 */
int rlock__round_trip(rlock__net *net, redisContext *ctx, const rlock__cmd *cmd, int use_body,
                      int64_t deadline_ms, redisReply **reply, int *reached, int *acks);
/* The node that serves cmd's key: KEYS[1] of a script, argv[1] of a command. */
rlock__node *rlock__node_of(rlock__net *net, const rlock__cmd *cmd);
const char *rlock__net_cmd_name(const rlock__net *net, const rlock__cmd *cmd);
/* Records an error reply to cmd at node: Redis's text, the command and where. */
int rlock__fail_cmd_reply(rlock__net *net, const rlock__node *node, const redisReply *reply,
                          const rlock__cmd *cmd);
/* Records an I/O failure of cmd at node, tells events and the route; RLOCK_EIO. */
int rlock__fail_cmd_io(rlock__net *net, rlock__node *node, const redisContext *ctx,
                       const rlock__cmd *cmd);
/* A connection to node could not be made (the error is recorded): tell events and the route. */
void rlock__node_unreachable(rlock__net *net, rlock__node *node);
/* Records that fewer replicas than asked acknowledged cmd at node (acks < 0:
 * unknown, after a re-send); RLOCK_ENOREPL. */
int rlock__fail_acks(rlock__net *net, const rlock__node *node, const rlock__cmd *cmd, int acks);
void rlock__drop_reply(redisReply **reply);

/* Runs one plain command on node (one attempt); an error reply is returned with RLOCK_OK. */
int rlock__run_on(rlock__net *net, rlock__node *node, int argc, const char **argv,
                  const size_t *argvlen, int64_t hard_ms, redisReply **reply);
/*
 * migrate.c: whether reply says cmd's lock (of several keys) has keys on two
 * nodes, or would have: its slot migrating.
 */
int rlock__split_by_migration(const rlock__cmd *cmd, const redisReply *reply);
/*
 * migrate.c: moves the keys of cmd's lock left on *node to the node importing
 * their slot; *gathered 1 and *node that node (cmd runs next there, after
 * ASKING), or *gathered 0 if the slot is not migrating. RLOCK_OK, or the
 * failure of the commands that move the keys (an ACL without MIGRATE:
 * RLOCK_ENOPERM).
 */
int rlock__gather_family(rlock__net *net, const rlock__cmd *cmd, const redisReply *reply,
                         rlock__node **node, int64_t hard_ms, int *gathered);

#endif /* RLOCK_WIRE_H */
