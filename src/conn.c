/*
 * conn.c - reaching Redis: url parsing, connecting (AUTH, SELECT), the
 * command connection pool, and running commands with safe retries, all
 * within absolute deadlines.
 *
 * This is the one place the lock code goes through to reach Redis
 * (rlock__exec / rlock__exec_pipeline: "run this for this key"). Sentinel
 * discovery and Cluster slot routing belong here, behind the same calls.
 *
 * Deadlines: every context is non-blocking (REDIS_BLOCK cleared) for its
 * whole life, and every wait -- connecting, writing, reading -- is a poll()
 * on its socket with the time left to an absolute deadline, recomputed after
 * each wake-up. hiredis's own blocking read restarts on EINTR with its full
 * socket timeout, so a signal every few ms would stretch a call for ever;
 * here no signal pattern can. Queueing for a pooled connection counts too.
 * Writes are send(MSG_NOSIGNAL), not hiredis's write(): application threads
 * run them with their own signal mask, and a socket shut down by close or
 * reset by the peer must be an error, not a SIGPIPE that ends the process.
 *
 * Threads: every application thread calling rlock_* and the watchdog thread
 * take connections from the pool; the subscriber thread connects through
 * rlock__connect and sends ahead; rlock_client_close aborts them.
 * Locking: pool.mutex guards the slots' busy flags, pool.closing, and every
 * write of a slot's ctx pointer. A slot's ctx is used only by the thread that
 * holds the slot (busy), outside the mutex, except that close may shutdown()
 * its socket under pool.mutex to abort a command in flight. A context that
 * saw any error or timed out is freed, never returned to the pool (a hiredis
 * context is unusable after an error).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "internal.h"

/* ---- url ---------------------------------------------------------------- */

static int hex_value(char ch) {
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Copies [s, s+len) with %XX decoded; NULL on a bad escape or no memory. */
static char *percent_decode(const char *s, size_t len, int *status) {
    char *out = rlock__malloc(len + 1);
    size_t n = 0;
    if (out == NULL) {
        *status = RLOCK_ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '%') {
            out[n++] = s[i];
            continue;
        }
        int hi = i + 2 < len ? hex_value(s[i + 1]) : -1;
        int lo = i + 2 < len ? hex_value(s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            rlock__free(out);
            *status = RLOCK_EINVAL;
            return NULL;
        }
        out[n++] = (char)(hi * 16 + lo);
        i += 2;
    }
    out[n] = '\0';
    return out;
}

/* Parses a decimal in [lo, hi] spanning exactly [s, s+len). */
static int parse_int(const char *s, size_t len, long lo, long hi, int *out) {
    long v = 0;
    if (len == 0 || len > 9)
        return RLOCK_EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return RLOCK_EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return RLOCK_EINVAL;
    *out = (int)v;
    return RLOCK_OK;
}

static int parse_userinfo(const char *s, size_t len, rlock__endpoint *ep) {
    const char *colon = memchr(s, ':', len);
    int status = RLOCK_OK;
    if (colon == NULL)
        return RLOCK_EINVAL; /* "user@" without a password is ambiguous */
    size_t user_len = (size_t)(colon - s);
    if (user_len > 0 && (ep->user = percent_decode(s, user_len, &status)) == NULL)
        return status;
    ep->password = percent_decode(colon + 1, len - user_len - 1, &status);
    return ep->password == NULL ? status : RLOCK_OK;
}

static int parse_hostport(const char *s, size_t len, rlock__endpoint *ep) {
    const char *host = s, *port = NULL;
    size_t host_len;
    if (len > 0 && s[0] == '[') { /* [ipv6]:port */
        const char *close = memchr(s, ']', len);
        if (close == NULL)
            return RLOCK_EINVAL;
        host = s + 1;
        host_len = (size_t)(close - host);
        if (close + 1 < s + len) {
            if (close[1] != ':')
                return RLOCK_EINVAL;
            port = close + 2;
        }
    } else {
        port = memchr(s, ':', len);
        host_len = port != NULL ? (size_t)(port - s) : len;
        if (port != NULL)
            port++;
    }
    if (host_len == 0 || memchr(host, '\0', host_len) != NULL)
        return RLOCK_EINVAL;
    ep->port = 6379;
    if (port != NULL && parse_int(port, (size_t)(s + len - port), 1, 65535, &ep->port) != RLOCK_OK)
        return RLOCK_EINVAL;
    ep->host = rlock__memdup0(host, host_len);
    return ep->host == NULL ? RLOCK_ENOMEM : RLOCK_OK;
}

