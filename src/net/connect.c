/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * connect.c - one connection to one server: a non-blocking connect bounded
 * by the call, then AUTH (password, or ACL user and password), SELECT and
 * CLIENT SETNAME (the connection's name, "rlock:<host>:<pid>:<id8>", for
 * CLIENT LIST), pipelined in one round trip by the same deadline; and the
 * error detail of a failure, naming host:port (or the socket path) and the
 * errno behind it.
 *
 * Threads: any thread that connects (application threads through the pool,
 * the subscriber thread); no shared state.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "conn.h"

const char *rlock__endpoint_str(const rlock__endpoint *ep, char *buf, size_t size) {
    if (ep->unix_path != NULL)
        snprintf(buf, size, "%s", ep->unix_path);
    else if (strchr(ep->host, ':') != NULL)
        snprintf(buf, size, "[%s]:%d", ep->host, ep->port);
    else
        snprintf(buf, size, "%s:%d", ep->host, ep->port);
    return buf;
}

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

const char rlock__no_reply[] = "no reply in time (the connection is open, the server did not "
                               "answer: stopped, overloaded, or not a Redis server)";
const char rlock__not_resp[] = "not a Redis server? (its answer is not Redis's protocol)";

/*
 * Whether a plaintext connection's failure is what a TLS-only port does to
 * a Redis command: it closes (reset, or an end of stream), or answers with
 * a TLS record (an alert), which is not RESP.
 */
int rlock__maybe_tls_port(const redisContext *ctx, int sys_errno) {
    if (ctx == NULL || rlock__tls_of(ctx) != NULL || ctx->connection_type != REDIS_CONN_TCP)
        return 0;
    if (ctx->err == REDIS_ERR_EOF)
        return 1;
    /* A TLS record's first byte (an alert, a handshake) read as a reply type: hiredis shows it
     * as "\x15" or "\x16". Another non-RESP answer is no TLS port's. */
    if (ctx->err == REDIS_ERR_PROTOCOL)
        return strstr(ctx->errstr, "\\x15") != NULL || strstr(ctx->errstr, "\\x16") != NULL;
    if (ctx->err != 0 && sys_errno == 0)
        sys_errno = errno_of(ctx);
    return sys_errno == ECONNRESET;
}

int rlock__fail_io(const rlock__endpoint *ep, const redisContext *ctx, int sys_errno,
                   const char *what) {
    char at[RLOCK__WHERE_MAX];
    int connecting = strcmp(what, "connect to") == 0 || strcmp(what, "resolve") == 0;
    rlock__endpoint_str(ep, at, sizeof(at));
    /* A connection's first exchange (its name's reply still owed) ended as a TLS port ends
     * one: say so, it is the likely cause; later, a reset is only a reset. */
    if (ctx != NULL && ctx->reader->privdata != NULL && rlock__maybe_tls_port(ctx, sys_errno))
        return rlock__fail_errno(RLOCK_EIO, sys_errno,
                                 "%s %s: %s (is it a TLS port? use rediss://)", what, at,
                                 ctx->err != 0 ? ctx->errstr : strerror(sys_errno));
    if (ctx != NULL && ctx->err == REDIS_ERR_PROTOCOL)
        return rlock__fail(RLOCK_EIO, 0, "%s %s: %s: %s", what, at, ctx->errstr, rlock__not_resp);
    if (ctx != NULL && ctx->err != 0 && sys_errno == 0) {
        sys_errno = errno_of(ctx);
        if (sys_errno == 0)
            return rlock__fail(RLOCK_EIO, 0, "%s %s: %s", what, at, ctx->errstr);
    }
    /* Past the connect, a timeout is the reply's: say so, not "Connection timed out". */
    if (sys_errno == ETIMEDOUT && !connecting)
        return rlock__fail_errno(RLOCK_EIO, ETIMEDOUT, "%s %s: %s", what, at, rlock__no_reply);
    return rlock__fail(RLOCK_EIO, sys_errno, "%s %s", what, at);
}

