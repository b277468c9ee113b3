/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * proxy.h - a small TCP proxy for the fault-injection suite (test/fault_*.c).
 *
 * h_proxy_start() listens on 127.0.0.1 (a free port) and relays every
 * connection to an upstream redis-server on 127.0.0.1:PORT, from one thread
 * of its own (poll loop). Point an rlock client at h_proxy_url() and the
 * proxy can then, at any moment:
 *
 *   - delay every chunk of bytes by a random time in [min, max] ms, per
 *     direction, keeping the byte order (TCP never reorders);
 *   - cut connections at random (on average one every N ms), with a reset or
 *     a close chosen at random; bytes already queued are lost, as on a real
 *     broken link;
 *   - drop the next N replies: the next N chunks coming from the server are
 *     thrown away and their connection cut, so the command ran in Redis but
 *     its reply is lost (the "executed, reply lost" case, deterministic);
 *   - refuse: cut every connection now and reset new ones at once (Redis
 *     unreachable: errors come fast);
 *   - blackhole: forward nothing in either direction, but keep reading and
 *     queueing (a stalled link: calls time out); turning it off delivers
 *     what was queued, in order, as TCP would after a partition heals.
 *
 * When a client closes its side, the bytes it sent before are still
 * delivered to Redis before the upstream side is closed (as TCP would), so a
 * command sent just before a timeout can still run.
 *
 * Thread-safe: the setters may be called from any thread. Not fork-safe:
 * only the process that started the proxy may use it (children connect to
 * its port like any other client).
 */
#ifndef RLOCK_TEST_PROXY_H
#define RLOCK_TEST_PROXY_H

typedef struct h_proxy h_proxy;

struct h_proxy_stats {
    long accepted;        /* client connections accepted */
    long cuts;            /* connections cut by random cuts or h_proxy_cut_all */
    long refused;         /* connections reset at once while refusing */
    long dropped_replies; /* server chunks dropped by h_proxy_drop_replies */
    long long bytes_up;   /* client -> server bytes delivered */
    long long bytes_down; /* server -> client bytes delivered */
    int open;             /* connections open now */
};

/* Starts a proxy to 127.0.0.1:upstream_port; fails the test if it cannot. */
h_proxy *h_proxy_start(int upstream_port);
/* "redis://127.0.0.1:PORT" of the proxy (owned by the proxy). */
const char *h_proxy_url(const h_proxy *p);
int h_proxy_port(const h_proxy *p);
/* Random delay per chunk and direction; 0, 0 = none (the default). */
void h_proxy_set_delay(h_proxy *p, int min_ms, int max_ms);
/* Random cuts, one every mean_interval_ms on average; 0 = none (default). */
void h_proxy_set_cuts(h_proxy *p, int mean_interval_ms);
/* See above. */
void h_proxy_set_refuse(h_proxy *p, int on);
void h_proxy_set_blackhole(h_proxy *p, int on);
/* The next n chunks from the server are dropped and their connection cut. */
void h_proxy_drop_replies(h_proxy *p, int n);
/* Cuts every open connection now. Returns once done. */
void h_proxy_cut_all(h_proxy *p);
void h_proxy_stats(h_proxy *p, struct h_proxy_stats *out);
/* Stops the thread, closes everything, frees p. NULL is a no-op. */
void h_proxy_stop(h_proxy *p);

#endif /* RLOCK_TEST_PROXY_H */
