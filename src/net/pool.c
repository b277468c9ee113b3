/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool.c - one node's pool of command connections.
 *
 * A slot is taken by one thread for one command (or pipeline) and given
 * back; a connected slot is preferred, and a thread waits for a free one no
 * longer than its deadline. A context that saw any error or timed out is
 * freed, never returned to the pool (a hiredis context is unusable after an
 * error). A connection idle long enough to have been closed by the server
 * (`timeout`, a NAT) is checked before use and replaced if it was.
 *
 * Threads: application threads and the watchdog take slots; the subscriber
 * thread takes idle ones to send ahead; close aborts them. Locking: the
 * pool's mutex guards the slots' busy flags, closing, and every write of a
 * slot's ctx pointer. A slot's ctx is used only by the thread that holds the
 * slot, outside the mutex, except that close may shutdown() its socket under
 * the mutex to abort a command in flight.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "route.h"

int rlock__pool_init(rlock__pool *pool, rlock__node *node, int size) {
    memset(pool, 0, sizeof(*pool));
    pool->slots = rlock__calloc((size_t)size, sizeof(*pool->slots));
    if (pool->slots == NULL)
        return RLOCK_ENOMEM;
    pool->size = size;
    for (int i = 0; i < size; i++)
        pool->slots[i].node = node;
    if (pthread_mutex_init(&pool->mutex, NULL) != 0)
        goto fail_mutex;
    if (rlock__cond_init(&pool->available) != 0)
        goto fail_cond;
    return RLOCK_OK;
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
    pthread_mutex_unlock(&pool->mutex);
}

void rlock__pool_destroy(rlock__pool *pool) {
    if (pool->slots == NULL)
        return;
    for (int i = 0; i < pool->size; i++)
        if (pool->slots[i].ctx != NULL)
            rlock__conn_free(pool->slots[i].ctx);
    rlock__free(pool->slots);
    pool->slots = NULL;
    pthread_cond_destroy(&pool->available);
    pthread_mutex_destroy(&pool->mutex);
}

/* Marks the slot taken (pool mutex held); counted in the client's pool_in_use gauge. */
static void take(rlock__conn *conn) {
    conn->busy = 1;
    rlock__gauge_add(&conn->node->events->stats.pool_in_use, 1);
}

/*
 * A free slot, a connected one first; NULL if all are busy (pool mutex
 * held). With threads queued, a newcomer (!queued) gets one only if more
 * slots are free than threads queued (rlock__pool_take says why).
 */
static rlock__conn *free_slot(rlock__pool *pool, int queued) {
    rlock__conn *connected = NULL, *unconnected = NULL;
    int nfree = 0, count = !queued && pool->waiting > 0;
    for (int i = 0; i < pool->size && (connected == NULL || count); i++) {
        rlock__conn *slot = &pool->slots[i];
        if (slot->busy)
            continue;
        nfree++;
        if (slot->ctx != NULL && connected == NULL)
            connected = slot;
        else if (slot->ctx == NULL && unconnected == NULL)
            unconnected = slot;
    }
    if (count && nfree <= pool->waiting)
        return NULL;
    return connected != NULL ? connected : unconnected;
}

/*
 * A thread that finds no free slot queues (pool->waiting) and takes the next
 * one given back. A newcomer takes a free slot only if there are more free
 * slots than threads queued: otherwise a thread that gives a slot back and
 * takes one again at once (a loop of commands) would always beat the queued
 * thread, which wakes later -- the watchdog starved of a connection until
 * its holds' leases ran out.
 */
