/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * proxy_priv.h - what the two halves of the test proxy share: proxy.c (the
 * public calls of proxy.h and the proxy thread's loop) and proxy_relay.c
 * (chunk queues, relayed connection pairs, accepting, reading, writing,
 * cutting). The tests use proxy.h only.
 */
#ifndef RLOCK_TEST_PROXY_PRIV_H
#define RLOCK_TEST_PROXY_PRIV_H

#include <pthread.h>
#include <stddef.h>

#include "proxy.h"

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

/* The proxy's random numbers (xorshift; the proxy thread's own). */
unsigned px_rnd(h_proxy *p);
/* Closes both sides of pr (with reset, the peers get an RST instead of a FIN)
 * and frees what was queued. */
void px_kill_pair(struct pair *pr, int reset);
/* A cut: kills pr with a reset or a close chosen at random, and counts it. */
void px_cut_pair(h_proxy *p, struct pair *pr);
void px_cut_everything(h_proxy *p);
/* Writes due chunks of q to fd. Returns -1 if the connection broke. */
int px_flush_q(struct dirq *q, int fd, long long now, long long *bytes);
/* Accepts every pending connection and relays it to the upstream server, or
 * resets it at once if refuse is set or the server cannot be reached. */
void px_accept_all(h_proxy *p, int refuse);
/*
 * Reads what one side of pr has and queues it for the other side, each chunk
 * delayed by dmin..dmax ms. 0 ok, 1 EOF, -1 error; -2 if a chunk from the
 * server was dropped (*drop > 0, counted down) and pr killed.
 */
int px_read_side(h_proxy *p, struct pair *pr, int from_client, long long now, int dmin, int dmax,
                 int *drop);

#endif /* RLOCK_TEST_PROXY_PRIV_H */
