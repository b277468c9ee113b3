/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * conn.h - PRIVATE to the net layer: one connection, below what net.h shows
 * the layers above -- waiting on sockets (io.c), a connection's TLS session
 * (tls.c), the two halves of a connect and the words of its failures
 * (connect.c), SCRIPT LOAD and the RESP a command is sent as (script.c).
 *
 * Threads: any thread that connects or runs a command on a connection it
 * holds; nothing here is shared.
 */
#ifndef RLOCK_NET_CONN_H
#define RLOCK_NET_CONN_H

#include "net.h"

/* ---- url.c ------------------------------------------------------------------- */

/*
 * RLOCK_EINVAL for a malformed url, recorded with the part that is wrong and
 * its position (nothing left allocated); RLOCK_ENOMEM.
 */
int rlock__parse_url(const char *url, rlock__url *u);
void rlock__url_clear(rlock__url *u);
/*
 * url.c's parsing, shared with url_tls.c: a malformed part reported (its
 * text, what was expected, its position; RLOCK_EINVAL), and [s, s+len) with
 * %XX decoded (malloc'd; NULL on a bad escape, reported, or no memory).
 */
int rlock__url_bad_part(const char *url, const char *at, size_t len, const char *what,
                        const char *expected);
char *rlock__url_decode(const char *url, const char *s, size_t len, const char *what,
                        int *status);
/*
 * url_tls.c: one tls_* parameter (key [s, s+key_len), its value after the
 * '='): 1 if it is one (*status its outcome), 0 if the key is no TLS
 * parameter; and the query of a rediss:// or rediss-cluster:// url.
 */
int rlock__url_tls_param(const char *url, const char *s, size_t key_len, size_t value_len,
                         rlock__url *u, int *status);
int rlock__url_tls_query(const char *url, const char *s, rlock__url *u);
/* Frees the strings (the password wiped first) and zeroes ep. */
void rlock__endpoint_clear(rlock__endpoint *ep);
/* Whether ep is the TCP endpoint host:port. */
int rlock__endpoint_is(const rlock__endpoint *ep, const char *host, int port);
/* Fills ep with copies of the strings (user, password may be NULL). RLOCK_ENOMEM. */
int rlock__endpoint_set(rlock__endpoint *ep, const char *host, int port, const char *user,
                        const char *password, int db);

/* ---- io.c -------------------------------------------------------------------- */

/*
 * Waits until fd is ready for events (POLLIN, POLLOUT) or deadline_ms
 * passes. A signal only makes it recompute the time left. Returns RLOCK_OK,
 * or RLOCK_EIO with errno ETIMEDOUT (deadline) or poll's errno.
 */
int rlock__io_wait(int fd, short events, int64_t deadline_ms);
/*
 * One wait over several sockets (poll's fds[], revents filled): how many are
 * ready, or -1 with errno ETIMEDOUT (deadline) or poll's errno. As above, a
 * signal only makes it recompute the time left.
 */
int rlock__io_wait_any(struct pollfd *fds, int n, int64_t deadline_ms);
/*
 * Makes fd's reads block, each for at most a slice (SO_RCVTIMEO), so that
 * rlock__io_read can wait in read() itself (io.c). Writes stay non-blocking.
 * RLOCK_EIO if the socket refused (it stays as it was: still usable).
 */
int rlock__io_block_reads(int fd);

/* ---- tls.c: a connection's TLS session ------------------------------------------ */

/* A TLS connection's session (opaque; tls.c). */
typedef struct rlock__tls_conn rlock__tls_conn;
/* ctx's TLS session, or NULL for a plaintext connection (one atomic load while no TLS). */
rlock__tls_conn *rlock__tls_of(const redisContext *ctx);
/*
 * The TLS handshake on ctx's connected socket, as t says, by deadline_ms,
 * with the name t->server_name or ep's host; the session is ctx's from
 * then on (rlock__conn_free frees it). Records the cause in words:
 * RLOCK_EIO (verification, a peer that speaks no TLS, an unreadable file,
 * the deadline), RLOCK_EAUTH (our client certificate missing or refused),
 * RLOCK_ENOMEM.
 */
int rlock__tls_start(const rlock__endpoint *ep, const rlock__tls_settings *t, redisContext *ctx,
                     int64_t deadline_ms);
/*
 * What came on a TLS connection, decrypted into ctx's reader (redisBufferRead's
 * contract). wait: the first recv may wait for the peer, one receive-timeout
 * slice at most (io.c), as a plaintext read does; else nothing waits.
 */
