/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_priv.h - what cluster.c and cluster_change.c share: connections
 * to a node that fail softly (a node being killed or failed over may not
 * answer; the callers poll).
 */
#ifndef RLOCK_TEST_HARNESS_CLUSTER_PRIV_H
#define RLOCK_TEST_HARNESS_CLUSTER_PRIV_H

#include <hiredis/hiredis.h>

#include "server.h"

/* A connection to s with 1 s timeouts, or NULL (not running, stopped, refused). */
redisContext *h_cluster_probe(const h_server *s);
/* A command without arguments whose reply is a string or status (CLUSTER
 * NODES, INFO, ...): a malloc'd copy, or NULL if s did not answer that. */
char *h_cluster_ask_str(const h_server *s, const char *cmd);

#endif /* RLOCK_TEST_HARNESS_CLUSTER_PRIV_H */
