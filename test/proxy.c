/*
 * proxy.c - a small TCP proxy for the fault-injection suite (see proxy.h).
 *
 * One thread runs a poll() loop over the listening socket, a wake-up pipe and
 * both sockets of every relayed connection. Bytes read from one side are
 * queued as chunks with a due time (now + a random delay, never earlier than
 * the chunk before it, so order is kept) and written to the other side once
 * due. Settings change under the mutex; every setter waits until the loop has
 * taken the change into account, so that "when h_proxy_set_blackhole(p, 1)
 * returns, nothing more is forwarded" holds.
 */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

struct chunk {
    struct chunk *next;
    long long due_ms;
    size_t len, off;
    char data[];
};

struct dirq {
    struct chunk *head, *tail;
    long long last_due;
};

struct pair {
    int cfd, sfd;     /* client side, server side */
    struct dirq up;   /* client -> server */
    struct dirq down; /* server -> client */
    int c_eof, s_eof; /* that side closed: read no more from it */
    int dead;
};

struct h_proxy {
    pthread_t thread;
    int lfd, port, upstream;
    char url[64];
    int wake[2];

    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* guarded by mu */
    int dmin, dmax, cut_mean, refuse, blackhole, drop, stop;
    unsigned gen, ack_gen, cut_all_gen;
    struct h_proxy_stats shared;

    /* the proxy thread's own */
    struct pair **pairs;
    int npairs, cap;
    unsigned long long rng;
    long long next_cut_ms;
    unsigned cut_all_seen;
    struct h_proxy_stats st;
};

static unsigned rnd(h_proxy *p)
{
    p->rng ^= p->rng << 13;
    p->rng ^= p->rng >> 7;
    p->rng ^= p->rng << 17;
    return (unsigned)(p->rng >> 11);
}

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void free_q(struct dirq *q)
{
    struct chunk *c = q->head, *n;
    for (; c; c = n) {
        n = c->next;
        free(c);
    }
    q->head = q->tail = NULL;
}