rlock__conn *rlock__pool_take(rlock__pool *pool, int64_t deadline_ms, int *status) {
    rlock__conn *conn = NULL;
    int queued = 0;
    *status = RLOCK_ECLOSED;
    pthread_mutex_lock(&pool->mutex);
    while (!pool->closing) {
        if (atomic_load(&pool->fenced)) {
            *status = RLOCK_EIO;
            break;
        }
        conn = free_slot(pool, queued);
        if (conn != NULL) {
            take(conn);
            *status = RLOCK_OK;
            break;
        }
        if (!queued) {
            queued = 1;
            pool->waiting++;
        }
        if (rlock__cond_wait_until(&pool->available, &pool->mutex, deadline_ms) == ETIMEDOUT &&
            rlock__now_ms() >= deadline_ms) {
            *status = RLOCK_EIO;
            break;
        }
    }
    if (queued) {
        pool->waiting--;
        /* A slot given back as we gave up (or took ours) goes to the next one queued. */
        if (pool->waiting > 0 && free_slot(pool, 1) != NULL)
            pthread_cond_signal(&pool->available);
    }
    pthread_mutex_unlock(&pool->mutex);
    return conn;
}

void rlock__pool_give(rlock__conn *conn, int healthy) {
    rlock__pool *pool = &conn->node->pool;
    redisContext *broken = NULL;
    pthread_mutex_lock(&pool->mutex);
    if (!healthy || pool->retired || (conn->ctx != NULL && conn->ctx->err != 0)) {
        broken = conn->ctx;
        conn->ctx = NULL;
        conn->owed = 0;
    }
    conn->busy = 0;
    rlock__gauge_add(&conn->node->events->stats.pool_in_use, -1);
    conn->last_used_ms = rlock__now_ms();
    pthread_cond_signal(&pool->available);
    pthread_mutex_unlock(&pool->mutex);
    if (broken != NULL)
        rlock__conn_free(broken);
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
static int still_open(redisContext *ctx) {
    char byte;
    rlock__tls_conn *tls = rlock__tls_of(ctx);
    if (tls != NULL) /* TLS has bytes of its own to come (session tickets): asked to it */
        return rlock__tls_still_open(ctx, tls);
    ssize_t n = recv(ctx->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Whether the connected slot we hold can be used as it is. */
static int usable(const rlock__conn *conn) {
    return rlock__now_ms() - conn->last_used_ms < IDLE_CHECK_MS || still_open(conn->ctx);
}

/* Drops the slot's context (the slot is ours). */
static void drop_context(rlock__conn *conn) {
    rlock__pool *pool = &conn->node->pool;
    redisContext *ctx;
    pthread_mutex_lock(&pool->mutex);
    ctx = conn->ctx;
    conn->ctx = NULL;
    conn->owed = 0;
    pthread_mutex_unlock(&pool->mutex);
    if (ctx != NULL)
        rlock__conn_free(ctx);
}

/* Whether close began (pool mutex not held). */
static int closing(rlock__pool *pool) {
    pthread_mutex_lock(&pool->mutex);
    int yes = pool->closing;
    pthread_mutex_unlock(&pool->mutex);
    return yes;
}

/*
 * Records the numeric address ctx is connected to as the pool's peer, the
 * first time (under the pool's mutex). A unix socket's path needs none.
 */
static void note_peer(rlock__pool *pool, const redisContext *ctx) {
    struct sockaddr_storage sa;
    socklen_t len = sizeof(sa);
    char ip[INET6_ADDRSTRLEN];
    if (pool->peer[0] != '\0' || ctx->connection_type != REDIS_CONN_TCP ||
        getpeername(ctx->fd, (struct sockaddr *)&sa, &len) != 0)
        return;
    if (sa.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&sa;
        if (inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip)) != NULL)
            snprintf(pool->peer, sizeof(pool->peer), "%s:%d", ip, ntohs(in->sin_port));
    } else if (sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&sa;
        if (inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip)) != NULL)
            snprintf(pool->peer, sizeof(pool->peer), "[%s]:%d", ip, ntohs(in6->sin6_port));
    }
}

int rlock__pool_peer(rlock__pool *pool, char *buf, size_t size) {
    pthread_mutex_lock(&pool->mutex);
    int known = pool->peer[0] != '\0';
    if (known)
        snprintf(buf, size, "%s", pool->peer);
    pthread_mutex_unlock(&pool->mutex);
    return known;
}

