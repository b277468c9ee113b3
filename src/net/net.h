/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net.h - the network layer: reaching Redis. PRIVATE: not installed, not API.
 *
 * What the layers above see is one call, "run this command for this key"
 * (rlock__exec and friends), on an rlock__net. Which server runs it is the
 * route's business (the routing seam, rlock__route_ops): one server, the
 * master Sentinel names, or the master of the key's Cluster slot.
 *
 *   url.c           redis[s]://, unix://, redis[s]-sentinel://, redis[s]-cluster:// -> rlock__url
 *   io.c            deadline-bounded, signal-proof reads and writes on a context
 *   tls.c           a connection's TLS session (OpenSSL): handshake, reads, writes
 *   connect.c       one connection: connect, TLS, AUTH, SELECT, error detail
 *   script.c        SCRIPT LOAD, EVALSHA with the EVAL fallback on NOSCRIPT
 *   pool.c          a node's connection pool (and the node itself)
 *   wire.c, exec.c  one command's round trip (+WAIT); running it with safe retries
 *   migrate.c       a lock's keys split by a Cluster slot migration, moved together
 *   pipeline.c      pipelines, one per node; sending ahead
 *   route_single.c  the single-server route
 *   route_sentinel.c, sentinel_resolve.c  the master Redis Sentinel names
 *   route_cluster.c, cluster_table.c, slot.c  Redis Cluster: a master per slot
 *   net.c           rlock__net: open (first connection, scripts, pub/sub kind), abort,
 *                   close; what the subscriber needs (its nodes, its connections)
 *
 * This header is the layer's face: what the layers above use. What only the
 * layer's own files share is in its private headers: conn.h (one
 * connection: io, TLS, connect, script internals), route.h (nodes, pools,
 * the routes; includes conn.h), wire.h (one command's round trip; includes
 * route.h), sentinel.h and cluster.h (their routes). Above, a node, a pooled
 * connection and a route are opaque pointers.
 *
 * Calls go down only: net uses core (core.h); it tells the client of
 * connection failures through the rlock__events queue it was given.
 *
 * Lock order, where one is taken under another: the engine's waiters mutex
 * -> a route's mutex -> a pool's mutex; the net's mutex -> the engine's
 * watchdog mutex (the switch listener). I/O never runs under a route's or
 * the net's mutex.
 */
#ifndef RLOCK_NET_H
#define RLOCK_NET_H

#include <poll.h>

#include "../core/core.h"

/* ---- url.c ------------------------------------------------------------------- */

typedef struct rlock__endpoint {
    char *host;        /* TCP host, or NULL for a unix socket; owned */
    int port;
    char *unix_path;   /* owned, or NULL */
    char *user;        /* ACL user, or NULL; owned */
    char *password;    /* NULL = no AUTH; owned */
    int db;
    int sentinel;      /* a sentinel: its AUTH is never the credentials callback's */
} rlock__endpoint;

#define RLOCK__MAX_SENTINELS 32
#define RLOCK__MAX_SEEDS 32     /* hosts of a redis-cluster:// url */

enum { RLOCK__URL_SINGLE, RLOCK__URL_SENTINEL, RLOCK__URL_CLUSTER };

/*
 * A parsed url: one server; sentinels and the name of the master they
 * watch; or the seed nodes of a cluster.
 */
typedef struct rlock__url {
    int kind;                  /* RLOCK__URL_* */
    rlock__endpoint server;    /* the server; else user, password, db of every data node */
    rlock__endpoint *hosts;    /* owned, nhosts entries (host, port): sentinels or seeds */
    int nhosts;
    char *master_name;         /* owned */
    char *sentinel_user;       /* owned, or NULL */
    char *sentinel_password;   /* owned, or NULL */
    rlock__tls_settings tls;   /* a rediss scheme: on, and its tls_* parameters */
    int tls_given;             /* which of them the url gave (bits, url.c) */
} rlock__url;

/*
 * url without its credentials, to show (a registration, a log line): the
 * userinfo ("user:password@") and the sentinel_user / sentinel_password
 * parameters left out. Into buf (size bytes, cut if longer); returns buf.
 */
