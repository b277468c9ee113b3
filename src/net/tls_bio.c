/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tls_bio.c - the OpenSSL BIO under every TLS session of tls.c: it reads and
 * writes rlock's own socket without ever raising SIGPIPE, and waits only in
 * the one read tls.c asks to wait (a reply's first, a slice at most).
 *
 * Threads: any thread making a session; the method is made once
 * (pthread_once) and read-only after.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include <openssl/bio.h>

#include "conn.h"

/*
 * OpenSSL's socket BIO writes with write(): SIGPIPE on a socket shut down by
 * close or reset by the peer, with the application's signal mask (io.c).
 * This one uses send(MSG_NOSIGNAL | MSG_DONTWAIT) and recv. The socket
 * blocks its reads, each for one receive-timeout slice (rlock__io_block_reads):
 * a recv waits only when asked (a reply's first read, as a plaintext one
 * does: one system call, no poll first), else MSG_DONTWAIT.
 */
static int bio_write(BIO *bio, const char *buf, int len) {
    const rlock__tls_socket *sock = BIO_get_data(bio);
    ssize_t n = send(sock->fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
    BIO_clear_retry_flags(bio);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_write(bio);
    return (int)n;
}

static int bio_read(BIO *bio, char *buf, int len) {
    rlock__tls_socket *sock = BIO_get_data(bio);
    int flags = sock->wait_next_read ? 0 : MSG_DONTWAIT;
    sock->wait_next_read = 0;
    ssize_t n = recv(sock->fd, buf, (size_t)len, flags);
    BIO_clear_retry_flags(bio);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_read(bio);
    return (int)n;
}

static long bio_ctrl(BIO *bio, int cmd, long num, void *ptr) {
    (void)bio;
    (void)num;
    (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void make_bio_method(void) {
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "rlock socket");
    if (m != NULL && (!BIO_meth_set_write(m, bio_write) || !BIO_meth_set_read(m, bio_read) ||
                      !BIO_meth_set_ctrl(m, bio_ctrl))) {
        BIO_meth_free(m);
        m = NULL;
    }
    bio_method = m;
}

struct bio_st *rlock__tls_socket_bio(rlock__tls_socket *sock) {
    pthread_once(&bio_once, make_bio_method);
    BIO *bio = bio_method != NULL ? BIO_new(bio_method) : NULL;
    if (bio != NULL) {
        BIO_set_data(bio, sock);
        BIO_set_init(bio, 1);
    }
    return bio;
}