/* The setup commands a connection sends before any other: AUTH, SELECT, CLIENT SETNAME. */
#define SETUP_MAX 3

#define CRED_USER_MAX 256
#define CRED_PASSWORD_MAX 4096 /* a cloud's token (an IAM auth token is ~1 KB) fits */

typedef struct setup {
    int n;
    int argc[SETUP_MAX];
    const char *argv[SETUP_MAX][3];
    int naming;                /* the last one is CLIENT SETNAME */
    char db[24];
    char user[CRED_USER_MAX];  /* the credentials callback's answer */
    char password[CRED_PASSWORD_MAX];
    int tls;                   /* a TLS connection: the set-up is a round trip always */
} setup;

static void add(setup *st, int argc, const char *a0, const char *a1, const char *a2) {
    st->argc[st->n] = argc;
    st->argv[st->n][0] = a0;
    st->argv[st->n][1] = a1;
    st->argv[st->n][2] = a2;
    st->n++;
}

/*
 * The application's credentials callback, asked for this connection (a
 * token may have been renewed since the last): into st->user, st->password.
 * RLOCK_EAUTH if it fails or leaves them unterminated.
 */
static int ask_credentials(const rlock__settings *s, setup *st) {
    int r = s->credentials(s->credentials_arg, st->user, sizeof(st->user), st->password,
                           sizeof(st->password));
    if (r != 0 || memchr(st->user, '\0', sizeof(st->user)) == NULL ||
        memchr(st->password, '\0', sizeof(st->password)) == NULL) {
        memset(st->password, 0, sizeof(st->password));
        return rlock__fail(RLOCK_EAUTH, 0, "the credentials callback failed (returned %d)", r);
    }
    return RLOCK_OK;
}

/* Whether the connection's AUTH comes from the credentials callback (not a sentinel's). */
static int asks_credentials(const rlock__endpoint *ep, const rlock__events *ev) {
    return ev != NULL && ev->settings != NULL && ev->settings->credentials != NULL &&
           !ep->sentinel;
}

static void plan_setup(const rlock__endpoint *ep, const rlock__events *ev, int tls, setup *st) {
    int asked = st->password[0] != '\0';
    st->n = 0;
    st->naming = 0;
    st->tls = tls;
    if (asked && st->user[0] != '\0')
        add(st, 3, "AUTH", st->user, st->password);
    else if (asked)
        add(st, 2, "AUTH", st->password, NULL);
    else if (ep->password != NULL && ep->user != NULL)
        add(st, 3, "AUTH", ep->user, ep->password);
    else if (ep->password != NULL)
        add(st, 2, "AUTH", ep->password, NULL);
    if (ep->db != 0) {
        rlock__fmt_u64(st->db, (uint64_t)ep->db);
        add(st, 2, "SELECT", st->db, NULL);
    }
    if (ev != NULL && ev->settings != NULL && ev->settings->conn_name[0] != '\0') {
        add(st, 3, "CLIENT", "SETNAME", ev->settings->conn_name);
        st->naming = 1;
    }
    /* TLS 1.3 tells a refused client certificate after the handshake, with the first reply:
     * a round trip of the set-up's own makes it the connect's failure, not a command's. */
    if (tls && st->n == 0)
        add(st, 1, "PING", NULL, NULL);
}

/*
 * A refused CLIENT SETNAME (an ACL without it, a proxy or an old server that
 * lacks it): the connection stays unnamed and works; counted, and logged the
 * first time for this client. NOAUTH is no refusal of the name: the
 * connection's commands get it too, and say so.
 */