/* Closes fd; with reset, the peer gets an RST instead of a FIN. */
static void close_fd(int fd, int reset)
{
    if (fd < 0)
        return;
    if (reset) {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(fd);
}

static void kill_pair(struct pair *pr, int reset)
{
    if (pr->dead)
        return;
    close_fd(pr->cfd, reset);
    close_fd(pr->sfd, reset);
    pr->cfd = pr->sfd = -1;
    free_q(&pr->up);
    free_q(&pr->down);
    pr->dead = 1;
}

static void cut_pair(h_proxy *p, struct pair *pr)
{
    if (pr->dead)
        return;
    kill_pair(pr, rnd(p) & 1);
    p->st.cuts++;
}

static void cut_everything(h_proxy *p)
{
    int i;
    for (i = 0; i < p->npairs; i++)
        cut_pair(p, p->pairs[i]);
}

static void enqueue(h_proxy *p, struct dirq *q, const char *buf, size_t n, long long now,
                    int dmin, int dmax)
{
    struct chunk *c = malloc(sizeof *c + n);
    long long due = now;
    if (!c)
        abort();
    if (dmax > 0)
        due += dmin + (dmax > dmin ? (long long)(rnd(p) % (unsigned)(dmax - dmin + 1)) : 0);
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
static int flush_q(struct dirq *q, int fd, long long now, long long *bytes)
{
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

static void add_pair(h_proxy *p, int cfd, int sfd)
{
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

static int connect_upstream(int port)
{
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

static void accept_all(h_proxy *p, int refuse)
{
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
static int read_side(h_proxy *p, struct pair *pr, int from_client, long long now, int dmin,
                     int dmax, int *drop)
{
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
            kill_pair(pr, rnd(p) & 1);
            return -2;
        }
        enqueue(p, from_client ? &pr->up : &pr->down, buf, (size_t)n, now, dmin, dmax);
        if ((size_t)n < sizeof buf)
            return 0;
    }
}

static void *proxy_main(void *arg)
{
    h_proxy *p = arg;
    struct pollfd *fds = NULL;
    int nfds_cap = 0, drop = 0;
    int dmin = 0, dmax = 0, cut_mean = 0, refuse = 0, blackhole = 0;

    for (;;) {
        long long now, wake_at;
        int i, n, timeout, stop;
        char tmp[64];

        /* Take the settings. */
        pthread_mutex_lock(&p->mu);
        dmin = p->dmin;
        dmax = p->dmax;
        if (p->cut_mean != cut_mean)
            p->next_cut_ms = 0;
        cut_mean = p->cut_mean;
        refuse = p->refuse;
        blackhole = p->blackhole;
        drop += p->drop;
        p->drop = 0;
        stop = p->stop;
        if (p->cut_all_gen != p->cut_all_seen || refuse) {
            p->cut_all_seen = p->cut_all_gen;
            cut_everything(p);
        }
        /* Reap dead pairs. */
        for (i = 0; i < p->npairs;) {
            if (p->pairs[i]->dead) {
                free(p->pairs[i]);
                p->pairs[i] = p->pairs[--p->npairs];
            } else {
                i++;
            }
        }
        p->st.open = p->npairs;
        p->shared = p->st;
        p->ack_gen = p->gen;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;

        now = h_now_ms();
        /* A random cut. */
        if (cut_mean > 0) {
            if (p->next_cut_ms == 0)
                p->next_cut_ms = now + 1 + (long long)(rnd(p) % (unsigned)(2 * cut_mean));
            if (now >= p->next_cut_ms) {
                if (p->npairs > 0)
                    cut_pair(p, p->pairs[rnd(p) % (unsigned)p->npairs]);
                p->next_cut_ms = now + 1 + (long long)(rnd(p) % (unsigned)(2 * cut_mean));
            }
        }
        /* Deliver what is due; close a pair whose closed side has nothing left to send. */
        wake_at = cut_mean > 0 ? p->next_cut_ms : now + 1000;
        for (i = 0; i < p->npairs; i++) {
            struct pair *pr = p->pairs[i];
            if (pr->dead)
                continue;
            if (!blackhole) {
                if (flush_q(&pr->up, pr->sfd, now, &p->st.bytes_up) < 0 ||
                    flush_q(&pr->down, pr->cfd, now, &p->st.bytes_down) < 0) {
                    kill_pair(pr, 0);
                    continue;
                }
                if ((pr->c_eof && !pr->up.head) || (pr->s_eof && !pr->down.head)) {
                    kill_pair(pr, 0);
                    continue;
                }
                if (pr->up.head && pr->up.head->due_ms < wake_at)
                    wake_at = pr->up.head->due_ms;
                if (pr->down.head && pr->down.head->due_ms < wake_at)
                    wake_at = pr->down.head->due_ms;
            }
        }

        /* Poll. */
        if (nfds_cap < 2 + 2 * p->npairs) {
            nfds_cap = 2 + 2 * p->npairs + 32;
            fds = realloc(fds, sizeof *fds * (size_t)nfds_cap);
            if (!fds)
                abort();
        }
        fds[0].fd = p->wake[0];
        fds[0].events = POLLIN;
        fds[1].fd = p->lfd;
        fds[1].events = POLLIN;
        n = 2;
        for (i = 0; i < p->npairs; i++) {
            struct pair *pr = p->pairs[i];
            short ce = 0, se = 0;
            if (!pr->dead) {
                if (!pr->c_eof)
                    ce |= POLLIN;
                if (!pr->s_eof)
                    se |= POLLIN;
                if (!blackhole && pr->down.head && pr->down.head->due_ms <= now)
                    ce |= POLLOUT;
                if (!blackhole && pr->up.head && pr->up.head->due_ms <= now)
                    se |= POLLOUT;
            }
            fds[n].fd = pr->dead ? -1 : pr->cfd;
            fds[n].events = ce;
            fds[n].revents = 0;
            fds[n + 1].fd = pr->dead ? -1 : pr->sfd;
            fds[n + 1].events = se;
            fds[n + 1].revents = 0;
            n += 2;
        }
        timeout = (int)(wake_at - now);
        if (timeout < 0)
            timeout = 0;
        if (timeout > 1000)
            timeout = 1000;
        if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR)
            abort();
        now = h_now_ms();
        if (fds[0].revents & POLLIN)
            while (read(p->wake[0], tmp, sizeof tmp) > 0)
                ;
        if (fds[1].revents & POLLIN)
            accept_all(p, refuse);
        for (i = 0; i < (n - 2) / 2; i++) {
            struct pair *pr = p->pairs[i];
            short cr = fds[2 + 2 * i].revents, sr = fds[3 + 2 * i].revents;
            int r;
            if (pr->dead)
                continue;
            if (cr & (POLLIN | POLLHUP | POLLERR)) {
                r = read_side(p, pr, 1, now, dmin, dmax, &drop);
                if (r == 1)
                    pr->c_eof = 1;
                else if (r == -1)
                    kill_pair(pr, 0);
            }
            if (!pr->dead && (sr & (POLLIN | POLLHUP | POLLERR))) {
                r = read_side(p, pr, 0, now, dmin, dmax, &drop);
                if (r == 1)
                    pr->s_eof = 1;
                else if (r == -1)
                    kill_pair(pr, 0);
            }
        }
    }

    for (int i = 0; i < p->npairs; i++) {
        kill_pair(p->pairs[i], 0);
        free(p->pairs[i]);
    }
    free(p->pairs);
    p->pairs = NULL;
    p->npairs = 0;
    free(fds);
    return NULL;
}

/* Applies a settings change: wakes the loop and waits until it has seen it. */
static void apply_locked(h_proxy *p)
{
    unsigned want = ++p->gen;
    ssize_t w = write(p->wake[1], "x", 1);
    (void)w;
    while ((int)(p->ack_gen - want) < 0)
        pthread_cond_wait(&p->cv, &p->mu);
}

h_proxy *h_proxy_start(int upstream_port)
{
    h_proxy *p = calloc(1, sizeof *p);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int one = 1, rc;

    if (!p)
        abort();
    p->upstream = upstream_port;
    p->rng = (unsigned long long)h_now_us() * 0x9e3779b97f4a7c15ULL + (unsigned long long)getpid();
    if (p->rng == 0)
        p->rng = 1;
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (p->lfd < 0)
        H_FAIL("proxy: socket: %s", strerror(errno));
    setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(p->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(p->lfd, 512) != 0 ||
        getsockname(p->lfd, (struct sockaddr *)&a, &len) != 0)
        H_FAIL("proxy: bind/listen: %s", strerror(errno));
    p->port = ntohs(a.sin_port);
    snprintf(p->url, sizeof p->url, "redis://127.0.0.1:%d", p->port);
    if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0)
        H_FAIL("proxy: pipe: %s", strerror(errno));
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    rc = pthread_create(&p->thread, NULL, proxy_main, p);
    if (rc != 0)
        H_FAIL("proxy: pthread_create: %s", strerror(rc));
    return p;
}

const char *h_proxy_url(const h_proxy *p)
{
    return p->url;
}

int h_proxy_port(const h_proxy *p)
{
    return p->port;
}

void h_proxy_set_delay(h_proxy *p, int min_ms, int max_ms)
{
    pthread_mutex_lock(&p->mu);
    p->dmin = min_ms < 0 ? 0 : min_ms;
    p->dmax = max_ms < p->dmin ? p->dmin : max_ms;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_set_cuts(h_proxy *p, int mean_interval_ms)
{
    pthread_mutex_lock(&p->mu);
    p->cut_mean = mean_interval_ms < 0 ? 0 : mean_interval_ms;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_set_refuse(h_proxy *p, int on)
{
    pthread_mutex_lock(&p->mu);
    p->refuse = on;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_set_blackhole(h_proxy *p, int on)
{
    pthread_mutex_lock(&p->mu);
    p->blackhole = on;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_drop_replies(h_proxy *p, int n)
{
    pthread_mutex_lock(&p->mu);
    p->drop += n;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_cut_all(h_proxy *p)
{
    pthread_mutex_lock(&p->mu);
    p->cut_all_gen++;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_stats(h_proxy *p, struct h_proxy_stats *out)
{
    pthread_mutex_lock(&p->mu);
    apply_locked(p);
    *out = p->shared;
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_stop(h_proxy *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    close(p->lfd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
