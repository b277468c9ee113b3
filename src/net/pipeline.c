/*
 * pipeline.c - commands that skip exec.c's retries: a pipeline of script
 * calls in one round trip per node, the nodes working at once (the
 * watchdog's renewal rounds: the watchdog retries soon; only an entry
 * redirected is re-run through exec.c); the same over the nodes of several
 * nets, one command each (a fan-out: a Redlock's masters, a multi-lock's
 * members, written to every server before any reply is read); and a command
 * sent ahead on an idle connection whose reply another thread reads (a
 * waiter's attempt, written by the subscriber thread before it wakes the
 * waiter).
 *
 * Threads: the watchdog thread (pipelines), application threads (fan-outs,
 * read ahead) and the subscriber thread (send ahead).
 */
#include <errno.h>
#include <string.h>

#include "wire.h"

/*
 * One node's part of a pipeline: the commands routed to it (indexes into
 * the caller's arrays), the connection they went out on, and the outcome.
 */
typedef struct node_part {
    rlock__net *net;   /* the net the node belongs to */
    rlock__node *node;
    rlock__conn *conn; /* taken in send_part, given back in read_part */
    int *index;        /* k entries: where each command and reply is */
    int k;
    int wait_n; /* the WAIT that ends the part, or 0 */
    int status;
    int acks;
} node_part;

/* The replicas the part's closing WAIT must count: any write asks for it. */
static int part_wait_for(const rlock__net *net, const rlock__cmd *cmds, const node_part *p) {
    for (int j = 0; j < p->k; j++)
        if (rlock__wait_for(net, &cmds[p->index[j]]) > 0)
            return rlock__wait_for(net, &cmds[p->index[j]]);
    return 0;
}

/*
 * Sends the part's commands (and WAIT) on a connection to its node: an idle
 * connected one if idle_only (never waits), else one taken and connected by
 * deadline_ms. With idle_only and none idle, the part is left for later.
 */
static void send_part(const rlock__cmd *cmds, node_part *p, int idle_only, int64_t deadline_ms) {
    rlock__net *net = p->net;
    int status = RLOCK_OK;
    p->acks = -1;
    p->conn = idle_only ? rlock__pool_take_idle(&p->node->pool)
                        : rlock__pool_take(&p->node->pool, deadline_ms, &status);
    if (p->conn == NULL) {
        if (!idle_only)
            p->status = status == RLOCK_ECLOSED
                            ? RLOCK_ECLOSED
                            : rlock__fail(RLOCK_EIO, ETIMEDOUT, "%s: no pooled connection free",
                                          rlock__net_cmd_name(net, &cmds[p->index[0]]));
        return;
    }
    if (!idle_only)
        status = rlock__pool_connect(p->conn, net->settings->connect_timeout_ms, deadline_ms);
    if (status == RLOCK_EIO)
        rlock__node_unreachable(net, p->node);
    p->wait_n = part_wait_for(net, cmds, p);
    for (int j = 0; j < p->k && status == RLOCK_OK; j++)
        status = rlock__append_cmd(p->conn->ctx, &net->scripts, &cmds[p->index[j]], 0);
    if (status == RLOCK_OK && p->wait_n > 0)
        status = rlock__append_wait(net, p->conn->ctx, p->wait_n);
    if (status == RLOCK_OK && rlock__io_flush(p->conn->ctx, deadline_ms) != RLOCK_OK)
        status = rlock__fail_cmd_io(net, p->node, p->conn->ctx, &cmds[p->index[0]]);
    p->status = status;
}

/* Re-runs as EVAL the calls answered NOSCRIPT (scripts flushed meanwhile). */
static int rerun_noscript(rlock__net *net, const rlock__cmd *cmds, node_part *p,
                          int64_t deadline_ms, redisReply **replies) {
    int status = RLOCK_OK, reached, rerun_acks;
    for (int j = 0; j < p->k && status == RLOCK_OK; j++) {
        int i = p->index[j];
        if (!rlock__is_noscript(replies[i]))
            continue;
        rlock__drop_reply(&replies[i]);
        status = rlock__round_trip(net, p->conn->ctx, &cmds[i], 1, deadline_ms, &replies[i],
                                   &reached, &rerun_acks);
        if (rerun_acks >= 0 && (p->acks < 0 || rerun_acks < p->acks))
            p->acks = rerun_acks;
    }
    return status;
}

