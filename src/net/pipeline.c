/* SPDX-License-Identifier: BSD-3-Clause */
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
    rlock__conn *conn; /* taken in take_part, given back when the part ends */
    int *index;        /* k entries: where each command and reply is */
    int k;
    int wait_n;        /* the WAIT that ends the part, or 0 */
    int skip;          /* replies the connection owed before ours: read and dropped first */
    int got;           /* replies read so far, the skipped ones included */
    int status;
    int acks;
    int ended;         /* its outcome is known (or it was left unread) */
} node_part;

/* Replies the part reads: those owed before it, its commands', WAIT's. */
static int part_expects(const node_part *p) {
    return p->skip + p->k + (p->wait_n > 0);
}

/* The replicas the part's closing WAIT must count: any write asks for it. */
static int part_wait_for(const rlock__net *net, const rlock__cmd *cmds, const node_part *p) {
    for (int j = 0; j < p->k; j++)
        if (rlock__wait_for(net, &cmds[p->index[j]]) > 0)
            return rlock__wait_for(net, &cmds[p->index[j]]);
    return 0;
}

/* Why rlock__pool_take gave the part no connection (status: what it said). */
static int no_slot(rlock__net *net, const rlock__cmd *cmd, const node_part *p, int status) {
    if (status == RLOCK_ECLOSED)
        return RLOCK_ECLOSED;
    if (rlock__pool_fenced(&p->node->pool))
        return rlock__fail(RLOCK_EIO, 0, "%s: the client has left that master",
                           rlock__net_cmd_name(net, cmd));
    return rlock__fail_errno(RLOCK_EIO, ETIMEDOUT, "%s: no pooled connection free in time",
                             rlock__net_cmd_name(net, cmd));
}

/*
 * Takes a connection for the part: an idle connected one if idle_only (never
 * waits; unchecked: see drop_closed), else one taken and connected by
 * deadline_ms. With idle_only and none idle, the part is left for later. A
 * connection that owes replies (a fan-out left them unread) is used as it
 * is: they are read past.
 */
static void take_part(const rlock__cmd *cmds, node_part *p, int idle_only, int64_t deadline_ms) {
    rlock__net *net = p->net;
    int status = RLOCK_OK;
    p->acks = -1;
    p->conn = idle_only ? rlock__pool_take_idle(&p->node->pool, RLOCK__IDLE_OWING |
                                                                    RLOCK__IDLE_UNCHECKED)
                        : rlock__pool_take(&p->node->pool, deadline_ms, &status);
    if (p->conn == NULL) {
        if (!idle_only)
            p->status = no_slot(net, &cmds[p->index[0]], p, status);
        return;
    }
    if (!idle_only && (p->conn->ctx == NULL || p->conn->owed == 0))
        status = rlock__pool_connect(p->conn, net->settings->connect_timeout_ms, deadline_ms);
    if (status == RLOCK_EIO)
        rlock__node_unreachable(net, p->node);
    p->status = status;
}

/*
 * A command written on an idle connection is not sent again if that turns
 * out closed (a server restarted since its last use), so the idle ones just
 * taken are checked before anything is written -- one poll for all, not a
 * peek each: on a connection that owes nothing, data or a hang-up waiting
 * means the server closed it. Those are dropped; their parts are connected
 * anew with the others that had none.
 */
/*
 * Whether what is waiting on a TLS connection was only TLS's own (a session
 * ticket, a key update: taken in here), so the connection is still good.
 */
static int tls_housekeeping(redisContext *ctx) {
    rlock__tls_conn *tls = rlock__tls_of(ctx);
    return tls != NULL && rlock__tls_still_open(ctx, tls);
}

static void drop_closed(node_part *parts, int nparts, struct pollfd *fds, int *polled) {
    int taken = 0;
    for (int j = 0; j < nparts; j++)
        if (parts[j].conn != NULL && parts[j].conn->owed == 0) {
            fds[taken] = (struct pollfd){.fd = parts[j].conn->ctx->fd, .events = POLLIN};
            polled[taken++] = j;
        }
    if (taken == 0 || poll(fds, (nfds_t)taken, 0) <= 0)
        return; /* none closed (a failed poll: each write or read will tell) */
    for (int w = 0; w < taken; w++)
        if (fds[w].revents != 0 && !tls_housekeeping(parts[polled[w]].conn->ctx)) {
            rlock__pool_give(parts[polled[w]].conn, 0);
            parts[polled[w]].conn = NULL;
        }
}

