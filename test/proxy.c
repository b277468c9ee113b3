/* SPDX-License-Identifier: BSD-3-Clause */
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
 *
 * This file: the public calls and the loop. The relay mechanics it drives
 * (queues, connection pairs, accepting, reading, writing, cuts) are in
 * proxy_relay.c.
 */
#include "proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_priv.h"

/* The loop's copy of the settings (taken under the mutex once a turn). */
struct loop_settings {
    int drop, dmin, dmax, cut_mean, refuse, blackhole;
};

/*
 * Takes the settings, cuts everything if asked to (or while refusing), reaps
 * dead pairs, publishes the stats and acknowledges the change. Returns the
 * stop flag.
 */
static int take_settings(h_proxy *p, struct loop_settings *s) {
    int i, stop;
    pthread_mutex_lock(&p->mu);
    s->dmin = p->dmin;
    s->dmax = p->dmax;
    if (p->cut_mean != s->cut_mean)
        p->next_cut_ms = 0;
    s->cut_mean = p->cut_mean;
    s->refuse = p->refuse;
    s->blackhole = p->blackhole;
    s->drop += p->drop;
    p->drop = 0;
    stop = p->stop;
    if (p->cut_all_gen != p->cut_all_seen || s->refuse) {
        p->cut_all_seen = p->cut_all_gen;
        px_cut_everything(p);
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
    return stop;
}

/* A random cut, one every cut_mean ms on average. */
static void random_cut(h_proxy *p, int cut_mean, long long now) {
    if (cut_mean > 0) {
        if (p->next_cut_ms == 0)
            p->next_cut_ms = now + 1 + (long long)(px_rnd(p) % (unsigned)(2 * cut_mean));
        if (now >= p->next_cut_ms) {
            if (p->npairs > 0)
                px_cut_pair(p, p->pairs[px_rnd(p) % (unsigned)p->npairs]);
            p->next_cut_ms = now + 1 + (long long)(px_rnd(p) % (unsigned)(2 * cut_mean));
        }
    }
}

/* Delivers what is due; closes a pair whose closed side has nothing left to
 * send. Returns when the loop must wake up next. */
static long long deliver_due(h_proxy *p, int cut_mean, int blackhole, long long now) {
    long long wake_at = cut_mean > 0 ? p->next_cut_ms : now + 1000;
    int i;
    for (i = 0; i < p->npairs; i++) {
        struct pair *pr = p->pairs[i];
        if (pr->dead)
            continue;
        if (!blackhole) {
            if (px_flush_q(&pr->up, pr->sfd, now, &p->st.bytes_up) < 0 ||
                px_flush_q(&pr->down, pr->cfd, now, &p->st.bytes_down) < 0) {
                px_kill_pair(pr, 0);
                continue;
            }
            if ((pr->c_eof && !pr->up.head) || (pr->s_eof && !pr->down.head)) {
                px_kill_pair(pr, 0);
                continue;
            }
            if (pr->up.head && pr->up.head->due_ms < wake_at)
                wake_at = pr->up.head->due_ms;
            if (pr->down.head && pr->down.head->due_ms < wake_at)
                wake_at = pr->down.head->due_ms;
        }
    }
    return wake_at;
}

/* Fills *fds (grown as needed) for poll(): the wake-up pipe, the listening
 * socket, then both sides of every pair. Returns how many. */
static int fill_pollfds(h_proxy *p, struct pollfd **fdsp, int *nfds_cap, int blackhole,
                        long long now) {
    struct pollfd *fds;
    int i, n;
    if (*nfds_cap < 2 + 2 * p->npairs) {
        *nfds_cap = 2 + 2 * p->npairs + 32;
        *fdsp = realloc(*fdsp, sizeof **fdsp * (size_t)*nfds_cap);
        if (!*fdsp)
            abort();
    }
    fds = *fdsp;
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
    return n;
}

/* Acts on what poll() reported for the n entries of fds. */
static void handle_events(h_proxy *p, const struct pollfd *fds, int n, struct loop_settings *s,
                          long long now) {
    char tmp[64];
    int i;
    if (fds[0].revents & POLLIN)
        while (read(p->wake[0], tmp, sizeof tmp) > 0)
            ;
    if (fds[1].revents & POLLIN)
        px_accept_all(p, s->refuse);
    for (i = 0; i < (n - 2) / 2; i++) {
        struct pair *pr = p->pairs[i];
        short cr = fds[2 + 2 * i].revents, sr = fds[3 + 2 * i].revents;
        int r;
        if (pr->dead)
            continue;
        if (cr & (POLLIN | POLLHUP | POLLERR)) {
            r = px_read_side(p, pr, 1, now, s->dmin, s->dmax, &s->drop);
            if (r == 1)
                pr->c_eof = 1;
            else if (r == -1)
                px_kill_pair(pr, 0);
        }
        if (!pr->dead && (sr & (POLLIN | POLLHUP | POLLERR))) {
            r = px_read_side(p, pr, 0, now, s->dmin, s->dmax, &s->drop);
            if (r == 1)
                pr->s_eof = 1;
            else if (r == -1)
                px_kill_pair(pr, 0);
        }
    }
}

static void *proxy_main(void *arg) {
    h_proxy *p = arg;
    struct pollfd *fds = NULL;
    int nfds_cap = 0;
    struct loop_settings s = {0};

    for (;;) {
        long long now, wake_at;
        int n, timeout;

        if (take_settings(p, &s))
            break;
        now = h_now_ms();
        random_cut(p, s.cut_mean, now);
        wake_at = deliver_due(p, s.cut_mean, s.blackhole, now);
        n = fill_pollfds(p, &fds, &nfds_cap, s.blackhole, now);
        timeout = (int)(wake_at - now);
        if (timeout < 0)
            timeout = 0;
        if (timeout > 1000)
            timeout = 1000;
        if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR)
            abort();
        now = h_now_ms();
        handle_events(p, fds, n, &s, now);
    }

    for (int i = 0; i < p->npairs; i++) {
        px_kill_pair(p->pairs[i], 0);
        free(p->pairs[i]);
    }
    free(p->pairs);
    p->pairs = NULL;
    p->npairs = 0;
    free(fds);
    return NULL;
}