/*
 * Reads and drops the replies the slot we hold owes, by deadline_ms.
 * RLOCK_OK when none is owed any more; RLOCK_EIO (errno ETIMEDOUT when
 * they have not all arrived: the connection is still sound).
 */
static int settle_owed(rlock__conn *conn, int64_t deadline_ms) {
    for (; conn->owed > 0; conn->owed--) {
        redisReply *reply = NULL;
        if (rlock__io_read(conn->ctx, deadline_ms, &reply) != RLOCK_OK)
            return RLOCK_EIO;
        freeReplyObject(reply);
    }
    return RLOCK_OK;
}

/*
 * The new socket is published under the pool's mutex before its set-up
 * round trip (AUTH, SELECT, CLIENT SETNAME): close reads busy slots'
 * contexts to abort them, so a set-up waiting on a stopped server ends
 * then, not at the connect timeout. If close began while we connected,
 * RLOCK_ECLOSED: the caller sends nothing and gives the slot back unhealthy
 * (the context is freed, as after any failure).
 */
int rlock__pool_connect(rlock__conn *conn, int connect_timeout_ms, int64_t deadline_ms) {
    rlock__pool *pool = &conn->node->pool;
    redisContext *ctx = NULL;
    int64_t setup_by;
    if (conn->ctx != NULL && settle_owed(conn, deadline_ms) == RLOCK_OK && usable(conn))
        return RLOCK_OK;
    drop_context(conn);
    if (rlock__pool_fenced(pool)) /* left before we connected: not even a socket to it */
        return rlock__fail(RLOCK_EIO, 0, "the client has left the master there");
    int status = rlock__connect_socket(&conn->node->endpoint, connect_timeout_ms, deadline_ms,
                                       &ctx, &setup_by);
    if (status != RLOCK_OK)
        return status;
    pthread_mutex_lock(&pool->mutex);
    conn->ctx = ctx;
    conn->owed = 0;
    note_peer(pool, ctx);
    status = pool->closing ? RLOCK_ECLOSED : RLOCK_OK;
    pthread_mutex_unlock(&pool->mutex);
    if (status == RLOCK_OK && rlock__pool_fenced(pool)) /* fenced while we connected */
        status = rlock__fail(RLOCK_EIO, 0, "the client has left the master there");
    if (status == RLOCK_OK)
        status = rlock__connect_setup(&conn->node->endpoint, conn->node->events, ctx, setup_by);
    return status != RLOCK_OK && closing(pool) ? RLOCK_ECLOSED : status;
}

/*
 * Whether an idle slot we took can carry a command at once: its owed
 * replies read (when they are here: 0 if not yet, *dead stays 0) or taken
 * along (RLOCK__IDLE_OWING), and not closed by the server (*dead; unless
 * RLOCK__IDLE_UNCHECKED).
 */
static int ready_now(rlock__conn *conn, int flags, int *dead) {
    *dead = 0;
    if (conn->owed > 0 && (flags & RLOCK__IDLE_OWING))
        return 1; /* its replies are coming: the socket has data, no peek can tell */
    if (conn->owed > 0 && settle_owed(conn, rlock__now_ms()) != RLOCK_OK) {
        *dead = conn->ctx->err != 0 || errno != ETIMEDOUT;
        return 0;
    }
    *dead = !(flags & RLOCK__IDLE_UNCHECKED) && !still_open(conn->ctx);
    return !*dead;
}

/*
 * A command written on an idle slot is not re-sent if the slot turns out
 * dead (its reply is read later, or by another thread), so each one is
 * checked, however recently used (a server restarted since), and a dead one
 * closed before the next is tried.
 */
