/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * proxy_relay.c - the test proxy's relay mechanics (see proxy.c for the loop
 * that drives them): chunk queues with due times that keep the byte order,
 * relayed connection pairs and how they are cut, connecting to the upstream
 * server, accepting, and reading and writing without blocking.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy_priv.h"

unsigned px_rnd(h_proxy *p) {
    p->rng ^= p->rng << 13;
    p->rng ^= p->rng >> 7;
    p->rng ^= p->rng << 17;
    return (unsigned)(p->rng >> 11);
}

static void set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void free_q(struct dirq *q) {
    struct chunk *c = q->head, *n;
    for (; c; c = n) {
        n = c->next;
        free(c);
    }
    q->head = q->tail = NULL;
}

/* Closes fd; with reset, the peer gets an RST instead of a FIN. */
static void close_fd(int fd, int reset) {
    if (fd < 0)
        return;
    if (reset) {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(fd);
}

void px_kill_pair(struct pair *pr, int reset) {
    if (pr->dead)
        return;
    close_fd(pr->cfd, reset);
    close_fd(pr->sfd, reset);
    pr->cfd = pr->sfd = -1;
    free_q(&pr->up);
    free_q(&pr->down);
    pr->dead = 1;
}

void px_cut_pair(h_proxy *p, struct pair *pr) {
    if (pr->dead)
        return;
    px_kill_pair(pr, px_rnd(p) & 1);
    p->st.cuts++;
}

void px_cut_everything(h_proxy *p) {
    int i;
    for (i = 0; i < p->npairs; i++)
        px_cut_pair(p, p->pairs[i]);
}

static void enqueue(h_proxy *p, struct dirq *q, const char *buf, size_t n, long long now, int dmin,
                    int dmax) {
    struct chunk *c = malloc(sizeof *c + n);
    long long due = now;
    if (!c)
        abort();
    if (dmax > 0)
        due += dmin + (dmax > dmin ? (long long)(px_rnd(p) % (unsigned)(dmax - dmin + 1)) : 0);
    if (due < q->last_due)
        due = q->last_due;
    q->last_due = due;
    c->next = NULL;
    c->due_ms = due;
    c->len = n;
    c->off = 0;
    memcpy(c->data, buf, n);
    if (q->tail)
        q->tail->next = c;
    else
        q->head = c;
    q->tail = c;
}

/* Writes due chunks of q to fd. Returns -1 if the connection broke. */
int px_flush_q(struct dirq *q, int fd, long long now, long long *bytes) {
    while (q->head && q->head->due_ms <= now) {
        struct chunk *c = q->head;
        ssize_t w = send(fd, c->data + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR)
                continue;
            return -1;
        }
        c->off += (size_t)w;
        *bytes += w;
        if (c->off < c->len)
            return 0;
        q->head = c->next;
        if (!q->head)
            q->tail = NULL;
        free(c);
    }
    return 0;
}

static void add_pair(h_proxy *p, int cfd, int sfd) {
    struct pair *pr = calloc(1, sizeof *pr);
    if (!pr)
        abort();
    pr->cfd = cfd;
    pr->sfd = sfd;
    if (p->npairs == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->pairs = realloc(p->pairs, sizeof *p->pairs * (size_t)p->cap);
        if (!p->pairs)
            abort();
    }
    p->pairs[p->npairs++] = pr;
}

static int connect_upstream(int port) {
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_nonblock(fd);
    return fd;
}

void px_accept_all(h_proxy *p, int refuse) {
    for (;;) {
        int cfd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), sfd, one = 1;
        if (cfd < 0)
            return;
        if (refuse) {
            close_fd(cfd, 1);
            p->st.refused++;
            continue;
        }
        sfd = connect_upstream(p->upstream);
        if (sfd < 0) {
            close_fd(cfd, 1); /* Redis down: the client sees a reset */
            p->st.refused++;
            continue;
        }
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        add_pair(p, cfd, sfd);
        p->st.accepted++;
    }
}

/* Reads what fd has; 0 ok, 1 EOF, -1 error. */
int px_read_side(h_proxy *p, struct pair *pr, int from_client, long long now, int dmin, int dmax,
                 int *drop) {
    char buf[65536];
    int fd = from_client ? pr->cfd : pr->sfd;
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            return 1;
        if (!from_client && *drop > 0) {
            (*drop)--;
            p->st.dropped_replies++;
            px_kill_pair(pr, px_rnd(p) & 1);
            return -2;
        }
        enqueue(p, from_client ? &pr->up : &pr->down, buf, (size_t)n, now, dmin, dmax);
        if ((size_t)n < sizeof buf)
            return 0;
    }
}