static void name_refused(rlock__events *ev, const redisReply *reply) {
    int status = rlock__reply_status(reply->str);
    if (status == RLOCK_EAUTH)
        return;
    rlock__count(&ev->stats, RLOCK__COUNT_NAME_REFUSALS, 1);
    if (atomic_exchange(&ev->stats.name_refusal_told, 1) == 0)
        rlock__log(ev, RLOCK_LOG_WARN, "NAME_REFUSED",
                   " status=%s: CLIENT SETNAME %s: %s (connections stay unnamed; logged once)",
                   rlock_status_name(status), ev->settings->conn_name, reply->str);
}

/*
 * A connection with no AUTH or SELECT to send sends its name with its first
 * command instead of in a round trip of its own (a connect to a server that
 * accepts but does not answer then takes no longer than before), so its
 * first reply is the name's: the context's reader owes it, marked in the
 * reader's user field (privdata, unused by hiredis's reply functions) with
 * the events that hear of a refusal, until every reading path takes it off
 * here.
 */
int rlock__setup_reply(redisContext *ctx, const redisReply *reply) {
    rlock__events *ev = ctx->reader->privdata;
    if (ev == NULL)
        return 0;
    ctx->reader->privdata = NULL;
    if (reply->type == REDIS_REPLY_ERROR)
        name_refused(ev, reply);
    return 1;
}

/* The error reply of setup command i, recorded; its status. */
static int setup_refused(const rlock__endpoint *ep, const setup *st, int i,
                         const redisReply *reply) {
    char at[RLOCK__WHERE_MAX], what[RLOCK__WHERE_MAX + 64];
    const char *const *argv = st->argv[i];
    rlock__endpoint_str(ep, at, sizeof(at));
    if (strcmp(argv[0], "AUTH") == 0 && st->argc[i] == 3)
        snprintf(what, sizeof(what), "AUTH as user %s at %s", argv[1], at);
    else if (st->naming && i == st->n - 1)
        snprintf(what, sizeof(what), "CLIENT SETNAME at %s", at);
    else
        snprintf(what, sizeof(what), "%s at %s", argv[0], at);
    /* AUTH refused is the credentials, whatever the words (WRONGPASS, or an ERR for a password
     * sent to a server that has none): decided by the command, not by the text. */
    if (strcmp(argv[0], "AUTH") == 0)
        return rlock__fail_reply_as(reply, what, RLOCK_EAUTH);
    return rlock__fail_reply(reply, what);
}

/*
 * A set-up that failed on its socket: as rlock__fail_io, but a client
 * certificate a TLS server refused after the handshake (TLS 1.3 says so
 * with the first reply) is RLOCK_EAUTH, and a plaintext connection that a
 * server closed or answered with something not RESP may be to a TLS port.
 */
static int setup_io_failed(const rlock__endpoint *ep, redisContext *ctx, int sys_errno,
                           const char *what) {
    char at[RLOCK__WHERE_MAX];
    rlock__tls_conn *session = rlock__tls_of(ctx);
    int tls = session != NULL;
    rlock__endpoint_str(ep, at, sizeof(at));
    /* A send can fail first (the server reset the connection): its alert, if it came, says
     * why. */
    if (tls && strstr(ctx->errstr, "client certificate") == NULL)
        rlock__tls_fill(ctx, session, 0);
    if (tls && ctx->err == REDIS_ERR_IO && strstr(ctx->errstr, "client certificate") != NULL)
        return rlock__fail(RLOCK_EAUTH, 0, "%s %s: %s", what, at, ctx->errstr);
    if (!tls && ep->unix_path == NULL && rlock__maybe_tls_port(ctx, sys_errno))
        return rlock__fail_errno(RLOCK_EIO, sys_errno,
                                 "%s %s: %s (is it a TLS port? use rediss://)", what, at,
                                 ctx->err != 0 ? ctx->errstr : strerror(sys_errno));
    return rlock__fail_io(ep, ctx, sys_errno, what);
}

static int send_setup(const rlock__endpoint *ep, rlock__events *ev, redisContext *ctx,
                      setup *st, int64_t deadline_ms);