static int parse_tcp_url(const char *rest, rlock__endpoint *ep) {
    size_t len = strlen(rest);
    const char *slash = memchr(rest, '/', len);
    size_t authority_len = slash != NULL ? (size_t)(slash - rest) : len;
    const char *at = NULL;
    int status;

    for (size_t i = 0; i < authority_len; i++) /* the last '@' ends the userinfo */
        if (rest[i] == '@')
            at = rest + i;
    if (at != NULL) {
        status = parse_userinfo(rest, (size_t)(at - rest), ep);
        if (status != RLOCK_OK)
            return status;
    }
    const char *hostport = at != NULL ? at + 1 : rest;
    status = parse_hostport(hostport, (size_t)(rest + authority_len - hostport), ep);
    if (status != RLOCK_OK)
        return status;
    if (slash != NULL && slash[1] != '\0')
        return parse_int(slash + 1, strlen(slash + 1), 0, INT_MAX, &ep->db);
    return RLOCK_OK;
}

static int parse_unix_url(const char *rest, rlock__endpoint *ep) {
    const char *query = strchr(rest, '?');
    size_t path_len = query != NULL ? (size_t)(query - rest) : strlen(rest);
    if (path_len == 0 || rest[0] != '/')
        return RLOCK_EINVAL;
    if (query != NULL) {
        if (strncmp(query, "?db=", 4) != 0)
            return RLOCK_EINVAL;
        if (parse_int(query + 4, strlen(query + 4), 0, INT_MAX, &ep->db) != RLOCK_OK)
            return RLOCK_EINVAL;
    }
    ep->unix_path = rlock__memdup0(rest, path_len);
    return ep->unix_path == NULL ? RLOCK_ENOMEM : RLOCK_OK;
}

int rlock__parse_url(const char *url, rlock__endpoint *ep) {
    int status = RLOCK_EINVAL;
    memset(ep, 0, sizeof(*ep));
    if (url == NULL)
        return RLOCK_EINVAL;
    if (strncmp(url, "redis://", 8) == 0)
        status = parse_tcp_url(url + 8, ep);
    else if (strncmp(url, "unix://", 7) == 0)
        status = parse_unix_url(url + 7, ep);
    if (status != RLOCK_OK)
        rlock__endpoint_clear(ep);
    return status;
}

void rlock__endpoint_clear(rlock__endpoint *ep) {
    rlock__free(ep->host);
    rlock__free(ep->unix_path);
    rlock__free(ep->user);
    if (ep->password != NULL)
        memset(ep->password, 0, strlen(ep->password));
    rlock__free(ep->password);
    memset(ep, 0, sizeof(*ep));
}

/* ---- deadline-bounded I/O --------------------------------------------- */

/* Milliseconds left to deadline_ms for poll(): -1 = no deadline, 0 = passed. */
static int ms_left(int64_t deadline_ms) {
    if (deadline_ms == RLOCK__NO_DEADLINE)
        return -1;
    int64_t left = deadline_ms - rlock__now_ms();
    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

/*
 * Waits until fd is ready for events or deadline_ms passes. A signal only
 * makes it recompute the time left. Returns RLOCK_OK, or RLOCK_EIO with
 * errno ETIMEDOUT (deadline) or poll's errno.
 */
static int wait_ready(int fd, short events, int64_t deadline_ms) {
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = events};
        int timeout = ms_left(deadline_ms);
        int n = poll(&pfd, 1, timeout);
        if (n > 0)
            return RLOCK_OK;
        if (n == 0) {
            errno = ETIMEDOUT;
            return RLOCK_EIO;
        }
        if (errno != EINTR)
            return RLOCK_EIO;
    }
}

/*
 * redisBufferWrite of hiredis 0.14, but with send(MSG_NOSIGNAL): hiredis
 * uses write(), which raises SIGPIPE on a socket shut down (by close, to
 * abort a command) or reset by the peer, and application threads run this
 * with their own signal mask: the default action would end the process.
 * The failure is recorded in ctx as hiredis would (err, errstr).
 */