/* Reads the part's replies (and WAIT's), and gives its connection back. */
static void read_part(const rlock__cmd *cmds, node_part *p, int64_t deadline_ms,
                      redisReply **replies) {
    rlock__net *net = p->net;
    redisReply *wait_reply = NULL;
    int status = p->status;
    if (p->conn == NULL)
        return;
    redisContext *ctx = p->conn->ctx;
    for (int j = 0; j < p->k && status == RLOCK_OK; j++)
        if (rlock__io_read(ctx, deadline_ms, &replies[p->index[j]]) != RLOCK_OK)
            status = rlock__fail_cmd_io(net, p->node, ctx, &cmds[p->index[j]]);
    if (status == RLOCK_OK && p->wait_n > 0) {
        if (rlock__io_read(ctx, deadline_ms, &wait_reply) == RLOCK_OK)
            p->acks = rlock__wait_acks(wait_reply);
        else
            status = rlock__fail_cmd_io(net, p->node, ctx, &cmds[p->index[0]]);
        if (wait_reply != NULL)
            freeReplyObject(wait_reply);
    }
    if (status == RLOCK_OK)
        status = rerun_noscript(net, cmds, p, deadline_ms, replies);
    if (status == RLOCK_OK)
        rlock__link_up(net->events);
    rlock__pool_give(p->conn, status == RLOCK_OK);
    p->conn = NULL;
    for (int j = 0; status != RLOCK_OK && j < p->k; j++)
        rlock__drop_reply(&replies[p->index[j]]);
    p->status = status;
}

/*
 * Splits the commands by the node that serves each (cmds[i] on nets[i]):
 * parts[] (at most n) with their index lists carved from index (n entries).
 * Returns how many.
 */
static int split_by_node(rlock__net *const *nets, const rlock__cmd *cmds, int n, node_part *parts,
                         int *index, rlock__node **node_of) {
    int nparts = 0;
    for (int i = 0; i < n; i++) {
        node_of[i] = rlock__node_of(nets[i], &cmds[i]);
        int j = 0;
        while (j < nparts && parts[j].node != node_of[i])
            j++;
        if (j == nparts)
            parts[nparts++] = (node_part){.net = nets[i], .node = node_of[i]};
        parts[j].k++;
    }
    for (int j = 0, used = 0; j < nparts; j++) {
        parts[j].index = index + used;
        used += parts[j].k;
        parts[j].k = 0;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < nparts; j++)
            if (parts[j].node == node_of[i]) {
                parts[j].index[parts[j].k++] = i;
                break;
            }
    return nparts;
}

/* Lowers *acks to a (a WAIT's answer; -1: none was asked). */
static void lower_acks(int *acks, int a) {
    if (a >= 0 && (*acks < 0 || a < *acks))
        *acks = a;
}

/*
 * A reply that says "not here" (MOVED, ASK) is that entry's alone: it goes
 * through rlock__exec, which follows the redirect, while the others keep
 * their replies (an ASK of a RLOCK__CMD_NO_ASK entry is its reply). "Not now" (CLUSTERDOWN, TRYAGAIN, LOADING...) is not
 * retried: during a failover every entry could get one, and retrying them
 * one by one would hold the round for their number of round trips; the
 * caller tries again soon (TRYAGAIN: a multi-key call whose keys a
 * migration split, which no retry fixes before the migration ends).
 * statuses[i] receives the outcome of each entry re-run; acks[i] its WAIT's.
 */
static void rerun_redirected(rlock__net *const *nets, const rlock__cmd *cmds, int n,
                             int64_t deadline_ms, redisReply **replies, int *statuses,
                             int *acks) {
    for (int i = 0; i < n; i++) {
        const redisReply *r = replies[i];
        if (r == NULL || !rlock__is_redirect(r) ||
            ((cmds[i].flags & RLOCK__CMD_NO_ASK) && strncmp(r->str, "ASK ", 4) == 0))
            continue;
        rlock__cmd cmd = cmds[i];
        rlock__exec_info info;
        cmd.flags |= RLOCK__CMD_NO_RETRY;
        rlock__drop_reply(&replies[i]);
        statuses[i] = rlock__exec(nets[i], &cmd, deadline_ms, &replies[i], &info);
        acks[i] = statuses[i] == RLOCK_ENOREPL && info.acks < 0 ? 0 : info.acks;
        if (statuses[i] != RLOCK_ENOREPL || (replies[i] != NULL &&
                                             replies[i]->type == REDIS_REPLY_ERROR))
            continue;
        statuses[i] = RLOCK_OK; /* told by acks[i], as for the others */
    }
}

/*
 * Runs cmds[i] on nets[i]: one pipeline per node, every node's written
 * before any is read. statuses[i] is the outcome of the part cmds[i] went
 * in (RLOCK_OK: replies[i] is set, an error reply included), acks[i] the
 * WAIT answer of that part (-1: none asked).
 */