/* Applies a settings change: wakes the loop and waits until it has seen it. */
static void apply_locked(h_proxy *p) {
    unsigned want = ++p->gen;
    ssize_t w = write(p->wake[1], "x", 1);
    (void)w;
    while ((int)(p->ack_gen - want) < 0)
        pthread_cond_wait(&p->cv, &p->mu);
}

h_proxy *h_proxy_start(int upstream_port) {
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

const char *h_proxy_url(const h_proxy *p) {
    return p->url;
}

int h_proxy_port(const h_proxy *p) {
    return p->port;
}

void h_proxy_set_delay(h_proxy *p, int min_ms, int max_ms) {
    pthread_mutex_lock(&p->mu);
    p->dmin = min_ms < 0 ? 0 : min_ms;
    p->dmax = max_ms < p->dmin ? p->dmin : max_ms;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_set_cuts(h_proxy *p, int mean_interval_ms) {
    pthread_mutex_lock(&p->mu);
    p->cut_mean = mean_interval_ms < 0 ? 0 : mean_interval_ms;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_set_refuse(h_proxy *p, int on) {
    pthread_mutex_lock(&p->mu);
    p->refuse = on;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_set_blackhole(h_proxy *p, int on) {
    pthread_mutex_lock(&p->mu);
    p->blackhole = on;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_drop_replies(h_proxy *p, int n) {
    pthread_mutex_lock(&p->mu);
    p->drop += n;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_cut_all(h_proxy *p) {
    pthread_mutex_lock(&p->mu);
    p->cut_all_gen++;
    apply_locked(p);
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_stats(h_proxy *p, struct h_proxy_stats *out) {
    pthread_mutex_lock(&p->mu);
    apply_locked(p);
    *out = p->shared;
    pthread_mutex_unlock(&p->mu);
}

void h_proxy_stop(h_proxy *p) {
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