static int buffer_write(redisContext *ctx, int *done) {
    size_t len;
    ssize_t n = 0;
    if (ctx->err != 0)
        return REDIS_ERR;
    len = sdslen(ctx->obuf);
    if (len > 0)
        n = send(ctx->fd, ctx->obuf, len > INT_MAX ? INT_MAX : len, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        int err = errno;
        ctx->err = REDIS_ERR_IO;
        snprintf(ctx->errstr, sizeof(ctx->errstr), "%s", strerror(err));
        errno = err;
        return REDIS_ERR;
    }
    if (n > 0) {
        /* As hiredis: an emptied buffer is replaced, so a big pipeline's memory goes. */
        sds fresh = (size_t)n == len ? sdsempty() : NULL;
        if (fresh != NULL) {
            sdsfree(ctx->obuf);
            ctx->obuf = fresh;
        } else {
            sdsrange(ctx->obuf, (int)n, -1);
        }
    }
    *done = sdslen(ctx->obuf) == 0;
    return REDIS_OK;
}

int rlock__io_flush(redisContext *ctx, int64_t deadline_ms) {
    int done = 0;
    for (;;) {
        if (buffer_write(ctx, &done) != REDIS_OK)
            return RLOCK_EIO;
        if (done)
            return RLOCK_OK;
        if (wait_ready(ctx->fd, POLLOUT, deadline_ms) != RLOCK_OK)
            return RLOCK_EIO;
    }
}

int rlock__io_read(redisContext *ctx, int64_t deadline_ms, redisReply **reply) {
    *reply = NULL;
    for (;;) {
        void *raw = NULL;
        if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK)
            return RLOCK_EIO;
        if (raw != NULL) {
            *reply = raw;
            return RLOCK_OK;
        }
        if (wait_ready(ctx->fd, POLLIN, deadline_ms) != RLOCK_OK)
            return RLOCK_EIO;
        if (redisBufferRead(ctx) != REDIS_OK)
            return RLOCK_EIO;
    }
}

/* ---- connecting ---------------------------------------------------------- */

/* "host:port" or the socket path, for messages. */
static const char *where(const rlock__endpoint *ep, char *buf, size_t size) {
    if (ep->unix_path != NULL)
        snprintf(buf, size, "%s", ep->unix_path);
    else if (strchr(ep->host, ':') != NULL)
        snprintf(buf, size, "[%s]:%d", ep->host, ep->port);
    else
        snprintf(buf, size, "%s:%d", ep->host, ep->port);
    return buf;
}

#define WHERE_MAX 300

/*
 * The errno behind a hiredis I/O error (hiredis 0.14 keeps only its text):
 * matched against the errors a connection can meet. 0 if none matches.
 */
static int errno_of(const redisContext *ctx) {
    static const int candidates[] = {ECONNREFUSED, ETIMEDOUT,  EHOSTUNREACH, ENETUNREACH,
                                     ECONNRESET,   EPIPE,      ENOENT,       EACCES,
                                     EADDRNOTAVAIL, ECONNABORTED, EAGAIN,    ENOTCONN};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++)
        if (strstr(ctx->errstr, strerror(candidates[i])) != NULL)
            return candidates[i];
    return 0;
}

/* Records an I/O failure of ctx (or of the call, with sys_errno) and returns RLOCK_EIO. */
static int fail_io(const rlock__endpoint *ep, const redisContext *ctx, int sys_errno,
                   const char *what) {
    char at[WHERE_MAX];
    where(ep, at, sizeof(at));
    if (ctx != NULL && ctx->err != 0 && sys_errno == 0) {
        int err = errno_of(ctx);
        if (err != 0)
            return rlock__fail(RLOCK_EIO, err, "%s %s", what, at);
        return rlock__fail(RLOCK_EIO, 0, "%s %s: %s", what, at, ctx->errstr);
    }
    return rlock__fail(RLOCK_EIO, sys_errno, "%s %s", what, at);
}

