/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls.c - TLS on rlock's own sockets (OpenSSL 3), for rediss urls: the
 * handshake of a connection, bounded by the connect's deadline, and the
 * reads and writes of a TLS connection, feeding the same hiredis reply
 * reader and taking from the same output buffer as a plaintext one (io.c
 * calls here when rlock__tls_of finds a session for the context). hiredis
 * 0.14 has no TLS, so hiredis never touches these sockets' bytes itself.
 * The shape follows hiredis 1.x's ssl.c (a session on the socket, reads
 * feeding the reader, WANT_READ/WANT_WRITE as "later"); the code is rlock's.
 * Its sessions sit on tls_bio.c's BIO; url_tls.c parses the url's TLS part.
 *
 * What it owns: an SSL session per connection, found by the socket's fd in
 * a table (the context has no field of its own for it in hiredis 0.14), made
 * by the handshake and freed by rlock__conn_free, which every owner of a
 * context calls instead of redisFree. An SSL_CTX is made for each
 * handshake and dropped with its session: the CA, certificate and key files
 * are read anew by every new connection, so files replaced on disk
 * (rotation) need no reload. Pooled connections live long, so this costs a
 * handshake's file reads only when a connection is made.
 *
 * No session is ever shut down (SSL_shutdown): a connection ends with its
 * socket closed. That keeps a forked child, which closes what it inherited
 * (the parent's sessions), from writing a close_notify into the parent's
 * streams; and the server needs none.
 *
 * Threads: whichever thread connects or holds the context (application
 * threads, the subscriber, the watchdog, the Sentinel and Cluster threads);
 * a session is used by one thread at a time, as its context is. The fd
 * table is read without a lock (atomic pointers, chunks never freed).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "conn.h"

/* One TLS connection. */
struct rlock__tls_conn {
    SSL *ssl;
    rlock__tls_socket sock;    /* what its BIO reads and writes */
    size_t write_pending;      /* length of an SSL_write to retry as it was (WANT_WRITE) */
    short read_needs;          /* POLLOUT: the last SSL_read wanted to write first; else 0 */
    short write_needs;         /* POLLIN: the last SSL_write wanted to read first; else 0 */
    int has_cert;              /* we offered a client certificate */
    char peer_names[256];      /* the server certificate's names, for a mismatch's words */
};

/* ---- the fd table: fd -> session ---------------------------------------------- */

#define CHUNK_BITS 10
#define CHUNK_SIZE (1 << CHUNK_BITS)
#define CHUNKS 1024            /* fds below 2^20 */

typedef _Atomic(rlock__tls_conn *) slot_t;
static _Atomic(slot_t *) chunks[CHUNKS];
static atomic_int sessions;    /* 0: no TLS anywhere, a plaintext lookup costs one load */

static slot_t *slot_of(int fd, int create) {
    if (fd < 0 || fd >= CHUNKS * CHUNK_SIZE)
        return NULL;
    slot_t *chunk = atomic_load(&chunks[fd >> CHUNK_BITS]);
    if (chunk == NULL && create) {
        slot_t *fresh = calloc(CHUNK_SIZE, sizeof(*fresh));
        if (fresh == NULL)
            return NULL;
        if (atomic_compare_exchange_strong(&chunks[fd >> CHUNK_BITS], &chunk, fresh))
            chunk = fresh;
        else
            free(fresh); /* another thread's came first: chunk is it */
    }
    return chunk != NULL ? &chunk[fd & (CHUNK_SIZE - 1)] : NULL;
}

rlock__tls_conn *rlock__tls_of(const redisContext *ctx) {
    if (atomic_load_explicit(&sessions, memory_order_relaxed) == 0)
        return NULL;
    slot_t *slot = slot_of(ctx->fd, 0);
    return slot != NULL ? atomic_load(slot) : NULL;
}

static void conn_drop(rlock__tls_conn *c) {
    if (c == NULL)
        return;
    SSL_free(c->ssl); /* never SSL_shutdown: see the top of the file */
    rlock__free(c);
}

void rlock__conn_free(redisContext *ctx) {
    if (ctx == NULL)
        return;
    slot_t *slot = rlock__tls_of(ctx) != NULL ? slot_of(ctx->fd, 0) : NULL;
    if (slot != NULL) {
        conn_drop(atomic_exchange(slot, NULL));
        atomic_fetch_sub(&sessions, 1);
    }
    redisFree(ctx); /* closes the fd after its slot is empty: a new socket may take it */
}

/* ---- verification: what the server's certificate says -------------------------- */

static int conn_index = -1;
static pthread_once_t index_once = PTHREAD_ONCE_INIT;

static void make_index(void) {
    conn_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* The certificate's names (DNS and IP SANs, else its CN) into buf, for an error's words. */
static void cert_names(X509 *cert, char *buf, size_t size) {
    GENERAL_NAMES *sans = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; sans != NULL && i < sk_GENERAL_NAME_num(sans) && used < size; i++) {
        const GENERAL_NAME *gn = sk_GENERAL_NAME_value(sans, i);
        char ip[INET6_ADDRSTRLEN] = "";
        const char *name = NULL;
        if (gn->type == GEN_DNS) {
            name = (const char *)ASN1_STRING_get0_data(gn->d.dNSName);
        } else if (gn->type == GEN_IPADD) {
            int len = ASN1_STRING_length(gn->d.iPAddress);
            const unsigned char *a = ASN1_STRING_get0_data(gn->d.iPAddress);
            if (len == 4 || len == 16)
                name = inet_ntop(len == 4 ? AF_INET : AF_INET6, a, ip, sizeof(ip));
        }
        if (name != NULL)
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used > 0 ? ", " : "", name);
    }
    GENERAL_NAMES_free(sans);
    if (buf[0] == '\0' &&
        X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf,
                                  (int)size) < 0)
        snprintf(buf, size, "(no name)");
}

