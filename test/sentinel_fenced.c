/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sentinel_fenced.c - the fenced lock's counter across a Sentinel
 * failover, against a real master, two replicas and three sentinels of the
 * test's own (harness/sentinel.c), the master killed with SIGKILL -- what
 * rlock.h and docs/failure-modes.md say about failovers:
 *
 *   acknowledged   replica_acks 2: every acquisition's INCR is on both
 *                  replicas before the call returns, so the promoted one
 *                  goes on from the last token handed out (no going back;
 *                  the token after it is taken by a client without
 *                  replica_acks: one replica is left)
 *   unreplicated   both replicas cut off, no replica_acks: the promoted
 *                  replica never saw the INCRs and the counter starts
 *                  again -- the token goes backwards, as documented
 *
 * One set-up per test. Durations are scaled by TEST_TIMEOUT_SCALE.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

static void on_event(const rlock_event *ev, void *arg) {
    if (ev->kind == RLOCK_EVENT_MASTER_SWITCHED) {
        atomic_fetch_add((atomic_int *)arg, 1);
        printf("      MASTER_SWITCHED %s\n", ev->detail);
    }
}

static rlock_client *open_sentinel(const h_sentinels *hs, int replica_acks, atomic_int *switched) {
    rlock_config cfg;
    h_config(&cfg);
    cfg.url = hs->url;
    cfg.replica_acks = replica_acks;
    cfg.replica_ack_timeout_ms = (int)H_MS(2000);
    cfg.retry_attempts = 20;
    cfg.retry_interval_ms = 250;
    cfg.on_event = on_event;
    cfg.callback_arg = switched;
    return h_open_config(&cfg);
}

/* n lock/unlock cycles on l; returns the last token, checking each is the next number. */
static long long take_tokens(rlock *l, int n, long long first) {
    long long token = 0;
    for (int i = 0; i < n; i++) {
        H_ASSERT_RC(rlock_try_lock_fenced(l, 0, RLOCK_LEASE_WATCHDOG, &token), RLOCK_OK);
        assert_int_equal(token, first + i);
        H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    }
    return token;
}

/* Kills the master and waits until the sentinels name another one and the client switched. */
static void kill_master(h_sentinels *hs, atomic_int *switched) {
    h_server_kill(hs->data[0]);
    H_WAIT_FOR(atomic_load(switched) >= 1, 15000);
    h_server *now = NULL;
    H_WAIT_FOR((now = h_sentinels_named_master(hs, 0)) != NULL && now != hs->data[0], 15000);
}

/* The first token after the failover (waits out the switch, re-sends included). */
static long long token_after(rlock *l) {
    long long token = 0;
    H_ASSERT_RC(rlock_try_lock_fenced(l, H_MS(10000), RLOCK_LEASE_WATCHDOG, &token), RLOCK_OK);
    H_ASSERT_RC(rlock_unlock(l), RLOCK_OK);
    return token;
}

static void test_acknowledged_counter_survives(void **state) {
    h_sentinels *hs = *state;
    atomic_int switched = 0;
    rlock_client *c = open_sentinel(hs, 2, &switched);
    /* One replica is left after the kill: a client asking for 2 acknowledgements
     * gets none there, so this one (no replica_acks) takes the token after it. */
    atomic_int switched_after = 0;
    rlock_client *after = open_sentinel(hs, 0, &switched_after);
    const char *name = h_unique_name("sentinel-fence-acked");
    rlock *l = NULL, *la = NULL;
    H_ASSERT_RC(rlock_get_fenced(c, name, &l), RLOCK_OK);
    H_ASSERT_RC(rlock_get_fenced(after, name, &la), RLOCK_OK);

    long long last = take_tokens(l, 5, 1);
    kill_master(hs, &switched); /* no WAIT of the test's own: replica_acks did it */
    long long next = token_after(la);
    printf("      replica_acks 2: token %lld before the kill, %lld after the failover\n", last,
           next);
    assert_int_equal(next, last + 1);

    rlock_free(la);
    rlock_client_close(after);
    rlock_free(l);
    rlock_client_close(c);
}

static void test_unreplicated_counter_goes_back(void **state) {
    h_sentinels *hs = *state;
    atomic_int switched = 0;
    rlock_client *c = open_sentinel(hs, 0, &switched);
    rlock *l = NULL;
    H_ASSERT_RC(rlock_get_fenced(c, h_unique_name("sentinel-fence-lost"), &l), RLOCK_OK);

    h_replica_cut(hs->data[1]);
    h_replica_cut(hs->data[2]);
    long long last = take_tokens(l, 3, 1);
    kill_master(hs, &switched);
    long long next = token_after(l);
    printf("      replicas cut off: token %lld before the kill, %lld after the failover\n", last,
           next);
    assert_int_equal(next, 1); /* backwards: a resource that saw 3 refuses it */

    rlock_free(l);
    rlock_client_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        H_SENTINEL_TEST(test_acknowledged_counter_survives),
        H_SENTINEL_TEST(test_unreplicated_counter_goes_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