const char *rlock__url_redacted(const char *url, char *buf, size_t size);
/*
 * Parses url (errors as url.c's parser) and lays its TLS over t: on for a
 * rediss scheme, and each tls_* parameter it gives replaces t's field (the
 * config's). Client open calls it before rlock__net_open.
 */
int rlock__url_tls(const char *url, rlock__tls_settings *t);

/* ---- io.c -------------------------------------------------------------------- */

/* Writes ctx's output buffer by deadline_ms (send, poll if full). RLOCK_EIO on failure. */
int rlock__io_flush(redisContext *ctx, int64_t deadline_ms);
/* Reads one reply by deadline_ms (read, then poll + read). RLOCK_EIO on failure/timeout. */
int rlock__io_read(redisContext *ctx, int64_t deadline_ms, redisReply **reply);
/*
 * redisBufferRead for every context rlock connects: what has come, into
 * ctx's reader, decrypted first on a TLS connection -- all of it, so that
 * nothing waits inside the TLS session for a poll() on the socket to miss.
 * REDIS_OK / REDIS_ERR (ctx->err, errstr).
 */
int rlock__io_fill(redisContext *ctx);
/*
 * What to poll ctx's socket for before its next read (usual POLLIN) or write
 * (POLLOUT): usual, unless a TLS session's last read must first write, or its
 * last write must first read (OpenSSL's WANT_WRITE / WANT_READ).
 */
short rlock__io_events(const redisContext *ctx, short usual);

/* ---- tls.c -------------------------------------------------------------------- */

/* redisFree, after the TLS session if any (never shut down: no bytes sent). Every context
 * rlock__connect made is freed by this. NULL: nothing. */
void rlock__conn_free(redisContext *ctx);

/* ---- connect.c --------------------------------------------------------------- */

#define RLOCK__WHERE_MAX 300

/*
 * Opens a connection to ep within deadline_ms (and never longer than
 * connect_timeout_ms): resolve, connect, then AUTH, SELECT and CLIENT
 * SETNAME pipelined (one round trip), each bounded by poll() on the
 * socket, so signals cannot stretch it. The context is non-blocking for
 * hiredis (REDIS_BLOCK cleared), its socket blocks reads for a slice
 * (rlock__io_block_reads): use it only through rlock__io_*, or read it only
 * when poll() says it is readable. Records the error
 * detail. RLOCK_EIO / EAUTH / ENOPERM / EREDIS / ENOMEM.
 *
 * ev is the client's: the connection is named ev->settings->conn_name and
 * counted in ev's statistics; a name the server refuses (an ACL, a server
 * without CLIENT SETNAME) is logged once per client and never fails the
 * connect. NULL ev: no name.
 */
int rlock__connect(const rlock__endpoint *ep, rlock__events *ev, int connect_timeout_ms,
                   int64_t deadline_ms, redisContext **out);
/*
 * For rlock__io_next only (every reply a connection rlock__connect made
 * gets is passed here first): 1 if it answers the connection's CLIENT
 * SETNAME, sent with its first command when there was no AUTH or SELECT to
 * wait for -- then it is dealt with here (a refusal counted and logged
 * once) and the caller frees it and reads on.
 */
int rlock__setup_reply(redisContext *ctx, const redisReply *reply);
/*
 * The next reply already read into ctx (NULL: none whole yet), for a loop
 * of its own around redisBufferRead (the subscriber, the Sentinel monitor).
 * Every reading path takes replies through this or rlock__io_read: both
 * take off first the reply of a CLIENT SETNAME the connection still owes
 * (rlock__setup_reply), so no caller ever sees it. REDIS_OK / REDIS_ERR.
 */
static inline int rlock__io_next(redisContext *ctx, void **reply) {
    for (;;) {
        *reply = NULL;
        if (redisGetReplyFromReader(ctx, reply) != REDIS_OK)
            return REDIS_ERR;
        /* Only a fresh connection owes its name's reply (the reader's user field): tested
         * inline, for the common case. */
        if (*reply == NULL || ctx->reader->privdata == NULL || !rlock__setup_reply(ctx, *reply))
            return REDIS_OK;
        freeReplyObject(*reply);
    }
}

/* "host:port", "[v6]:port" or the socket path into buf; returns buf. */
const char *rlock__endpoint_str(const rlock__endpoint *ep, char *buf, size_t size);