/* Keeps the server certificate's names (depth 0); the verdict stays OpenSSL's. */
static int verify_cb(int ok, X509_STORE_CTX *store) {
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    rlock__tls_conn *c = ssl != NULL ? SSL_get_ex_data(ssl, conn_index) : NULL;
    X509 *cert = X509_STORE_CTX_get_current_cert(store);
    if (c != NULL && cert != NULL && X509_STORE_CTX_get_error_depth(store) == 0)
        cert_names(cert, c->peer_names, sizeof(c->peer_names));
    return ok;
}

/* ---- the handshake ------------------------------------------------------------ */

static int is_ip_literal(const char *host) {
    unsigned char addr[16];
    return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

/* The OpenSSL error queue's last reason, in words. */
static const char *ssl_reason(char *buf, size_t size) {
    unsigned long e = ERR_peek_last_error();
    if (e == 0)
        return "no detail";
    ERR_error_string_n(e, buf, size);
    return buf;
}

/* A file of the settings OpenSSL could not load, named. */
static int file_failed(const char *field, const char *path) {
    char why[256];
    return rlock__fail(RLOCK_EIO, 0, "TLS: cannot load %s %s: %s", field, path,
                       ssl_reason(why, sizeof(why)));
}

/* The SSL_CTX of one new connection: the files as they are on disk now. */
static int make_ctx(const rlock__tls_settings *t, SSL_CTX **out) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    int status = RLOCK_OK;
    *out = NULL;
    if (ctx == NULL)
        return rlock__fail(RLOCK_ENOMEM, 0, "TLS: out of memory");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* A write that must wait is retried with the buffer's head, which may have moved. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_ENABLE_PARTIAL_WRITE);
    SSL_CTX_set_read_ahead(ctx, 1); /* one recv per reply (rlock__tls_fill) */
    /* An idle connection gives its 16 KB+ read and write buffers back: 91 -> 58 KB of heap
     * per connection (bench_tls memory), cycles unchanged within noise. */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_verify(ctx, t->verify == RLOCK_TLS_VERIFY_NONE ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
                       verify_cb);
    if (t->ca[0] != '\0' ? SSL_CTX_load_verify_locations(ctx, t->ca, NULL) != 1
                         : SSL_CTX_set_default_verify_paths(ctx) != 1)
        status = file_failed("tls_ca", t->ca[0] != '\0' ? t->ca : "(the system's trust store)");
    else if (t->cert[0] != '\0' && SSL_CTX_use_certificate_chain_file(ctx, t->cert) != 1)
        status = file_failed("tls_cert", t->cert);
    else if (t->key[0] != '\0' && SSL_CTX_use_PrivateKey_file(ctx, t->key, SSL_FILETYPE_PEM) != 1)
        status = file_failed("tls_key", t->key);
    else if (t->cert[0] != '\0' && SSL_CTX_check_private_key(ctx) != 1)
        status = file_failed("tls_key (not the key of tls_cert)", t->key);
    if (status != RLOCK_OK)
        SSL_CTX_free(ctx);
    else
        *out = ctx;
    return status;
}

