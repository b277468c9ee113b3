/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel.h - a replicated set-up of the tests' own: a master, two
 * replicas and three sentinels on 127.0.0.1 (../shared/research/topology.md
 * section 3a: peers pre-declared, ready in well under a second), and the
 * faults a Sentinel test needs (failover, a replica cut off).
 */
#ifndef RLOCK_TEST_HARNESS_SENTINEL_H
#define RLOCK_TEST_HARNESS_SENTINEL_H

#include "server.h"

#define H_SENTINEL_MASTER_NAME "mymaster"

typedef struct h_sentinels {
    h_server *data[3];      /* data[0] starts as master, data[1..2] as its replicas */
    h_server *sentinel[3];
    char url[256];          /* redis-sentinel://127.0.0.1:P1,...,127.0.0.1:P3/mymaster */
} h_sentinels;

/*
 * Starts the set-up and waits until it is ready: both replicas linked up,
 * every sentinel sees the other two and both replicas. Fails the test if it
 * is not ready within 15 s (scaled).
 */
h_sentinels *h_sentinels_start(void);
/* The same with sentinels that require password (url: ?sentinel_password=...). */
h_sentinels *h_sentinels_start_password(const char *password);
/* Stops every process and frees hs. NULL is a no-op. */
void h_sentinels_stop(h_sentinels *hs);
/* The data server whose port the sentinels name as master now (sentinel i). */
h_server *h_sentinels_named_master(h_sentinels *hs, int i);
/* The data server that says ROLE master (the first one, if several do). */
h_server *h_sentinels_role_master(h_sentinels *hs);
/*
 * SENTINEL FAILOVER on the first live sentinel, then waits until a different server says
 * ROLE master and the sentinels name it. Returns it. Fails after 15 s.
 */
h_server *h_sentinels_failover(h_sentinels *hs);
/* Waits until every sentinel names data server s as master (after a kill). */
void h_sentinels_wait_named(h_sentinels *hs, const h_server *s, long long timeout_ms);
/* Keeps replica r from receiving anything (masterauth bogus, its master link killed). */
void h_replica_cut(h_server *r);
/* Lets it receive again. */
void h_replica_heal(h_server *r);
/* The replicas of master m that report master_link_status:up (by INFO). */
int h_replicas_linked(const h_server *m);

/* cmocka fixtures: *state = a fresh set-up (h_sentinels *), per test. */
int h_sentinels_fixture_start(void **state);
int h_sentinels_fixture_stop(void **state);
/* A cmocka test with a set-up of its own (needs cmocka.h). */
#define H_SENTINEL_TEST(fn)                                                                        \
    cmocka_unit_test_setup_teardown(fn, h_sentinels_fixture_start, h_sentinels_fixture_stop)

#endif /* RLOCK_TEST_HARNESS_SENTINEL_H */