/* ---- commands and scripts (script.c) ----------------------------------------- */

/* A Lua script the layers above run (their static table; net keeps the SHA1s). */
typedef struct rlock__script {
    const char *name;          /* "ACQUIRE", for messages */
    const char *body;
} rlock__script;

#define RLOCK__MAX_SCRIPTS 32 /* the kinds' set must fit (kind/scripts.c checks) */

typedef struct rlock__script_set {
    const rlock__script *defs; /* not owned: static */
    int count;
    char sha[RLOCK__MAX_SCRIPTS][41]; /* written once at open, read-only after */
} rlock__script_set;

/*
 * A command: argv with lengths, optionally a script. The key it is about
 * (what routing looks at) is KEYS[1] for a script, argv[1] for a command.
 */
#define RLOCK__CMD_WRITE 1    /* changes a lock: WAIT for replicas when asked to */
#define RLOCK__CMD_NO_RETRY 2 /* a "try again" reply ends the call (the caller retries) */
/* An ASK reply ends the call: the command touches keys besides its declared one, and
 * after ASKING the importing node would answer for those of its slot as if it had them. */
#define RLOCK__CMD_NO_ASK 4

typedef struct rlock__node rlock__node;

typedef struct rlock__cmd {
    int script;            /* index in the script set, or -1 for a plain command */
    int flags;             /* RLOCK__CMD_* */
    int argc;              /* for a script: keys + args, after "EVALSHA sha numkeys" */
    int nkeys;             /* for a script */
    const char **argv;
    const size_t *argvlen;
    /* Run it on this node whatever its key (a command for every master, such as
       SCAN; a channel's PUBSUB NUMSUB); NULL: the route names the node. Not owned. */
    rlock__node *node;
    /* A script of a lock of several keys (fair, fenced, read-write): the lock's keys are
       KEYS[1] and those of its slot whose names contain family (Redisson's "{name}").
       A slot migration that splits them is met by moving them together (exec.c). NULL:
       the script touches its declared keys only. Not owned. */
    const char *family;
    size_t family_len;
} rlock__cmd;

/*
 * A script of several keys sent to a slot's importing node (after ASKING)
 * declares KEYS[1] alone, and passes the others as its first arguments after
 * this mark and their count: there, a command of several keys one of which
 * does not exist is answered TRYAGAIN for the whole migration. The scripts'
 * prelude (kind/lua/prelude/keys_as_args.lua) puts them back in KEYS.
 */
#define RLOCK__KEYS_AS_ARGS "rlock:keys-as-args"

/* ---- nodes, their pools, routes (opaque here: route.h) ------------------------------ */

/* A server commands can go to, a pooled connection to it, the routing of keys to nodes. */
typedef struct rlock__conn rlock__conn;
typedef struct rlock__pool rlock__pool;
typedef struct rlock__route rlock__route;

/* What a route is given (the net's; outlives the route). */
typedef struct rlock__route_env {
    const rlock__settings *settings;
    rlock__events *events;
    const rlock__script_set *scripts; /* loaded on a new master before it is used */
    /* A new master took over (any thread; must not block for long). */
    void (*switched)(void *arg);
    void *arg;
} rlock__route_env;

/* ---- slot.c: Redis Cluster's key -> slot rule -------------------------------------- */

#define RLOCK__CLUSTER_SLOTS 16384

/* ---- net.c and exec.c: the layer's face ------------------------------------------ */

typedef struct rlock__net {
    const rlock__settings *settings; /* read-only; the client's */
    rlock__events *events;           /* told of connection failures and recoveries */
    rlock__route *route;             /* owned */
    rlock__route_env route_env;      /* read-only after open */
    rlock__script_set scripts;
    pthread_mutex_t mutex;           /* guards the listener below and the waits on `closed` */
    pthread_cond_t closed;           /* broadcast on abort: ends retry pauses */
    void (*on_switch)(void *arg);    /* told when a new master took over; may be NULL */
    void *on_switch_arg;
    atomic_int closing;              /* set once by rlock__net_abort */
    int sharded;                     /* unlock messages: SPUBLISH/SSUBSCRIBE; set at open */
    int initialised;
} rlock__net;