/* SNI and the name verified: the configured one, else the host connected to. */
static int set_names(SSL *ssl, const rlock__tls_settings *t, const char *name) {
    int ip = is_ip_literal(name);
    if (!ip && SSL_set_tlsext_host_name(ssl, name) != 1) /* no SNI for an address (RFC 6066) */
        return 0;
    if (t->verify != RLOCK_TLS_VERIFY_FULL)
        return 1;
    if (ip)
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    return SSL_set1_host(ssl, name) == 1;
}

/* Whether the handshake's failure says the peer speaks no TLS. */
static int not_tls(unsigned long e, int ssl_error) {
    int reason = ERR_GET_REASON(e);
    if (ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_ZERO_RETURN)
        return 1; /* closed in the middle: a plaintext Redis drops the "protocol error" */
    return reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
           reason == SSL_R_UNEXPECTED_EOF_WHILE_READING || reason == SSL_R_RECORD_LENGTH_MISMATCH ||
           reason == SSL_R_UNKNOWN_PROTOCOL || reason == SSL_R_HTTP_REQUEST;
}

/* Whether an alert from the server refuses our (missing or unknown) client certificate. */
static int cert_refused(unsigned long e) {
    int reason = ERR_GET_REASON(e);
    return reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
           reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE ||
           reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA || reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
           reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN ||
           reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR || reason == SSL_R_TLSV1_ALERT_ACCESS_DENIED;
}

/* Words for a client certificate the server would not take: status RLOCK_EAUTH. */
static void refusal_words(const rlock__tls_conn *c, const char *reason, char *buf, size_t size) {
    if (!c->has_cert)
        snprintf(buf, size, "server requires a client certificate (set tls_cert, tls_key; %s)",
                 reason);
    else
        snprintf(buf, size, "server refused the client certificate (%s: is tls_cert signed by a "
                            "CA the server trusts, and not expired?)", reason);
}

/* A failed verification of the server's certificate, in words. */
static int verify_failed(const char *at, const rlock__tls_conn *c, long v, const char *want) {
    const char *what = X509_verify_cert_error_string(v);
    switch (v) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return rlock__fail(RLOCK_EIO, 0, "TLS handshake with %s: host name mismatch: %s vs %s "
                                         "(the certificate's names; set tls_server_name to one "
                                         "of them, or connect by it)",
                           at, want, c->peer_names[0] != '\0' ? c->peer_names : "(none)");
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        return rlock__fail(RLOCK_EIO, 0, "TLS handshake with %s: %s (unknown CA: set tls_ca to "
                                         "the CA bundle that signed the server's certificate)",
                           at, what);
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
        return rlock__fail(RLOCK_EIO, 0, "TLS handshake with %s: %s (the server's certificate, "
                                         "%s; check the clocks, renew it)",
                           at, what, c->peer_names);
    default:
        return rlock__fail(RLOCK_EIO, 0, "TLS handshake with %s: certificate verification "
                                         "failed: %s", at, what);
    }
}

/* Why the handshake failed (ssl_error from SSL_get_error), recorded: its status. */
static int handshake_failed(const char *at, const rlock__tls_conn *c, int ssl_error,
                            int sys_errno, const char *want) {
    unsigned long e = ERR_peek_last_error();
    char reason[200], words[400];
    long v = SSL_get_verify_result(c->ssl);
    if (v != X509_V_OK)
        return verify_failed(at, c, v, want);
    ssl_reason(reason, sizeof(reason));
    if (e != 0 && cert_refused(e)) {
        refusal_words(c, reason, words, sizeof(words));
        return rlock__fail(RLOCK_EAUTH, 0, "TLS handshake with %s: %s", at, words);
    }
    if (not_tls(e, ssl_error))
        return rlock__fail(RLOCK_EIO, sys_errno, "TLS handshake with %s: the server did not "
                                                 "answer the TLS handshake (%s): is it a "
                                                 "plaintext port? (use redis:// for one)",
                           at, e != 0 ? reason : "connection closed");
    return rlock__fail(RLOCK_EIO, 0, "TLS handshake with %s: %s", at, reason);
}

