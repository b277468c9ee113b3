/*
 * conn.c - reaching Redis: url parsing, connecting (AUTH, SELECT, timeouts),
 * the command connection pool, and running commands with safe retries.
 *
 * This is the one place the lock code goes through to reach Redis
 * (rlock__exec / rlock__exec_pipeline: "run this for this key"). Sentinel
 * discovery and Cluster slot routing belong here, behind the same calls.
 *
 * Threads: every application thread calling rlock_* and the watchdog thread
 * take connections from the pool; rlock_client_close aborts them.
 * Locking: pool.mutex guards the slots' busy flags, pool.closing, and every
 * write of a slot's ctx pointer. A slot's ctx is used only by the thread that
 * holds the slot (busy), outside the mutex, except that close may shutdown()
 * its socket under pool.mutex to abort a command in flight. A context that saw any error is freed, never returned to the pool
 * (hiredis contexts are unusable after an error).
 */
#include <errno.h>
#include <limits.h>
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

/* ---- connecting ---------------------------------------------------------- */

static struct timeval ms_to_timeval(int ms) {
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

/* Runs one setup command; RLOCK_EREDIS if Redis refuses it. */
static int setup_command(redisContext *ctx, int argc, const char **argv) {
    redisReply *reply = redisCommandArgv(ctx, argc, argv, NULL);
    int status = RLOCK_OK;
    if (reply == NULL)
        return RLOCK_EIO;
    if (reply->type == REDIS_REPLY_ERROR)
        status = RLOCK_EREDIS;
    freeReplyObject(reply);
    return status;
}

static int authenticate(const rlock__endpoint *ep, redisContext *ctx) {
    char db[24];
    int status = RLOCK_OK;
    if (ep->password != NULL) {
        const char *auth_user[] = {"AUTH", ep->user, ep->password};
        const char *auth[] = {"AUTH", ep->password};
        status = ep->user != NULL ? setup_command(ctx, 3, auth_user) : setup_command(ctx, 2, auth);
    }
    if (status == RLOCK_OK && ep->db != 0) {
        rlock__fmt_u64(db, (uint64_t)ep->db);
        const char *select[] = {"SELECT", db};
        status = setup_command(ctx, 2, select);
    }
    return status;
}

int rlock__connect(const rlock__settings *s, int timeout_ms, redisContext **out) {
    const rlock__endpoint *ep = &s->endpoint;
    struct timeval tv = ms_to_timeval(timeout_ms);
    redisContext *ctx = ep->unix_path != NULL ? redisConnectUnixWithTimeout(ep->unix_path, tv)
                                              : redisConnectWithTimeout(ep->host, ep->port, tv);
    int status = RLOCK_EIO;

    *out = NULL;
    if (ctx == NULL || ctx->err != 0)
        goto fail;
    if (redisSetTimeout(ctx, ms_to_timeval(s->command_timeout_ms)) != REDIS_OK)
        goto fail;
    if (ep->unix_path == NULL)
        redisEnableKeepAlive(ctx);
    status = authenticate(ep, ctx);
    if (status != RLOCK_OK)
        goto fail;
    *out = ctx;
    return RLOCK_OK;
fail:
    if (ctx != NULL)
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
 * Takes a slot, preferring one that is already connected. Waits while all
 * slots are busy (each is held for one bounded round trip). Returns the slot
 * or NULL if the client is closing.
 */
static rlock__conn *pool_take(rlock__pool *pool) {
    rlock__conn *conn = NULL;
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
            break;
        }
        pthread_cond_wait(&pool->available, &pool->mutex);
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
    pthread_cond_signal(&pool->available);
    pthread_mutex_unlock(&pool->mutex);
    if (broken != NULL)
        redisFree(broken);
}

/*
 * Connects the slot we hold if needed. The new context is published under
 * pool.mutex (close reads busy slots' contexts to abort them); if close began
 * while we connected, it is shut down at once so the caller fails fast.
 */
static int ensure_connected(rlock_client *c, rlock__conn *conn) {
    redisContext *ctx = NULL;
    if (conn->ctx != NULL)
        return RLOCK_OK;
    int status = rlock__connect(&c->settings, c->settings.connect_timeout_ms, &ctx);
    if (status != RLOCK_OK)
        return status;
    pthread_mutex_lock(&c->pool.mutex);
    conn->ctx = ctx;
    if (c->pool.closing)
        shutdown(ctx->fd, SHUT_RDWR);
    pthread_mutex_unlock(&c->pool.mutex);
    return RLOCK_OK;
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

/*
 * Sends cmd and reads its reply on ctx. An EVALSHA answered NOSCRIPT is sent
 * again as EVAL (which also caches the script): one extra round trip after a
 * restart or SCRIPT FLUSH.
 */
static int round_trip(rlock_client *c, redisContext *ctx, const rlock__cmd *cmd, int use_body,
                      redisReply **reply) {
    for (; use_body < 2; use_body++) {
        void *raw = NULL;
        int status = rlock__append_cmd(ctx, &c->scripts, cmd, use_body);
        if (status != RLOCK_OK)
            return status;
        if (redisGetReply(ctx, &raw) != REDIS_OK)
            return RLOCK_EIO;
        *reply = raw;
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

int rlock__exec(rlock_client *c, const rlock__cmd *cmd, int64_t deadline_ms, redisReply **reply,
                int *resent) {
    int status = RLOCK_EIO, maybe_sent = 0;
    *reply = NULL;
    if (resent != NULL)
        *resent = 0;
    for (int attempt = 0;; attempt++) {
        rlock__conn *conn = pool_take(&c->pool);
        if (conn == NULL)
            return RLOCK_ECLOSED;
        if (resent != NULL && maybe_sent)
            *resent = 1;
        status = ensure_connected(c, conn);
        int sent = status == RLOCK_OK;
        if (sent)
            status = round_trip(c, conn->ctx, cmd, 0, reply);
        pool_give(&c->pool, conn, status == RLOCK_OK);
        if (rlock__closing(c)) {
            if (*reply != NULL)
                freeReplyObject(*reply);
            *reply = NULL;
            return RLOCK_ECLOSED;
        }
        if (status == RLOCK_OK && !is_transient_error(*reply))
            return (*reply)->type == REDIS_REPLY_ERROR ? RLOCK_EREDIS : RLOCK_OK;
        if (status != RLOCK_OK && status != RLOCK_EIO)
            return status;
        maybe_sent |= sent && status == RLOCK_EIO; /* a "try again" reply never ran */
        if (attempt >= c->settings.retry_attempts)
            break;
        int64_t resume = rlock__now_ms() + retry_pause_ms(&c->settings, attempt);
        if (resume >= deadline_ms)
            break;
        if (*reply != NULL)
            freeReplyObject(*reply);
        *reply = NULL;
        retry_sleep(c, resume);
    }
    if (*reply != NULL) /* still "try again" after the last attempt */
        return RLOCK_EREDIS;
    return status;
}

int rlock__exec_pipeline(rlock_client *c, const rlock__cmd *cmds, int n, redisReply **replies) {
    rlock__conn *conn = pool_take(&c->pool);
    int status, i = 0;
    if (conn == NULL)
        return RLOCK_ECLOSED;
    status = ensure_connected(c, conn);
    for (int j = 0; j < n && status == RLOCK_OK; j++)
        status = rlock__append_cmd(conn->ctx, &c->scripts, &cmds[j], 0);
    for (; i < n && status == RLOCK_OK; i++) {
        void *raw = NULL;
        if (redisGetReply(conn->ctx, &raw) != REDIS_OK)
            status = RLOCK_EIO;
        replies[i] = raw;
    }
    /* Scripts flushed meanwhile: re-run the ones answered NOSCRIPT as EVAL. */
    for (int j = 0; j < i && status == RLOCK_OK; j++) {
        if (!rlock__is_noscript(replies[j]))
            continue;
        freeReplyObject(replies[j]);
        replies[j] = NULL;
        status = round_trip(c, conn->ctx, &cmds[j], 1, &replies[j]);
    }
    pool_give(&c->pool, conn, status == RLOCK_OK);
    if (status != RLOCK_OK) {
        for (int j = 0; j < n; j++) {
            if (j < i && replies[j] != NULL)
                freeReplyObject(replies[j]);
            replies[j] = NULL;
        }
    }
    return rlock__closing(c) && status != RLOCK_OK ? RLOCK_ECLOSED : status;
}

rlock__conn *rlock__send_ahead(rlock_client *c, const rlock__cmd *cmd) {
    rlock__pool *pool = &c->pool;
    rlock__conn *conn = NULL;
    int done = 0;
    pthread_mutex_lock(&pool->mutex);
    for (int i = 0; i < pool->size && !pool->closing && conn == NULL; i++)
        if (!pool->slots[i].busy && pool->slots[i].ctx != NULL)
            conn = &pool->slots[i];
    if (conn != NULL)
        conn->busy = 1;
    pthread_mutex_unlock(&pool->mutex);
    if (conn == NULL)
        return NULL;
    /* An idle slot has nothing buffered: this small write does not block. */
    if (rlock__append_cmd(conn->ctx, &c->scripts, cmd, 0) == RLOCK_OK)
        while (!done)
            if (redisBufferWrite(conn->ctx, &done) != REDIS_OK)
                break;
    if (!done) {
        pool_give(pool, conn, 0);
        return NULL;
    }
    return conn;
}

int rlock__read_ahead(rlock_client *c, rlock__conn *conn, redisReply **reply) {
    void *raw = NULL;
    int status = redisGetReply(conn->ctx, &raw) == REDIS_OK ? RLOCK_OK : RLOCK_EIO;
    pool_give(&c->pool, conn, status == RLOCK_OK);
    *reply = raw;
    return status;
}