/*
 * Parses url, opens its route, and makes the first connection (which proves
 * the url works and loads every script of `scripts`). Records the error
 * detail. RLOCK_EINVAL (malformed url), EIO, EAUTH, ENOPERM, EREDIS, ENOMEM.
 * On failure call rlock__net_close too.
 */
int rlock__net_open(rlock__net *net, const char *url, const rlock__settings *settings,
                    rlock__events *events, const rlock__script *scripts, int nscripts);
/* Close began: commands in flight and retry pauses end now (RLOCK_ECLOSED). */
void rlock__net_abort(rlock__net *net);
/* Frees everything (no command in flight). Safe after a failed open. */
void rlock__net_close(rlock__net *net);
int rlock__net_closing(rlock__net *net);
/*
 * Who to tell when a new master takes over (Sentinel): called on the route's
 * thread or a command's, after the switch, with net->mutex held (it must not
 * block, nor call into the net). Set it once the listener is ready; once a
 * call with fn NULL returns, it is not called any more.
 */
void rlock__net_on_switch(rlock__net *net, void (*fn)(void *arg), void *arg);
/*
 * Where a subscription to channel goes: the master of the channel's slot.
 * Sharded, it must (SSUBSCRIBE elsewhere is MOVED); classic, any node of a
 * Cluster hears every PUBLISH, but at the lock's master the message needs no
 * trip over the cluster bus (and Redisson subscribes there too). Nodes live
 * as long as the net: the pointer may be kept and compared.
 */
rlock__node *rlock__net_subscribe_node(rlock__net *net, const char *channel, size_t len);
/* Where node is (its address, its TLS settings): read-only, as long as the net lives. */
const rlock__endpoint *rlock__net_node_endpoint(const rlock__node *node);
/*
 * Opens a connection of its own (not pooled) to node, for a subscriber.
 * Tells events of the outcome, and the route of an I/O failure.
 */
int rlock__net_connect_node(rlock__net *net, rlock__node *node, int64_t deadline_ms,
                            redisContext **out);
/*
 * A subscription at node was answered with a redirect or "try again", or
 * dropped by the server (a sharded channel's slot moved: reply NULL): the
 * route patches its table or refreshes it.
 */
void rlock__net_subscription_moved(rlock__net *net, rlock__node *node, const redisReply *reply);
/*
 * Whether the unlock message a script on key publishes on channel reaches
 * its subscribers: not when sharded and the two hash to different slots
 * (names like "a{b"): Lua's SPUBLISH goes to key's shard, subscribers sit
 * at the channel's.
 */
int rlock__net_hears(const rlock__net *net, const char *key, size_t key_len, const char *channel,
                     size_t channel_len);
/*
 * Error replies after which Redis did not run the command: "try again"
 * (LOADING, BUSY, TRYAGAIN, MASTERDOWN, CLUSTERDOWN) or a redirect (MOVED,
 * ASK); a redirect; TRYAGAIN alone. Any reply (not an error: 0).
 */
int rlock__is_redirect_or_retry(const redisReply *reply);
int rlock__is_redirect(const redisReply *reply);
int rlock__is_tryagain(const redisReply *reply);

/*
 * Whether unlock messages use sharded pub/sub, as settings->pubsub_mode
 * says and (AUTO, SHARDED) the first node's answer to PUBSUB SHARDNUMSUB
 * allowed at open; and the command the unlock scripts publish with.
 */
int rlock__net_sharded(const rlock__net *net);
/*
 * The command a script on key publishes on channel with: SPUBLISH when
 * sharded and the channel is heard (rlock__net_hears), else PUBLISH (for
 * names like "a{b" sharded subscribers poll; Lua would refuse SPUBLISH to
 * another node's slot).
 */
const char *rlock__net_publish_verb(const rlock__net *net, const char *key, size_t key_len,
                                    const char *channel, size_t channel_len);

/*
 * Publishes payload on channel at the node that serves the channel, with
 * verb (rlock__net_publish_verb's answer for the lock): an unlock message again,
 * after a script published it on a node importing the slot (sharded
 * subscribers sit at the slot's owner until the migration ends).
 */
int rlock__net_publish(rlock__net *net, const char *verb, const char *channel,
                       size_t channel_len, const char *payload, int64_t deadline_ms);