/* Writes the part's commands (and WAIT) on the connection it took. */
static void write_part(const rlock__cmd *cmds, node_part *p, int64_t deadline_ms) {
    rlock__net *net = p->net;
    int status = p->status;
    p->skip = status == RLOCK_OK ? p->conn->owed : 0;
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

/* Takes the replies already read into the part's buffer (no system call). */
static void take_buffered(const rlock__cmd *cmds, node_part *p, redisReply **replies) {
    redisContext *ctx = p->conn->ctx;
    while (p->status == RLOCK_OK && p->got < part_expects(p)) {
        void *raw = NULL;
        if (rlock__io_next(ctx, &raw) != REDIS_OK) { /* a fresh connection's SETNAME: taken off */
            p->status = rlock__fail_cmd_io(p->net, p->node, ctx, &cmds[p->index[0]]);
            return;
        }
        if (raw == NULL)
            return;
        int j = p->got++ - p->skip; /* < 0: owed from before; k: WAIT's */
        if (j >= 0 && j < p->k) {
            replies[p->index[j]] = raw;
            continue;
        }
        if (j == p->k)
            p->acks = rlock__wait_acks(raw);
        freeReplyObject(raw);
    }
}

/*
 * What a pipeline's parts are read into (the caller's arrays), and who is
 * told as each part ends: ended(run, part) returns 1 when the caller has
 * enough (rlock__exec_fanout's watch); NULL: every part is read.
 */
typedef struct fan_run {
    rlock__net *const *nets;
    const rlock__cmd *cmds;
    int64_t deadline_ms;
    redisReply **replies;
    int *statuses;
    int *acks;
    int (*ended)(struct fan_run *run, const node_part *p);
    const rlock__fan_enough *enough; /* the caller's, for ended */
} fan_run;

/*
 * Ends a part whose replies are all read, or that failed: NOSCRIPT re-runs,
 * the connection given back, each command's status and acks, and its
 * replies dropped on failure. Returns what run->ended says (0 without).
 */
static int end_part(fan_run *run, node_part *p) {
    /* Answered by a master the client has left: says nothing of the new one. */
    if (p->conn != NULL && p->status == RLOCK_OK && rlock__pool_fenced(&p->node->pool))
        p->status = rlock__fail(RLOCK_EIO, 0, "%s: the client has left that master",
                                rlock__net_cmd_name(p->net, &run->cmds[p->index[0]]));
    if (p->conn != NULL) {
        if (p->status == RLOCK_OK)
            p->status = rerun_noscript(p->net, run->cmds, p, run->deadline_ms, run->replies);
        if (p->status == RLOCK_OK) {
            rlock__link_up(p->net->events);
            p->conn->owed = 0; /* read past */
        }
        rlock__pool_give(p->conn, p->status == RLOCK_OK);
        p->conn = NULL;
    }
    for (int j = 0; j < p->k; j++) {
        int i = p->index[j];
        if (p->status != RLOCK_OK)
            rlock__drop_reply(&run->replies[i]);
        run->statuses[i] = rlock__net_closing(p->net) && p->status != RLOCK_OK ? RLOCK_ECLOSED
                                                                              : p->status;
        run->acks[i] = p->acks;
    }
    p->ended = 1;
    return run->ended != NULL && run->ended(run, p);
}

/*
 * Leaves a part none of whose replies has arrived unread (its caller had
 * enough): its commands are RLOCK_EIO -- unknown whether they ran --, and
 * its connection goes back owing their replies. Nothing is recorded: the
 * caller asked for this.
 */
static void leave_unread(fan_run *run, node_part *p) {
    p->conn->owed = part_expects(p) - p->got;
    rlock__pool_give(p->conn, 1);
    p->conn = NULL;
    for (int j = 0; j < p->k; j++) {
        run->statuses[p->index[j]] = RLOCK_EIO;
        run->acks[p->index[j]] = -1;
    }
    p->ended = 1;
}

/*
 * Reads the parts' replies as they arrive: one poll over every part still
 * waiting, each socket read when it is ready, each part ended as soon as it
 * has all its replies -- not one node after another. Once run->ended says
 * the caller has enough, the parts none of whose replies has arrived are
 * left unread; the others are read to their end. fds and polled have room
 * for nparts entries.
 */
static void read_parts(fan_run *run, node_part *parts, int nparts, struct pollfd *fds,
                       int *polled) {
    int enough = 0;
    for (;;) {
        int waiting = 0;
        for (int j = 0; j < nparts; j++) {
            node_part *p = &parts[j];
            if (p->ended)
                continue;
            if (p->conn != NULL)
                take_buffered(run->cmds, p, run->replies);
            if (p->conn == NULL || p->status != RLOCK_OK || p->got == part_expects(p))
                enough |= end_part(run, p);
        }
        for (int j = 0; j < nparts; j++) {
            node_part *p = &parts[j];
            if (p->ended)
                continue;
            if (enough && p->got <= p->skip) {
                leave_unread(run, p);
                continue;
            }
            fds[waiting] = (struct pollfd){.fd = p->conn->ctx->fd,
                                           .events = rlock__io_events(p->conn->ctx, POLLIN)};
            polled[waiting++] = j;
        }
        if (waiting == 0)
            return;
        int ready = rlock__io_wait_any(fds, waiting, run->deadline_ms), err = errno;
        for (int w = 0; w < waiting; w++) {
            node_part *p = &parts[polled[w]];
            redisContext *ctx = p->conn->ctx;
            if (ready > 0 && (fds[w].revents == 0 || rlock__io_fill(ctx) == REDIS_OK))
                continue;
            errno = err; /* the wait's (ETIMEDOUT), unless the read failed */
            p->status = rlock__fail_cmd_io(p->net, p->node, ctx, &run->cmds[p->index[0]]);
        }
    }
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
 * before any is read, the replies read as they arrive. run->statuses[i] is
 * the outcome of the part cmds[i] went in (RLOCK_OK: replies[i] is set, an
 * error reply included), run->acks[i] the WAIT answer of that part (-1: none
 * asked). One allocation for the parts and the wait.
 */
/* What a caller reads of each entry, also when the run fails before it starts. */
static void clear_entries(redisReply **replies, int *statuses, int *acks, int n, int status) {
    for (int i = 0; i < n; i++) {
        replies[i] = NULL;
        statuses[i] = status;
        if (acks != NULL)
            acks[i] = -1;
    }
}

static int run_parts(fan_run *run, int n) {
    clear_entries(run->replies, run->statuses, run->acks, n, RLOCK_OK);
    if (n == 0)
        return RLOCK_OK;
    size_t each = sizeof(node_part) + sizeof(rlock__node *) + sizeof(struct pollfd) +
                  2 * sizeof(int);
    node_part *parts = rlock__malloc((size_t)n * each);
    if (parts == NULL)
        return RLOCK_ENOMEM;
    rlock__node **node_of = (rlock__node **)(parts + n);
    struct pollfd *fds = (struct pollfd *)(node_of + n);
    int *index = (int *)(fds + n), *polled = index + n;
    int nparts = split_by_node(run->nets, run->cmds, n, parts, index, node_of);
    /* Every node works on its part at once; a node that is slow to connect to
       (or hangs) is waited for only after the others have theirs. */
    for (int j = 0; j < nparts; j++)
        take_part(run->cmds, &parts[j], 1, run->deadline_ms);
    drop_closed(parts, nparts, fds, polled);
    for (int j = 0; j < nparts; j++)
        if (parts[j].conn != NULL)
            write_part(run->cmds, &parts[j], run->deadline_ms);
    for (int j = 0; j < nparts; j++)
        if (parts[j].conn == NULL && parts[j].status == RLOCK_OK) {
            take_part(run->cmds, &parts[j], 0, run->deadline_ms);
            if (parts[j].conn != NULL)
                write_part(run->cmds, &parts[j], run->deadline_ms);
        }
    read_parts(run, parts, nparts, fds, polled);
    rerun_redirected(run->nets, run->cmds, n, run->deadline_ms, run->replies, run->statuses,
                     run->acks);
    rlock__free(parts);
    return RLOCK_OK;
}

int rlock__exec_pipeline(rlock__net *net, const rlock__cmd *cmds, int n, int64_t deadline_ms,
                         redisReply **replies, int *acks) {
    rlock__net **nets = rlock__malloc((size_t)n * (sizeof(*nets) + 2 * sizeof(int)));
    *acks = -1;
    for (int i = 0; i < n; i++)
        replies[i] = NULL;
    if (nets == NULL)
        return RLOCK_ENOMEM;
    int *statuses = (int *)(nets + n), *part_acks = statuses + n;
    for (int i = 0; i < n; i++)
        nets[i] = net;
    fan_run run = {.nets = nets, .cmds = cmds, .deadline_ms = deadline_ms, .replies = replies,
                   .statuses = statuses, .acks = part_acks};
    int status = run_parts(&run, n);
    /* The first failure that left an entry without a reply. */
    for (int i = 0; i < n && status == RLOCK_OK; i++)
        if (replies[i] == NULL)
            status = statuses[i];
    for (int i = 0; i < n; i++)
        lower_acks(acks, part_acks[i]);
    rlock__free(nets);
    return status;
}

/* With WAIT, too few acknowledgements: the reply says what the master did (RLOCK_ENOREPL). */
static void check_acks(fan_run *run, int i) {
    const redisReply *r = run->replies[i];
    rlock__net *net = run->nets[i];
    const rlock__cmd *cmd = &run->cmds[i];
    if (run->statuses[i] == RLOCK_OK && r != NULL && r->type != REDIS_REPLY_ERROR &&
        run->acks[i] >= 0 && run->acks[i] < rlock__wait_for(net, cmd))
        run->statuses[i] = rlock__fail_acks(net, rlock__node_of(net, cmd), cmd, run->acks[i]);
}

/* A fan-out's part ended: each command's outcome, told to the caller's watch. */
static int fanout_part_ended(fan_run *run, const node_part *p) {
    int enough = 0;
    for (int j = 0; j < p->k; j++) {
        int i = p->index[j];
        check_acks(run, i);
        if (run->enough != NULL)
            enough |= run->enough->enough(run->enough->arg, i, run->statuses[i], run->replies[i]);
    }
    return enough;
}

int rlock__exec_fanout(rlock__net *const *nets, const rlock__cmd *cmds, int n,
                       int64_t deadline_ms, redisReply **replies, int *statuses,
                       const rlock__fan_enough *enough) {
    if (n == 0)
        return RLOCK_OK;
    int *acks = rlock__malloc((size_t)n * sizeof(*acks));
    if (acks == NULL) {
        clear_entries(replies, statuses, NULL, n, RLOCK_ENOMEM);
        return RLOCK_ENOMEM;
    }
    fan_run run = {.nets = nets, .cmds = cmds, .deadline_ms = deadline_ms, .replies = replies,
                   .statuses = statuses, .acks = acks, .ended = fanout_part_ended,
                   .enough = enough};
    int status = run_parts(&run, n);
    for (int i = 0; i < n && status == RLOCK_OK; i++)
        check_acks(&run, i); /* the entries re-run after a redirect */
    rlock__free(acks);
    return status;
}

rlock__conn *rlock__send_ahead(rlock__net *net, const rlock__cmd *cmd) {
    /* With WAIT, an attempt's answer means nothing until the replicas acknowledge it. */
    if (rlock__wait_for(net, cmd) > 0)
        return NULL;
    rlock__conn *conn = rlock__pool_take_idle(&rlock__node_of(net, cmd)->pool, 0);
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
    if (status == RLOCK_OK && rlock__pool_fenced(&conn->node->pool)) { /* as in end_part */
        rlock__drop_reply(reply);
        status = rlock__fail(RLOCK_EIO, 0, "an attempt sent ahead: the client has left "
                                           "that master");
    }
    rlock__pool_give(conn, status == RLOCK_OK);
    return status;
}