rlock__conn *rlock__pool_take_idle(rlock__pool *pool, int flags) {
    for (int next = 0;;) {
        rlock__conn *conn = NULL;
        int dead;
        pthread_mutex_lock(&pool->mutex);
        /* Never ahead of threads queued in rlock__pool_take (it says why). */
        for (; next < pool->size && !pool->closing && !atomic_load(&pool->fenced) &&
               pool->waiting == 0 && conn == NULL;
             next++)
            if (!pool->slots[next].busy && pool->slots[next].ctx != NULL)
                conn = &pool->slots[next];
        if (conn != NULL)
            take(conn);
        pthread_mutex_unlock(&pool->mutex);
        if (conn == NULL || ready_now(conn, flags, &dead))
            return conn;
        /* Closed by the server: dropped; still owing: left for later. The slots after it next. */
        rlock__pool_give(conn, !dead);
    }
}


rlock__node *rlock__node_new(rlock__endpoint *ep, int pool_size, rlock__events *ev) {
    rlock__node *node = rlock__calloc(1, sizeof(*node));
    if (node == NULL)
        return NULL;
    if (rlock__pool_init(&node->pool, node, pool_size) != RLOCK_OK) {
        rlock__free(node);
        return NULL;
    }
    node->endpoint = *ep;
    node->events = ev;
    memset(ep, 0, sizeof(*ep));
    return node;
}

void rlock__node_free(rlock__node *node) {
    if (node == NULL)
        return;
    rlock__pool_destroy(&node->pool);
    rlock__endpoint_clear(&node->endpoint);
    rlock__free(node);
}

void rlock__pool_seed(rlock__pool *pool, redisContext *ctx) {
    pthread_mutex_lock(&pool->mutex);
    note_peer(pool, ctx);
    if (pool->slots[0].ctx == NULL && !pool->slots[0].busy) {
        pool->slots[0].ctx = ctx;
        pool->slots[0].owed = 0;
        pool->slots[0].last_used_ms = rlock__now_ms();
        ctx = NULL;
    }
    pthread_mutex_unlock(&pool->mutex);
    if (ctx != NULL)
        rlock__conn_free(ctx);
}

void rlock__pool_retire(rlock__pool *pool, int retired) {
    pthread_mutex_lock(&pool->mutex);
    pool->retired = retired;
    for (int i = 0; retired && i < pool->size; i++) {
        rlock__conn *slot = &pool->slots[i];
        if (!slot->busy && slot->ctx != NULL) {
            rlock__conn_free(slot->ctx); /* idle: nobody reads it */
            slot->ctx = NULL;
            slot->owed = 0;
        }
    }
    pthread_mutex_unlock(&pool->mutex);
}

void rlock__pool_fence(rlock__pool *pool) {
    pthread_mutex_lock(&pool->mutex);
    atomic_store(&pool->fenced, 1);
    pool->retired = 1;
    for (int i = 0; i < pool->size; i++) {
        rlock__conn *slot = &pool->slots[i];
        if (slot->ctx == NULL)
            continue;
        if (slot->busy) { /* its thread frees it: a write fails, a read ends */
            shutdown(slot->ctx->fd, SHUT_RDWR);
            continue;
        }
        rlock__conn_free(slot->ctx); /* idle: nobody reads it */
        slot->ctx = NULL;
        slot->owed = 0;
    }
    pthread_cond_broadcast(&pool->available);
    pthread_mutex_unlock(&pool->mutex);
}

void rlock__pool_close_idle(rlock__pool *pool, int64_t idle_ms) {
    int64_t now = rlock__now_ms();
    int in_use = 0;
    pthread_mutex_lock(&pool->mutex);
    for (int i = 0; i < pool->size; i++)
        in_use += pool->slots[i].ctx != NULL &&
                  (pool->slots[i].busy || now - pool->slots[i].last_used_ms <= idle_ms);
    for (int i = 0; i < pool->size; i++) {
        rlock__conn *slot = &pool->slots[i];
        if (slot->busy || slot->ctx == NULL || now - slot->last_used_ms <= idle_ms)
            continue;
        if (in_use++ == 0)
            continue; /* one stays: a trickle of commands keeps its connection */
        rlock__conn_free(slot->ctx); /* idle: nobody reads it */
        slot->ctx = NULL;
        slot->owed = 0;
    }
    pthread_mutex_unlock(&pool->mutex);
}