int rlock__tls_fill(redisContext *ctx, rlock__tls_conn *c, int wait);
/* send() of len bytes of buf over the session: bytes taken, or -1 (errno EAGAIN: later). */
ssize_t rlock__tls_send(redisContext *ctx, rlock__tls_conn *c, const char *buf, size_t len);
/* rlock__pool's idle check for a TLS connection: 1 if nothing but TLS housekeeping came. */
int rlock__tls_still_open(redisContext *ctx, rlock__tls_conn *c);
/* rlock__io_events for a TLS session: usual, or the other way if its last call wants that. */
short rlock__tls_events(const rlock__tls_conn *c, short usual);

/* The socket under a TLS session, as its BIO (tls_bio.c) sees it; in the session's memory. */
typedef struct rlock__tls_socket {
    int fd;
    int wait_next_read; /* the next recv may wait (a slice); that recv clears it */
} rlock__tls_socket;
/*
 * tls_bio.c: a BIO (OpenSSL's struct bio_st) on sock that writes with
 * send(MSG_NOSIGNAL) and never blocks, and reads without waiting unless
 * sock->wait_next_read; NULL if out of memory. sock must outlive the BIO.
 */
struct bio_st *rlock__tls_socket_bio(rlock__tls_socket *sock);

/* ---- connect.c --------------------------------------------------------------- */

/*
 * rlock__connect in two halves, for a caller that must publish the socket
 * before the set-up round trip (a pool slot, so that close can abort it):
 * the connected socket (*setup_by_ms: the bound the set-up keeps), then the
 * set-up (AUTH, SELECT, CLIENT SETNAME), after which the caller frees ctx
 * on failure.
 */
int rlock__connect_socket(const rlock__endpoint *ep, int connect_timeout_ms, int64_t deadline_ms,
                          redisContext **out, int64_t *setup_by_ms);
int rlock__connect_setup(const rlock__endpoint *ep, rlock__events *ev, redisContext *ctx,
                         int64_t by_ms);
/*
 * Records an I/O failure at ep ("<what> host:port", with errno or hiredis's
 * text from ctx) and returns RLOCK_EIO. A timeout after the connect is named
 * the reply's (errno still ETIMEDOUT); a protocol error asks whether the
 * server is a Redis server.
 */
int rlock__fail_io(const rlock__endpoint *ep, const redisContext *ctx, int sys_errno,
                   const char *what);
/* Whether a plaintext TCP connection failed as one to a TLS-only port does (reset, closed,
 * an answer that is not RESP): the caller adds "is it a TLS port? use rediss://". */
int rlock__maybe_tls_port(const redisContext *ctx, int sys_errno);
/* The words for a reply that never came, and for an answer that is not RESP. */
extern const char rlock__no_reply[], rlock__not_resp[];
/*
 * Runs one command on a private (unpooled) connection to ep by deadline_ms;
 * an error reply is recorded and returned as its status (*reply NULL).
 */
int rlock__run_private(redisContext *ctx, const rlock__endpoint *ep, int argc, const char **argv,
                       int64_t deadline_ms, redisReply **reply);

/* ---- script.c ---------------------------------------------------------------- */

/* SCRIPT LOAD of every script of set on ctx (one pipeline) by deadline_ms. */
int rlock__scripts_load(redisContext *ctx, int64_t deadline_ms, rlock__script_set *set);
/* Whether INFO server's text names a server older than rlock supports (6.2); its version
 * into version[size] ("" if not named). */
int rlock__server_too_old(const char *info, char *version, size_t size);
/*
 * Appends argv (with its lengths) to ctx's output buffer as one RESP command,
 * byte for byte what redisAppendCommandArgv appends, at a fraction of its
 * cost: hiredis 0.14 formats each part with sdscatfmt into a string of its
 * own and copies it, ~4 000 instructions per lock script (callgrind,
 * docs/design.md section 6; test_net_io checks the bytes). RLOCK_ENOMEM (no
 * memory, or a command over INT_MAX bytes): the buffer is left as it was.
 */
int rlock__append_argv(redisContext *ctx, int argc, const char **argv, const size_t *argvlen);
/* Appends cmd to ctx: EVALSHA (use_body 0), EVAL (use_body 1), or the plain command. */
int rlock__append_cmd(redisContext *ctx, const rlock__script_set *set, const rlock__cmd *cmd,
                      int use_body);
int rlock__is_noscript(const redisReply *reply);
/* The command's short name for messages: the script's, or the verb. */
const char *rlock__cmd_name(const rlock__script_set *set, const rlock__cmd *cmd);

#endif /* RLOCK_NET_CONN_H */