static int run_parts(rlock__net *const *nets, const rlock__cmd *cmds, int n, int64_t deadline_ms,
                     redisReply **replies, int *statuses, int *acks) {
    for (int i = 0; i < n; i++)
        replies[i] = NULL;
    if (n == 0)
        return RLOCK_OK;
    node_part *parts = rlock__malloc((size_t)n * sizeof(*parts));
    int *index = rlock__malloc((size_t)n * sizeof(*index));
    rlock__node **node_of = rlock__malloc((size_t)n * sizeof(*node_of));
    if (parts == NULL || index == NULL || node_of == NULL) {
        rlock__free(node_of);
        rlock__free(index);
        rlock__free(parts);
        return RLOCK_ENOMEM;
    }
    int nparts = split_by_node(nets, cmds, n, parts, index, node_of);
    /* Every node works on its part at once; a node that is slow to connect to
       (or hangs) is waited for only after the others have theirs. */
    for (int j = 0; j < nparts; j++)
        send_part(cmds, &parts[j], 1, deadline_ms);
    for (int j = 0; j < nparts; j++)
        if (parts[j].conn == NULL && parts[j].status == RLOCK_OK)
            send_part(cmds, &parts[j], 0, deadline_ms);
    for (int j = 0; j < nparts; j++) {
        read_part(cmds, &parts[j], deadline_ms, replies);
        for (int k = 0; k < parts[j].k; k++) {
            int i = parts[j].index[k];
            statuses[i] = rlock__net_closing(nets[i]) && parts[j].status != RLOCK_OK
                              ? RLOCK_ECLOSED
                              : parts[j].status;
            acks[i] = parts[j].acks;
        }
    }
    rerun_redirected(nets, cmds, n, deadline_ms, replies, statuses, acks);
    rlock__free(node_of);
    rlock__free(index);
    rlock__free(parts);
    return RLOCK_OK;
}

int rlock__exec_pipeline(rlock__net *net, const rlock__cmd *cmds, int n, int64_t deadline_ms,
                         redisReply **replies, int *acks) {
    int status = RLOCK_ENOMEM;
    rlock__net **nets = rlock__malloc((size_t)n * sizeof(*nets));
    int *statuses = rlock__malloc((size_t)n * sizeof(*statuses));
    int *part_acks = rlock__malloc((size_t)n * sizeof(*part_acks));
    *acks = -1;
    for (int i = 0; i < n; i++)
        replies[i] = NULL;
    if (nets != NULL && statuses != NULL && part_acks != NULL) {
        for (int i = 0; i < n; i++)
            nets[i] = net;
        status = run_parts(nets, cmds, n, deadline_ms, replies, statuses, part_acks);
    }
    /* The first failure that left an entry without a reply. */
    for (int i = 0; i < n && status == RLOCK_OK; i++)
        if (replies[i] == NULL)
            status = statuses[i];
    for (int i = 0; i < n && nets != NULL && statuses != NULL && part_acks != NULL; i++)
        lower_acks(acks, part_acks[i]);
    rlock__free(part_acks);
    rlock__free(statuses);
    rlock__free(nets);
    return status;
}

int rlock__exec_fanout(rlock__net *const *nets, const rlock__cmd *cmds, int n,
                       int64_t deadline_ms, redisReply **replies, int *statuses) {
    if (n == 0)
        return RLOCK_OK;
    int *acks = rlock__malloc((size_t)n * sizeof(*acks));
    int status = acks == NULL ? RLOCK_ENOMEM
                              : run_parts(nets, cmds, n, deadline_ms, replies, statuses, acks);
    for (int i = 0; i < n && status == RLOCK_OK; i++) {
        const redisReply *r = replies[i];
        if (statuses[i] != RLOCK_OK || r == NULL || r->type == REDIS_REPLY_ERROR)
            continue;
        /* With WAIT, too few acknowledgements: the reply says what the master did. */
        if (acks[i] >= 0 && acks[i] < rlock__wait_for(nets[i], &cmds[i]))
            statuses[i] = rlock__fail_acks(nets[i], rlock__node_of(nets[i], &cmds[i]),
                                           &cmds[i], acks[i]);
    }
    rlock__free(acks);
    return status;
}

rlock__conn *rlock__send_ahead(rlock__net *net, const rlock__cmd *cmd) {
    /* With WAIT, an attempt's answer means nothing until the replicas acknowledge it. */
    if (rlock__wait_for(net, cmd) > 0)
        return NULL;
    rlock__conn *conn = rlock__pool_take_idle(&rlock__node_of(net, cmd)->pool);
    if (conn == NULL)
        return NULL;
    /* An idle slot has nothing buffered: this small write does not wait. */
    if (rlock__append_cmd(conn->ctx, &net->scripts, cmd, 0) != RLOCK_OK ||
        rlock__io_flush(conn->ctx, rlock__now_ms()) != RLOCK_OK) {
        rlock__pool_give(conn, 0);
        return NULL;
    }
    return conn;
}

int rlock__read_ahead(rlock__conn *conn, int64_t deadline_ms, redisReply **reply) {
    int status = rlock__io_read(conn->ctx, deadline_ms, reply);
    rlock__pool_give(conn, status == RLOCK_OK);
    return status;
}