/*
 * Sends the setup commands in one pipeline by deadline_ms and reads their
 * replies in order: the first refusal of AUTH or SELECT fails the connect
 * (the replies after it are not read: the context is freed); a refused name
 * does not, unless for want of authentication (NOAUTH: nothing else would
 * work either). The name alone waits for the first command
 * (rlock__setup_reply).
 */
static int authenticate(const rlock__endpoint *ep, rlock__events *ev, redisContext *ctx,
                        int64_t deadline_ms) {
    setup *st = rlock__calloc(1, sizeof(*st)); /* ~4 KB: not on a waiter's stack */
    int tls = rlock__tls_of(ctx) != NULL, status = RLOCK_OK;
    if (st == NULL)
        return rlock__fail(RLOCK_ENOMEM, 0, "connect: out of memory");
    if (asks_credentials(ep, ev))
        status = ask_credentials(ev->settings, st);
    if (status == RLOCK_OK) {
        plan_setup(ep, ev, tls, st);
        status = send_setup(ep, ev, ctx, st, deadline_ms);
    }
    memset(st->password, 0, sizeof(st->password));
    rlock__free(st);
    return status;
}

/* authenticate's round trip: st's commands sent, their replies read. */
static int send_setup(const rlock__endpoint *ep, rlock__events *ev, redisContext *ctx,
                      setup *st, int64_t deadline_ms) {
    if (st->n == 0)
        return RLOCK_OK;
    for (int i = 0; i < st->n; i++)
        if (redisAppendCommandArgv(ctx, st->argc[i], st->argv[i], NULL) != REDIS_OK)
            return rlock__fail(RLOCK_ENOMEM, 0, "%s: out of memory", st->argv[i][0]);
    if (st->n == 1 && st->naming && !st->tls) {
        ctx->reader->privdata = ev; /* its reply is owed: the first read takes it */
        return RLOCK_OK;
    }
    if (rlock__io_flush(ctx, deadline_ms) != RLOCK_OK)
        return setup_io_failed(ep, ctx, ctx->err != 0 ? 0 : errno, "connection setup at");
    int status = RLOCK_OK;
    for (int i = 0; i < st->n && status == RLOCK_OK; i++) {
        redisReply *reply = NULL;
        char what[64];
        if (rlock__io_read(ctx, deadline_ms, &reply) != RLOCK_OK) {
            int err = errno;
            snprintf(what, sizeof(what), "%s at", st->argv[i][0]);
            return setup_io_failed(ep, ctx, ctx->err != 0 ? 0 : err, what);
        }
        int naming = st->naming && i == st->n - 1;
        if (reply->type != REDIS_REPLY_ERROR)
            ; /* done */
        else if (naming && rlock__reply_status(reply->str) != RLOCK_EAUTH)
            name_refused(ev, reply);
        else
            status = setup_refused(ep, st, i, reply);
        freeReplyObject(reply);
    }
    return status;
}