/* Runs one setup command (AUTH, SELECT) by deadline_ms; error replies mapped. */
static int setup_command(const rlock__endpoint *ep, redisContext *ctx, int argc,
                         const char **argv, int64_t deadline_ms) {
    redisReply *reply = NULL;
    char at[WHERE_MAX], what[WHERE_MAX + 64];
    int status = RLOCK_OK;
    if (redisAppendCommandArgv(ctx, argc, argv, NULL) != REDIS_OK)
        return rlock__fail(RLOCK_ENOMEM, 0, "%s: out of memory", argv[0]);
    if (rlock__io_flush(ctx, deadline_ms) != RLOCK_OK ||
        rlock__io_read(ctx, deadline_ms, &reply) != RLOCK_OK) {
        int err = errno;
        snprintf(what, sizeof(what), "%s at", argv[0]);
        return fail_io(ep, ctx, ctx->err != 0 ? 0 : err, what);
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        snprintf(what, sizeof(what), "%s%s%s at %s", argv[0],
                 argc == 3 ? " as user " : "", argc == 3 ? argv[1] : "",
                 where(ep, at, sizeof(at)));
        status = rlock__fail_reply(reply, what);
    }
    freeReplyObject(reply);
    return status;
}

static int authenticate(const rlock__endpoint *ep, redisContext *ctx, int64_t deadline_ms) {
    char db[24];
    int status = RLOCK_OK;
    if (ep->password != NULL) {
        const char *auth_user[] = {"AUTH", ep->user, ep->password};
        const char *auth[] = {"AUTH", ep->password};
        status = ep->user != NULL ? setup_command(ep, ctx, 3, auth_user, deadline_ms)
                                  : setup_command(ep, ctx, 2, auth, deadline_ms);
    }
    if (status == RLOCK_OK && ep->db != 0) {
        rlock__fmt_u64(db, (uint64_t)ep->db);
        const char *select[] = {"SELECT", db};
        status = setup_command(ep, ctx, 2, select, deadline_ms);
    }
    return status;
}