/*
 * The masters serving keys now, at most max into out (one server; the
 * master Sentinel names; each Cluster master with slots); returns how many.
 * Nodes live as long as the net.
 */
int rlock__net_masters(rlock__net *net, rlock__node **out, int max);

/* The Cluster slot of key when the route puts keys by slot; -1 otherwise. */
int rlock__net_slot_of(const rlock__net *net, const char *key, size_t len);
/* 1 if keys a and b can be named by one script: same slot, or no slots at all. */
int rlock__net_same_slot(const rlock__net *net, const char *a, size_t a_len, const char *b,
                         size_t b_len);
/* Which node serves key now, as an identity to compare (never dereferenced above the net). */
const void *rlock__net_node_of(rlock__net *net, const char *key, size_t len);
/*
 * The server that serves key now, as "host:port" (a unix socket: its path)
 * into buf: the numeric address its node's first connection reached, so one
 * server reached by two names ("localhost", "127.0.0.1") is one server;
 * before any connection, the url's spelling. What tells a Redlock's masters
 * apart. Returns buf.
 */
const char *rlock__net_server(rlock__net *net, const char *key, size_t len, char *buf,
                              size_t size);
/*
 * Where key is served now, as rlock__net_server's "host:port" and "/db" into
 * buf: what a multi-lock orders same-named members by and what tells two
 * clients of one key apart. Returns buf.
 */
const char *rlock__net_where(rlock__net *net, const char *key, size_t len, char *buf, size_t size);

/* What rlock__exec tells besides the reply (pass NULL if nothing is wanted). */
typedef struct rlock__exec_info {
    int resent;    /* an attempt that may have reached Redis was followed by another */
    int acks;      /* a write with replica_acks set: replicas that acknowledged it; else -1 */
    int asked;     /* it ran after ASKING, on a node importing its slot (Cluster) */
    int64_t sent_ms; /* when the attempt whose reply ended the call began: what a script
                        that re-arms a TTL on every send (an acquire) counts its lease from;
                        earlier re-sends may have gone nowhere (a master down) */
} rlock__exec_info;

/*
 * Runs one command on a pooled connection of the node that serves its key
 * and stores the reply (caller frees with freeReplyObject). Connection
 * failures and "try again" errors (LOADING, BUSY, TRYAGAIN, MASTERDOWN,
 * CLUSTERDOWN) are retried up to retry_attempts times with a capped,
 * jittered exponential pause, never past deadline_ms; a redirect the route
 * recognises is followed at once. All rlock commands are safe to re-send
 * (the scripts are idempotent per hold count). info->resent is set when an
 * attempt that may have reached Redis was followed by another. The route is
 * asked again for the node at each attempt, and told of I/O failures and of
 * error replies (it may redirect, or re-resolve a Sentinel master).
 *
 * WAIT: a command with RLOCK__CMD_WRITE, when replica_acks > 0, is followed
 * on the same connection by WAIT replica_acks replica_ack_timeout_ms (one
 * round trip); info->acks is its answer, and fewer than asked gives
 * RLOCK_ENOREPL with the command's reply (the caller decides what to undo).
 * A NOREPLICAS error reply (min-replicas-to-write) is RLOCK_ENOREPL too.
 *
 * Deadlines: re-sends happen while deadline_ms lasts, and the whole call
 * ends by deadline_ms + command_timeout_ms (RLOCK__NO_DEADLINE: each attempt
 * by its start + command_timeout_ms, connecting by its start +
 * connect_timeout_ms). Queueing for a pooled connection, connecting, writing
 * and reading all count. A command that surely never reached Redis (the
 * pooled connection was found closed, or the write failed) is sent again at
 * once on a fresh connection, also past deadline_ms (within the hard bound).
 *
 * A script of a lock of several keys (cmd->family) answered TRYAGAIN, ASK
 * or "non local key" on a Cluster whose slot is migrating: the lock's keys
 * left on the exporting node are moved to the importing one (one MIGRATE),
 * where it runs next after ASKING, its keys as arguments (RLOCK__KEYS_AS_ARGS);
 * a failure of that move is the call's status (ENOPERM: an ACL without
 * MIGRATE), with no reply.
 *
 * An error reply records its detail (rlock__fail_reply) and returns its
 * mapped status (EAUTH, ENOPERM, ENOTLOCK, EREDIS) with the reply. I/O
 * failures record host:port and errno, and tell events. Returns RLOCK_OK,
 * RLOCK_EIO, an error reply's status, RLOCK_ECLOSED or RLOCK_ENOMEM.
 */