/* Completes a non-blocking connect by deadline_ms (SO_ERROR tells the outcome). */
static int finish_connect(const rlock__endpoint *ep, redisContext *ctx, int64_t deadline_ms) {
    int err = 0;
    socklen_t len = sizeof(err);
    if (rlock__io_wait(ctx->fd, POLLOUT, deadline_ms) != RLOCK_OK)
        return rlock__fail_io(ep, NULL, errno, "connect to");
    if (getsockopt(ctx->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    return err != 0 ? rlock__fail_io(ep, NULL, err, "connect to") : RLOCK_OK;
}

/* A new connection works: counted, and logged at DEBUG. */
static void connected(const rlock__endpoint *ep, rlock__events *ev) {
    char at[RLOCK__WHERE_MAX];
    rlock__count(&ev->stats, RLOCK__COUNT_CONNECTIONS, 1);
    if (rlock__log_wanted(ev->settings, RLOCK_LOG_DEBUG))
        rlock__log(ev, RLOCK_LOG_DEBUG, "CONNECTED", " at=%s",
                   rlock__endpoint_str(ep, at, sizeof(at)));
}

/* A hiredis context that failed before any socket: a name that did not resolve? */
static int failed_resolving(const rlock__endpoint *ep, const redisContext *ctx) {
    return ep->unix_path == NULL && ctx->err == REDIS_ERR_OTHER;
}

int rlock__connect_socket(const rlock__endpoint *ep, int connect_timeout_ms, int64_t deadline_ms,
                          redisContext **out, int64_t *setup_by_ms) {
    int64_t connect_by = rlock__deadline_after(connect_timeout_ms);
    int status = RLOCK_EIO;

    *out = NULL;
    if (connect_by > deadline_ms)
        connect_by = deadline_ms;
    *setup_by_ms = connect_by;
    redisContext *ctx = ep->unix_path != NULL ? redisConnectUnixNonBlock(ep->unix_path)
                                              : redisConnectNonBlock(ep->host, ep->port);
    if (ctx == NULL)
        return rlock__fail(RLOCK_ENOMEM, 0, "connect: out of memory");
    if (ctx->err != 0) {
        status = rlock__fail_io(ep, ctx, 0, failed_resolving(ep, ctx) ? "resolve" : "connect to");
        if (failed_resolving(ep, ctx))
            rlock__fail_host_not_found();
        goto fail;
    }
    if ((status = finish_connect(ep, ctx, connect_by)) != RLOCK_OK)
        goto fail;
    rlock__io_block_reads(ctx->fd); /* best effort: refused, a read costs a system call more */
    if (ep->unix_path == NULL)
        redisEnableKeepAlive(ctx);
    *out = ctx;
    return RLOCK_OK;
fail:
    rlock__conn_free(ctx);
    return status;
}

int rlock__connect_setup(const rlock__endpoint *ep, rlock__events *ev, redisContext *ctx,
                         int64_t by_ms) {
    int status = RLOCK_OK;
    /* The handshake here, not with the socket: a pool slot's socket is published first, so
     * that close can abort a handshake too (shutdown). Never plaintext when TLS is asked. */
    if (ev != NULL && ev->settings != NULL && ev->settings->tls.on)
        status = rlock__tls_start(ep, &ev->settings->tls, ctx, by_ms);
    if (status == RLOCK_OK)
        status = authenticate(ep, ev, ctx, by_ms);
    if (status == RLOCK_OK && ev != NULL)
        connected(ep, ev);
    return status;
}

int rlock__connect(const rlock__endpoint *ep, rlock__events *ev, int connect_timeout_ms,
                   int64_t deadline_ms, redisContext **out) {
    int64_t setup_by;
    int status = rlock__connect_socket(ep, connect_timeout_ms, deadline_ms, out, &setup_by);
    if (status == RLOCK_OK && (status = rlock__connect_setup(ep, ev, *out, setup_by)) != RLOCK_OK) {
        rlock__conn_free(*out);
        *out = NULL;
    }
    return status;
}

int rlock__run_private(redisContext *ctx, const rlock__endpoint *ep, int argc,
                        const char **argv, int64_t deadline_ms, redisReply **reply) {
    *reply = NULL;
    if (redisAppendCommandArgv(ctx, argc, argv, NULL) != REDIS_OK)
        return rlock__fail(RLOCK_ENOMEM, 0, "%s: out of memory", argv[0]);
    if (rlock__io_flush(ctx, deadline_ms) != RLOCK_OK ||
        rlock__io_read(ctx, deadline_ms, reply) != RLOCK_OK)
        return rlock__fail_io(ep, ctx, ctx->err != 0 ? 0 : errno, argv[0]);
    if ((*reply)->type == REDIS_REPLY_ERROR) {
        int status = rlock__fail_reply(*reply, argv[0]);
        freeReplyObject(*reply);
        *reply = NULL;
        return status;
    }
    return RLOCK_OK;
}