/* Completes a non-blocking connect by deadline_ms (SO_ERROR tells the outcome). */
static int finish_connect(const rlock__endpoint *ep, redisContext *ctx, int64_t deadline_ms) {
    int err = 0;
    socklen_t len = sizeof(err);
    if (wait_ready(ctx->fd, POLLOUT, deadline_ms) != RLOCK_OK)
        return fail_io(ep, NULL, errno, "connect to");
    if (getsockopt(ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    return err != 0 ? fail_io(ep, NULL, err, "connect to") : RLOCK_OK;
}

/* A hiredis context that failed before any socket: a name that did not resolve? */
static int failed_resolving(const rlock__endpoint *ep, const redisContext *ctx) {
    return ep->unix_path == NULL && ctx->err == REDIS_ERR_OTHER;
}

int rlock__connect(const rlock__settings *s, int64_t deadline_ms, redisContext **out) {
    const rlock__endpoint *ep = &s->endpoint;
    int64_t connect_by = rlock__deadline_after(s->connect_timeout_ms);
    int status = RLOCK_EIO;

    *out = NULL;
    if (connect_by > deadline_ms)
        connect_by = deadline_ms;
    redisContext *ctx = ep->unix_path != NULL ? redisConnectUnixNonBlock(ep->unix_path)
                                              : redisConnectNonBlock(ep->host, ep->port);
    if (ctx == NULL)
        return rlock__fail(RLOCK_ENOMEM, 0, "connect: out of memory");
    if (ctx->err != 0) {
        status = fail_io(ep, ctx, 0, failed_resolving(ep, ctx) ? "resolve" : "connect to");
        if (failed_resolving(ep, ctx))
            rlock__fail_host_not_found();
        goto fail;
    }
    if ((status = finish_connect(ep, ctx, connect_by)) != RLOCK_OK)
        goto fail;
    if (ep->unix_path == NULL)
        redisEnableKeepAlive(ctx);
    if ((status = authenticate(ep, ctx, connect_by)) != RLOCK_OK)
        goto fail;
    *out = ctx;
    return RLOCK_OK;
fail:
    redisFree(ctx);
    return status;
}

/* ---- the pool ------------------------------------------------------------ */

int rlock__pool_init(rlock__pool *pool, int size) {
    memset(pool, 0, sizeof(*pool));
    pool->slots = rlock__calloc((size_t)size, sizeof(*pool->slots));
    if (pool->slots == NULL)
        return RLOCK_ENOMEM;
    pool->size = size;
    if (pthread_mutex_init(&pool->mutex, NULL) != 0)
        goto fail_mutex;
    if (rlock__cond_init(&pool->available) != 0)
        goto fail_cond;
    if (rlock__cond_init(&pool->closed) != 0)
        goto fail_closed;
    return RLOCK_OK;
fail_closed:
    pthread_cond_destroy(&pool->available);
fail_cond:
    pthread_mutex_destroy(&pool->mutex);
fail_mutex:
    rlock__free(pool->slots);
    pool->slots = NULL;
    return RLOCK_ENOMEM;
}

void rlock__pool_abort(rlock__pool *pool) {
    if (pool->slots == NULL)
        return;
    pthread_mutex_lock(&pool->mutex);
    pool->closing = 1;
    for (int i = 0; i < pool->size; i++)
        if (pool->slots[i].busy && pool->slots[i].ctx != NULL)
            shutdown(pool->slots[i].ctx->fd, SHUT_RDWR);
    pthread_cond_broadcast(&pool->available);
    pthread_cond_broadcast(&pool->closed);
    pthread_mutex_unlock(&pool->mutex);
}

void rlock__pool_destroy(rlock__pool *pool) {
    if (pool->slots == NULL)
        return;
    for (int i = 0; i < pool->size; i++)
        if (pool->slots[i].ctx != NULL)
            redisFree(pool->slots[i].ctx);
    rlock__free(pool->slots);
    pool->slots = NULL;
    pthread_cond_destroy(&pool->available);
    pthread_cond_destroy(&pool->closed);
    pthread_mutex_destroy(&pool->mutex);
}

/*
 * Takes a slot, preferring one that is already connected, waiting while all
 * are busy until deadline_ms. NULL with *status RLOCK_ECLOSED (closing) or
 * RLOCK_EIO (no slot free in time).
 */
static rlock__conn *pool_take(rlock__pool *pool, int64_t deadline_ms, int *status) {
    rlock__conn *conn = NULL;
    *status = RLOCK_ECLOSED;
    pthread_mutex_lock(&pool->mutex);
    while (!pool->closing) {
        rlock__conn *idle_unconnected = NULL;
        for (int i = 0; i < pool->size && conn == NULL; i++) {
            rlock__conn *slot = &pool->slots[i];
            if (slot->busy)
                continue;
            if (slot->ctx != NULL)
                conn = slot;
            else if (idle_unconnected == NULL)
                idle_unconnected = slot;
        }
        if (conn == NULL)
            conn = idle_unconnected;
        if (conn != NULL) {
            conn->busy = 1;
            *status = RLOCK_OK;
            break;
        }
        if (rlock__cond_wait_until(&pool->available, &pool->mutex, deadline_ms) == ETIMEDOUT &&
            rlock__now_ms() >= deadline_ms) {
            *status = RLOCK_EIO;
            break;
        }
    }
    pthread_mutex_unlock(&pool->mutex);
    return conn;
}

/* Returns a slot; a context that saw an error is freed first. */
static void pool_give(rlock__pool *pool, rlock__conn *conn, int healthy) {
    redisContext *broken = NULL;
    pthread_mutex_lock(&pool->mutex);
    if (!healthy || (conn->ctx != NULL && conn->ctx->err != 0)) {
        broken = conn->ctx;
        conn->ctx = NULL;
    }
    conn->busy = 0;
    conn->last_used_ms = rlock__now_ms();
    pthread_cond_signal(&pool->available);
    pthread_mutex_unlock(&pool->mutex);
    if (broken != NULL)
        redisFree(broken);
}

/*
 * A connection idle for less than this cannot have been closed for being
 * idle (Redis's `timeout` counts whole seconds; NATs and proxies minutes), so
 * it is used without the check below: one system call less per command.
 */
#define IDLE_CHECK_MS 500

/*
 * Whether an idle pooled connection can still be used: nothing to read on
 * it (a closed peer reads as 0, an error as an error; any data would be a
 * reply nobody asked for). A server `timeout` or a NAT closes idle sockets.
 */
static int still_open(const redisContext *ctx) {
    char byte;
    ssize_t n = recv(ctx->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Whether the connected slot we hold can be used as it is. */
static int usable(const rlock__conn *conn) {
    return rlock__now_ms() - conn->last_used_ms < IDLE_CHECK_MS || still_open(conn->ctx);
}

/* Drops the slot's context (the slot is ours). */
static void drop_context(rlock_client *c, rlock__conn *conn) {
    redisContext *ctx;
    pthread_mutex_lock(&c->pool.mutex);
    ctx = conn->ctx;
    conn->ctx = NULL;
    pthread_mutex_unlock(&c->pool.mutex);
    if (ctx != NULL)
        redisFree(ctx);
}

/*
 * Connects the slot we hold if needed (by deadline_ms). The new context is
 * published under pool.mutex (close reads busy slots' contexts to abort
 * them); if close began while we connected, RLOCK_ECLOSED: the caller sends
 * nothing and gives the slot back unhealthy (the context is freed). An idle
 * connection the server closed is replaced.
 */
static int ensure_connected(rlock_client *c, rlock__conn *conn, int64_t deadline_ms) {
    redisContext *ctx = NULL;
    if (conn->ctx != NULL && usable(conn))
        return RLOCK_OK;
    drop_context(c, conn);
    int status = rlock__connect(&c->settings, deadline_ms, &ctx);
    if (status != RLOCK_OK)
        return status;
    pthread_mutex_lock(&c->pool.mutex);
    conn->ctx = ctx;
    status = c->pool.closing ? RLOCK_ECLOSED : RLOCK_OK;
    pthread_mutex_unlock(&c->pool.mutex);
    return status;
}

/* ---- running commands ---------------------------------------------------- */

/* Errors after which Redis did not run the command and asks us to come back. */
static int is_transient_error(const redisReply *reply) {
    static const char *const prefixes[] = {"LOADING", "BUSY ", "TRYAGAIN", "MASTERDOWN",
                                           "CLUSTERDOWN"};
    if (reply->type != REDIS_REPLY_ERROR)
        return 0;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(reply->str, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* What a round trip did: the command surely never reached Redis, or may have. */
enum { REACHED_NONE, REACHED_MAYBE };

/*
 * Sends cmd and reads its reply on ctx by deadline_ms. An EVALSHA answered
 * NOSCRIPT is sent again as EVAL (which also caches the script): one extra
 * round trip after a restart or SCRIPT FLUSH. *reached says whether a
 * failure may have let the command run (a failed write sends nothing that
 * Redis would run: a partial command is never executed).
 */
static int round_trip(rlock_client *c, redisContext *ctx, const rlock__cmd *cmd, int use_body,
                      int64_t deadline_ms, redisReply **reply, int *reached) {
    *reached = REACHED_NONE;
    for (; use_body < 2; use_body++) {
        int status = rlock__append_cmd(ctx, &c->scripts, cmd, use_body);
        if (status != RLOCK_OK)
            return status;
        if (rlock__io_flush(ctx, deadline_ms) != RLOCK_OK)
            return RLOCK_EIO;
        *reached = REACHED_MAYBE;
        if (rlock__io_read(ctx, deadline_ms, reply) != RLOCK_OK)
            return RLOCK_EIO;
        if (cmd->script < 0 || use_body || !rlock__is_noscript(*reply))
            return RLOCK_OK;
        freeReplyObject(*reply);
        *reply = NULL;
    }
    return RLOCK_EIO; /* not reached */
}

/* Pause before re-send n (0-based): 50 ms doubling, capped at retry_interval_ms, jittered. */
static int64_t retry_pause_ms(const rlock__settings *s, int n) {
    int64_t pause = 50;
    for (int i = 0; i < n && pause < s->retry_interval_ms; i++)
        pause *= 2;
    if (pause > s->retry_interval_ms)
        pause = s->retry_interval_ms;
    unsigned seed = (unsigned)rlock__now_ms() ^ (unsigned)(uintptr_t)&pause;
    return pause / 2 + (pause > 1 ? rand_r(&seed) % (pause / 2 + 1) : 0);
}

/* Sleeps until until_ms unless the client starts closing. */
static void retry_sleep(rlock_client *c, int64_t until_ms) {
    pthread_mutex_lock(&c->pool.mutex);
    while (!c->pool.closing && rlock__now_ms() < until_ms)
        rlock__cond_wait_until(&c->pool.closed, &c->pool.mutex, until_ms);
    pthread_mutex_unlock(&c->pool.mutex);
}

static int64_t min_deadline(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* deadline_ms + ms, saturating (RLOCK__NO_DEADLINE stays). */
static int64_t extend(int64_t deadline_ms, int ms) {
    return deadline_ms >= RLOCK__NO_DEADLINE - ms ? RLOCK__NO_DEADLINE : deadline_ms + ms;
}

/* A short name of the command for messages: the script's, or the verb. */
static const char *cmd_name(const rlock__cmd *cmd) {
    return cmd->script >= 0 ? rlock__script_name(cmd->script) : cmd->argv[0];
}

/* Records an error reply to cmd: Redis's text, the command and where. */
static int fail_cmd_reply(rlock_client *c, const redisReply *reply, const rlock__cmd *cmd) {
    char at[WHERE_MAX], what[WHERE_MAX + 64];
    snprintf(what, sizeof(what), "%s at %s", cmd_name(cmd),
             where(&c->settings.endpoint, at, sizeof(at)));
    return rlock__fail_reply(reply, what);
}

/* Records an I/O failure of a command at the client's endpoint. */
static int fail_cmd_io(rlock_client *c, const redisContext *ctx, const rlock__cmd *cmd) {
    char what[64];
    snprintf(what, sizeof(what), "%s at", cmd_name(cmd));
    int status = fail_io(&c->settings.endpoint, ctx, ctx != NULL && ctx->err != 0 ? 0 : errno,
                         what);
    rlock__link_down(c, status, rlock__last_message());
    return status;
}

/*
 * One attempt: a pooled connection (queueing by the attempt's deadline), a
 * connection if needed, the round trip. *reached as for round_trip.
 */
static int attempt_once(rlock_client *c, const rlock__cmd *cmd, int64_t hard_ms,
                        redisReply **reply, int *reached) {
    const rlock__settings *s = &c->settings;
    int64_t start = rlock__now_ms();
    int64_t by = min_deadline(start + s->command_timeout_ms, hard_ms);
    int status;
    *reached = REACHED_NONE;
    rlock__conn *conn = pool_take(&c->pool, by, &status);
    if (conn == NULL)
        return status == RLOCK_ECLOSED ? RLOCK_ECLOSED
                                       : rlock__fail(RLOCK_EIO, ETIMEDOUT,
                                                     "%s: no pooled connection free within %lld ms "
                                                     "(pool_size %d)", cmd_name(cmd),
                                                     (long long)(by - start), s->pool_size);
    status = ensure_connected(c, conn, min_deadline(start + s->connect_timeout_ms, hard_ms));
    if (status == RLOCK_EIO)
        rlock__link_down(c, status, rlock__last_message());
    if (status != RLOCK_OK) {
        pool_give(&c->pool, conn, 0);
        return status;
    }
    /* No time left for a reply: sending would only let Redis run what we then call failed. */
    if (rlock__now_ms() >= by) {
        pool_give(&c->pool, conn, 1);
        return rlock__fail(RLOCK_EIO, ETIMEDOUT, "%s not sent: the call's time bound had passed",
                           cmd_name(cmd));
    }
    status = round_trip(c, conn->ctx, cmd, 0, by, reply, reached);
    if (status == RLOCK_EIO)
        status = fail_cmd_io(c, conn->ctx, cmd);
    else if (status == RLOCK_OK)
        rlock__link_up(c);
    pool_give(&c->pool, conn, status == RLOCK_OK);
    return status;
}

int rlock__exec(rlock_client *c, const rlock__cmd *cmd, int64_t deadline_ms, redisReply **reply,
                int *resent) {
    int64_t hard_ms = extend(deadline_ms, c->settings.command_timeout_ms);
    int status = RLOCK_EIO, maybe_sent = 0, reached, unsent_retries = 0;
    *reply = NULL;
    if (resent != NULL)
        *resent = 0;
    for (int attempt = 0;;) {
        if (resent != NULL && maybe_sent)
            *resent = 1;
        status = attempt_once(c, cmd, hard_ms, reply, &reached);
        if (rlock__closing(c)) {
            if (*reply != NULL)
                freeReplyObject(*reply);
            *reply = NULL;
            return rlock__fail(RLOCK_ECLOSED, 0, "client closed during %s", cmd_name(cmd));
        }
        if (status == RLOCK_OK && !is_transient_error(*reply))
            return (*reply)->type == REDIS_REPLY_ERROR ? fail_cmd_reply(c, *reply, cmd) : RLOCK_OK;
        if (status != RLOCK_OK && status != RLOCK_EIO)
            return status;
        /* A write that failed sent nothing Redis would run: at once, on a fresh connection. */
        if (status == RLOCK_EIO && reached == REACHED_NONE && unsent_retries++ == 0 &&
            rlock__now_ms() < hard_ms)
            continue;
        maybe_sent |= status == RLOCK_EIO && reached == REACHED_MAYBE;
        if (attempt++ >= c->settings.retry_attempts)
            break;
        int64_t resume = rlock__now_ms() + retry_pause_ms(&c->settings, attempt - 1);
        if (resume >= deadline_ms)
            break;
        if (*reply != NULL)
            freeReplyObject(*reply);
        *reply = NULL;
        retry_sleep(c, resume);
    }
    if (*reply != NULL) /* still "try again" after the last attempt */
        return fail_cmd_reply(c, *reply, cmd);
    return status;
}

/* Sends the pipeline on ctx and reads its n replies by deadline_ms; NOSCRIPT re-run as EVAL. */
static int pipeline_round_trip(rlock_client *c, redisContext *ctx, const rlock__cmd *cmds, int n,
                               int64_t deadline_ms, redisReply **replies) {
    int reached, status = RLOCK_OK;
    for (int j = 0; j < n && status == RLOCK_OK; j++)
        status = rlock__append_cmd(ctx, &c->scripts, &cmds[j], 0);
    if (status == RLOCK_OK && rlock__io_flush(ctx, deadline_ms) != RLOCK_OK)
        status = RLOCK_EIO;
    for (int i = 0; i < n && status == RLOCK_OK; i++)
        if (rlock__io_read(ctx, deadline_ms, &replies[i]) != RLOCK_OK)
            status = RLOCK_EIO;
    /* Scripts flushed meanwhile: re-run the ones answered NOSCRIPT as EVAL. */
    for (int j = 0; j < n && status == RLOCK_OK; j++) {
        if (!rlock__is_noscript(replies[j]))
            continue;
        freeReplyObject(replies[j]);
        replies[j] = NULL;
        status = round_trip(c, ctx, &cmds[j], 1, deadline_ms, &replies[j], &reached);
    }
    return status;
}

int rlock__exec_pipeline(rlock_client *c, const rlock__cmd *cmds, int n, int64_t deadline_ms,
                         redisReply **replies) {
    int status;
    for (int j = 0; j < n; j++)
        replies[j] = NULL;
    rlock__conn *conn = pool_take(&c->pool, deadline_ms, &status);
    if (conn == NULL)
        return status == RLOCK_ECLOSED
                   ? RLOCK_ECLOSED
                   : rlock__fail(RLOCK_EIO, ETIMEDOUT, "renewal: no pooled connection free");
    status = ensure_connected(c, conn, deadline_ms);
    if (status == RLOCK_OK) {
        status = pipeline_round_trip(c, conn->ctx, cmds, n, deadline_ms, replies);
        if (status == RLOCK_EIO)
            status = fail_cmd_io(c, conn->ctx, &cmds[0]);
        else if (status == RLOCK_OK)
            rlock__link_up(c);
    } else if (status == RLOCK_EIO) {
        rlock__link_down(c, status, rlock__last_message());
    }
    pool_give(&c->pool, conn, status == RLOCK_OK);
    if (status != RLOCK_OK) {
        for (int j = 0; j < n; j++) {
            if (replies[j] != NULL)
                freeReplyObject(replies[j]);
            replies[j] = NULL;
        }
    }
    return rlock__closing(c) && status != RLOCK_OK ? RLOCK_ECLOSED : status;
}

rlock__conn *rlock__send_ahead(rlock_client *c, const rlock__cmd *cmd) {
    rlock__pool *pool = &c->pool;
    rlock__conn *conn = NULL;
    pthread_mutex_lock(&pool->mutex);
    for (int i = 0; i < pool->size && !pool->closing && conn == NULL; i++)
        if (!pool->slots[i].busy && pool->slots[i].ctx != NULL)
            conn = &pool->slots[i];
    if (conn != NULL)
        conn->busy = 1;
    pthread_mutex_unlock(&pool->mutex);
    if (conn == NULL)
        return NULL;
    /* An idle slot has nothing buffered: this small write does not wait. */
    if (!usable(conn) || rlock__append_cmd(conn->ctx, &c->scripts, cmd, 0) != RLOCK_OK ||
        rlock__io_flush(conn->ctx, rlock__now_ms()) != RLOCK_OK) {
        pool_give(pool, conn, 0);
        return NULL;
    }
    return conn;
}

int rlock__read_ahead(rlock_client *c, rlock__conn *conn, int64_t deadline_ms, redisReply **reply) {
    int status = rlock__io_read(conn->ctx, deadline_ms, reply);
    pool_give(&c->pool, conn, status == RLOCK_OK);
    return status;
}