/* SSL_connect until done, each wait bounded by deadline_ms. */
static int handshake(const char *at, rlock__tls_conn *c, int fd, int64_t deadline_ms,
                     const char *want) {
    for (;;) {
        ERR_clear_error();
        int r = SSL_connect(c->ssl);
        if (r == 1)
            return RLOCK_OK;
        int e = SSL_get_error(c->ssl, r), err = errno;
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            return handshake_failed(at, c, e, e == SSL_ERROR_SYSCALL ? err : 0, want);
        if (rlock__io_wait(fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline_ms) !=
            RLOCK_OK)
            return rlock__fail(RLOCK_EIO, errno, "TLS handshake with %s: no answer in time "
                                                 "(the server did not answer the TLS "
                                                 "handshake: is it a plaintext port?)",
                               at);
    }
}

/* A fresh session for fd: names, BIO, our index. */
static int new_conn(const rlock__tls_settings *t, const char *want, int fd,
                    rlock__tls_conn **out) {
    SSL_CTX *sctx = NULL;
    int status = make_ctx(t, &sctx);
    rlock__tls_conn *c = NULL;
    BIO *bio = NULL;
    *out = NULL;
    if (status != RLOCK_OK)
        return status;
    pthread_once(&index_once, make_index);
    c = rlock__calloc(1, sizeof(*c));
    if (c == NULL || (c->ssl = SSL_new(sctx)) == NULL)
        goto no_memory;
    c->sock.fd = fd;
    if ((bio = rlock__tls_socket_bio(&c->sock)) == NULL)
        goto no_memory;
    SSL_set_bio(c->ssl, bio, bio); /* the session owns it now */
    c->has_cert = t->cert[0] != '\0';
    if (conn_index < 0 || SSL_set_ex_data(c->ssl, conn_index, c) != 1)
        goto no_memory;
    if (!set_names(c->ssl, t, want)) {
        SSL_CTX_free(sctx);
        conn_drop(c);
        return rlock__fail(RLOCK_EINVAL, 0, "TLS: \"%s\" cannot be the server name (SNI, "
                                            "verification): set tls_server_name", want);
    }
    SSL_set_connect_state(c->ssl);
    SSL_CTX_free(sctx); /* the session keeps its reference */
    *out = c;
    return RLOCK_OK;
no_memory:
    SSL_CTX_free(sctx);
    conn_drop(c);
    return rlock__fail(RLOCK_ENOMEM, 0, "TLS: out of memory");
}

int rlock__tls_start(const rlock__endpoint *ep, const rlock__tls_settings *t, redisContext *ctx,
                     int64_t deadline_ms) {
    char at[RLOCK__WHERE_MAX];
    const char *want = t->server_name[0] != '\0' ? t->server_name : ep->host;
    rlock__tls_conn *c = NULL;
    rlock__endpoint_str(ep, at, sizeof(at));
    if (ep->unix_path != NULL) /* the grammar has no such url: never plaintext in its place */
        return rlock__fail(RLOCK_EINVAL, 0, "TLS over a unix socket (%s): not supported", at);
    int status = new_conn(t, want, ctx->fd, &c);
    if (status == RLOCK_OK)
        status = handshake(at, c, ctx->fd, deadline_ms, want);
    slot_t *slot = status == RLOCK_OK ? slot_of(ctx->fd, 1) : NULL;
    if (status == RLOCK_OK && slot == NULL)
        status = rlock__fail(RLOCK_ENOMEM, 0, "TLS: out of memory");
    if (status != RLOCK_OK) {
        conn_drop(c);
        return status;
    }
    atomic_fetch_add(&sessions, 1);
    atomic_store(slot, c);
    return RLOCK_OK;
}

/* ---- reads and writes ---------------------------------------------------------- */

/* Records a failed read or write in ctx as hiredis would (err, errstr). */
static void set_error(redisContext *ctx, int type, const char *what) {
    size_t n = strlen(what);
    ctx->err = type;
    if (n >= sizeof(ctx->errstr)) /* hiredis's 128 bytes: the words lead, the reason is cut */
        n = sizeof(ctx->errstr) - 1;
    memcpy(ctx->errstr, what, n);
    ctx->errstr[n] = '\0';
}