int rlock__exec(rlock__net *net, const rlock__cmd *cmd, int64_t deadline_ms, redisReply **reply,
                rlock__exec_info *info);

/*
 * The repeated "exec, read the reply, free it": runs cmd as rlock__exec does
 * and, on RLOCK_OK, gives the reply to read (which returns the call's
 * status); the reply is freed here. An error reply never reaches read.
 */
typedef int (*rlock__reply_reader)(const redisReply *reply, void *arg);
int rlock__exec_read(rlock__net *net, const rlock__cmd *cmd, int64_t deadline_ms,
                     rlock__exec_info *info, rlock__reply_reader read, void *arg);

/*
 * Runs n script calls as one pipeline per node that serves their keys (one
 * round trip per node, all nodes at once), without retries (the watchdog
 * retries next round), except that a call answered MOVED, ASK or "try
 * again" is run again alone through rlock__exec -- but not TRYAGAIN (keys
 * split by a migration: the caller splits the call). Each call's keys must be
 * in one slot. replies[i] is set for each call its node answered, NULL for
 * the calls of a node that failed. Returns RLOCK_OK if every node answered,
 * else the first failure's status (RLOCK_EIO, ECLOSED, ENOMEM). With
 * replica_acks set and a write among them, one WAIT ends each node's part:
 * *acks receives the smallest answer (else -1).
 */
int rlock__exec_pipeline(rlock__net *net, const rlock__cmd *cmds, int n, int64_t deadline_ms,
                         redisReply **replies, int *acks);

/*
 * What a fan-out's caller is told as each command's outcome becomes known:
 * enough(arg, i, statuses[i], replies[i]) returns 1 once the caller has
 * what it needs (a Redlock: a quorum held). The fan-out then stops waiting:
 * a node none of whose replies has arrived is left unread -- its commands
 * RLOCK_EIO, replies NULL: unknown whether they ran -- and its connection
 * goes back owing those replies (the next command there reads past them).
 */
typedef struct rlock__fan_enough {
    int (*enough)(void *arg, int i, int status, const redisReply *reply);
    void *arg;
} rlock__fan_enough;

/*
 * A fan-out: cmds[i] on nets[i] (independent servers, or several commands
 * of one net), every node's commands written before any reply is read, and
 * the replies read as they arrive (one poll over every socket still
 * waiting), so n servers cost about one round trip, not n. No retries (the
 * caller's algorithm retries), except that a MOVED or ASK reply is followed
 * through rlock__exec. Per command: statuses[i] RLOCK_OK with replies[i] set
 * (an error reply included: its meaning is the caller's), RLOCK_ENOREPL with
 * the reply (replica_acks set and fewer replicas acknowledged), or the
 * failure of its node (RLOCK_EIO: unknown whether it ran; RLOCK_ECLOSED)
 * with replies[i] NULL. Every reply is bounded by deadline_ms; enough (NULL:
 * every reply is awaited) may end the wait sooner. Returns RLOCK_OK, or
 * RLOCK_ENOMEM (nothing sent).
 */
int rlock__exec_fanout(rlock__net *const *nets, const rlock__cmd *cmds, int n,
                       int64_t deadline_ms, redisReply **replies, int *statuses,
                       const rlock__fan_enough *enough);

/*
 * Sending ahead: a thread that knows a command will be needed sends it on an
 * idle, connected pool slot without waiting (never blocks on the pool or on
 * connecting; NULL if no such slot or the write failed), and hands the slot
 * to the thread that reads the reply with rlock__read_ahead, which gives the
 * slot back. No retries: whoever reads a failure sends the command again
 * through rlock__exec (every rlock command is safe to re-send).
 */
rlock__conn *rlock__send_ahead(rlock__net *net, const rlock__cmd *cmd);
int rlock__read_ahead(rlock__conn *conn, int64_t deadline_ms, redisReply **reply);

#endif /* RLOCK_NET_H */