/* A session's failure (SSL_get_error's e) in ctx; errno set for the callers' words. */
static void io_failed(redisContext *ctx, rlock__tls_conn *c, int e, int sys_errno) {
    unsigned long err = ERR_peek_last_error();
    char reason[200], words[400];
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && sys_errno == 0 && err == 0)) {
        set_error(ctx, REDIS_ERR_EOF, "Server closed the connection");
        errno = 0;
        return;
    }
    if (e == SSL_ERROR_SYSCALL) {
        set_error(ctx, REDIS_ERR_IO, strerror(sys_errno));
        errno = sys_errno;
        return;
    }
    ssl_reason(reason, sizeof(reason));
    if (err != 0 && cert_refused(err)) /* TLS 1.3: the server's verdict on us comes now */
        refusal_words(c, reason, words, sizeof(words));
    else
        snprintf(words, sizeof(words), "TLS: %s", reason);
    set_error(ctx, REDIS_ERR_IO, words);
    errno = EPROTO;
}

static int fill_reader(redisContext *ctx, rlock__tls_conn *c) {
    char buf[16 * 1024];
    int fed = 0;
    c->read_needs = 0;
    /* Until nothing read from the socket stays in the session (SSL_has_pending: decrypted
     * bytes, or a record's bytes not yet decrypted), so a poll() on the socket misses nothing
     * (the subscriber and the pipelines poll the fd). Read-ahead is on (make_ctx): a reply
     * that came whole costs one recv, not one for the record's header and one for its body. */
    for (;;) {
        ERR_clear_error();
        int n = SSL_read(c->ssl, buf, (int)sizeof(buf));
        if (n > 0) {
            if (redisReaderFeed(ctx->reader, buf, (size_t)n) != REDIS_OK) {
                set_error(ctx, ctx->reader->err, ctx->reader->errstr);
                return REDIS_ERR;
            }
            fed = 1;
            if (!SSL_has_pending(c->ssl))
                return REDIS_OK;
            continue;
        }
        int e = SSL_get_error(c->ssl, n), err = errno;
        /* WANT_WRITE (a key update's answer met a full socket buffer) is "later" too: the
         * caller polls for POLLOUT then (rlock__tls_events) and reads again. */
        c->read_needs = e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return REDIS_OK;
        /* Read-ahead can bring a reply and the server's close (its close_notify, or the
         * stream's end) in one recv: what came first is the caller's to take; the failure
         * is the next read's (OpenSSL's error state and a socket's end stay, and a socket
         * at its end polls readable). */
        if (fed)
            return REDIS_OK;
        io_failed(ctx, c, e, err);
        return REDIS_ERR;
    }
}

int rlock__tls_fill(redisContext *ctx, rlock__tls_conn *c, int wait) {
    c->sock.wait_next_read = wait;
    int status = fill_reader(ctx, c);
    c->sock.wait_next_read = 0; /* also when SSL_read needed no recv: no later read waits */
    return status;
}

ssize_t rlock__tls_send(redisContext *ctx, rlock__tls_conn *c, const char *buf, size_t len) {
    /* After WANT_WRITE OpenSSL wants the same write again: the same length (the buffer's
     * head is the same bytes; more may have been appended after them). */
    size_t n = c->write_pending > 0 ? c->write_pending : len;
    if (n > INT_MAX)
        n = INT_MAX;
    ERR_clear_error();
    int r = SSL_write(c->ssl, buf, (int)n);
    c->write_needs = 0;
    if (r > 0) {
        c->write_pending = 0;
        return r;
    }
    int e = SSL_get_error(c->ssl, r), err = errno;
    /* The caller polls for that before it writes again. (What the read takes in is
     * OpenSSL's to keep: only TLS 1.2 renegotiation gets here, which Redis never asks.) */
    if (e == SSL_ERROR_WANT_READ)
        c->write_needs = POLLIN;
    if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
        c->write_pending = n;
        errno = EAGAIN;
        return -1;
    }
    io_failed(ctx, c, e, err);
    if (errno == 0)
        errno = ECONNRESET;
    return -1;
}

int rlock__tls_still_open(redisContext *ctx, rlock__tls_conn *c) {
    /* A session ticket or key update may be waiting: taken in; a reply nobody asked for, an
     * alert or the end of the stream mean the connection is done. */
    return rlock__tls_fill(ctx, c, 0) == REDIS_OK && ctx->reader->len == ctx->reader->pos;
}

short rlock__tls_events(const rlock__tls_conn *c, short usual) {
    if (usual == POLLIN && c->read_needs != 0)
        return c->read_needs;
    if (usual == POLLOUT && c->write_needs != 0)
        return c->write_needs;
    return usual;
}
