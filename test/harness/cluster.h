/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster.h - a Redis Cluster of the tests' own: 3 masters and 3 replicas on
 * 127.0.0.1 (../shared/research/topology.md section 3b: explicit bus ports,
 * node timeout 1000 ms, created with redis-cli --cluster create, ready in
 * about 2 s), the slot rule computed locally, and the changes a Cluster test
 * needs: a slot migrated in explicit phases, a master killed, a coordinated
 * CLUSTER FAILOVER, a replica cut off (h_replica_cut from sentinel.h).
 *
 * Who is master is read from the nodes (ROLE, CLUSTER NODES), never assumed
 * from the index: redis-cli shuffles replicas, and failovers move roles.
 * Nodes killed by a test (h_server_pid() == 0) are skipped by every helper.
 */
#ifndef RLOCK_TEST_HARNESS_CLUSTER_H
#define RLOCK_TEST_HARNESS_CLUSTER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "rlock.h"
#include "server.h"

#define H_CLUSTER_NODES 6
#define H_CLUSTER_MASTERS 3
#define H_CLUSTER_SLOTS 16384

typedef struct h_cluster {
    int nodes;                       /* H_CLUSTER_NODES, or H_CLUSTER_MASTERS alone */
    h_server *node[H_CLUSTER_NODES]; /* 3 start as masters, 3 as replicas (if nodes is 6) */
    char id[H_CLUSTER_NODES][41];    /* CLUSTER MYID of each node */
    int bus_port[H_CLUSTER_NODES];
    char url[256]; /* redis-cluster://127.0.0.1:P0,127.0.0.1:P1 */
} h_cluster;

/*
 * Starts six cluster-enabled redis-servers (free ports and bus ports, retried
 * if taken meanwhile), creates the cluster (3 masters, 1 replica each) and
 * waits until it is settled (h_cluster_settled with links). Fails the test
 * after 20 s (scaled).
 */
h_cluster *h_cluster_start(void);
/* The same with 3 masters and no replica (node[3..5] NULL), for benchmarks: what
 * replication costs. The helpers below skip the missing nodes. */
h_cluster *h_cluster_start_masters(void);
/* Stops every node (by pid, checked in /proc first) and frees hc. NULL: no-op. */
void h_cluster_stop(h_cluster *hc);

/* CRC16-XMODEM of len bytes. */
unsigned h_crc16(const char *s, size_t len);
/* The slot of a key, computed here: the hash tag rule (text between the
 * first '{' and the next '}', if not empty), CRC16 mod 16384. */
int h_slot(const char *key, size_t len);
/* The slot node s says (CLUSTER KEYSLOT). */
int h_cluster_keyslot(const h_server *s, const char *key, size_t len);

/* Index of s in hc->node, or -1. */
int h_cluster_index(const h_cluster *hc, const h_server *s);
/* 1 if s answers ROLE master (0 if not, or if it does not answer). */
int h_cluster_says_master(const h_server *s);
/* The live replica whose ROLE names master's port (NULL if none). */
h_server *h_cluster_replica_of(const h_cluster *hc, const h_server *master);
/*
 * The master owning slot now: the live node whose own CLUSTER NODES line
 * ("myself") is a master holding the slot (the highest config epoch if
 * several claim it). NULL if none does.
 */
h_server *h_cluster_owner(const h_cluster *hc, int slot);
/* The first slot of the first range s itself says it owns (its CLUSTER
 * NODES "myself" line), or -1 if it is no master of any slot. */
int h_cluster_first_slot(const h_server *s);
/* The live masters owning slots, in node order; returns how many (<= 6). */
int h_cluster_masters(const h_cluster *hc, h_server **out);
/*
 * Writes into buf "PREFIX:lock-N" with the smallest N whose slot master owns
 * now (searching N = 0, 1, ...). Returns buf.
 */
const char *h_cluster_name_on(const h_cluster *hc, const h_server *master, const char *prefix,
                              char *buf, size_t size);
/*
 * Every live node says cluster_state:ok and all of them report the same
 * slot ranges and masters (CLUSTER SLOTS); with links, every live replica
 * also reports master_link_status:up.
 */
int h_cluster_settled(const h_cluster *hc, int links);
/* Prints each node's cluster_state and own CLUSTER NODES line (on failures). */
void h_cluster_dump(const h_cluster *hc);
/* Waits for h_cluster_settled; fails the test after timeout_ms (scaled). */
void h_cluster_wait_settled(const h_cluster *hc, int links, long long timeout_ms);

/* ---- a slot moved in explicit phases ---------------------------------- */

typedef struct h_migration {
    int slot;
    h_server *source, *target;
    int moved; /* keys MIGRATEd so far */
} h_migration;
/* Phase 1: target CLUSTER SETSLOT s IMPORTING <source>, source SETSLOT s
 * MIGRATING <target>. The source is the slot's owner now. */
void h_cluster_migrate_begin(const h_cluster *hc, int slot, h_server *target, h_migration *m);
/* Phase 2: MIGRATE 127.0.0.1 <target> "" 0 5000 KEYS ... until the source
 * has no key left in the slot. Returns the keys moved by this call. */
int h_cluster_migrate_keys(const h_cluster *hc, h_migration *m);
/* Phase 3: SETSLOT s NODE <target> on the target, the source and every
 * other live master; waits until each of them says the target owns it. */
void h_cluster_migrate_finish(const h_cluster *hc, h_migration *m);
/* All three phases. */
void h_cluster_migrate(const h_cluster *hc, int slot, h_server *target);

/* ---- failures and failovers -------------------------------------------- */

/*
 * kill -9 of master, then waits (20 s, scaled) until its replica says ROLE
 * master and owns master's slots, and every live node says cluster_state:ok.
 * Returns the promoted replica.
 */
h_server *h_cluster_kill_master(const h_cluster *hc, h_server *master);
/*
 * CLUSTER FAILOVER on replica (asked again while refused), then waits (20 s,
 * scaled) until it owns its old master's slots, the old master says ROLE
 * slave, and every live node says cluster_state:ok. Returns replica.
 */
h_server *h_cluster_failover(const h_cluster *hc, h_server *replica);
/*
 * The watchdog timeout for holds that must survive h_cluster_failover. The
 * old master pauses its clients' writes, renewals included, until the replica
 * has caught up and won its election, for up to CLUSTER_MF_TIMEOUT (5 s,
 * Redis's cluster.h); the promoted replica then expires a key whose
 * renewal was held up longer than its lease. 15 s renews every 5 s: the last
 * renewal before the pause plus the whole pause is 10 s, 5 s inside the lease.
 * (On an idle machine the pause lasts milliseconds; a loaded CI machine
 * measured 4.1 s, and a 3 s watchdog then lost a hold.)
 */
#define H_FAILOVER_WATCHDOG_MS 15000

/* ---- lock keys on a node ------------------------------------------------ */

/* PTTL of name on node after ASKING (so a key in an importing slot is
 * seen); -2 absent, -1 no TTL, -3 if the node redirects (MOVED). */
long long h_cluster_pttl(const h_server *node, const char *name, size_t len);
/*
 * Waits until node shows a renewal of name: its PTTL (after ASKING) rises by
 * more than a sixth of the lease wd. Fails the test, naming what, if the key
 * is not on node or nothing rises within within_ms.
 */
void h_cluster_wait_renewed(const h_server *node, const char *name, long long wd,
                            long long within_ms, const char *what);
/* CLUSTER COUNTKEYSINSLOT slot on node (its own keys only). */
long long h_cluster_keys_in_slot(const h_server *node, int slot);
/* 1 if name is on a replica of the cluster (READONLY + EXISTS on r). */
int h_cluster_replica_has(const h_server *r, const char *name, size_t len);

/* ---- librlock clients on the cluster ------------------------------------ */

/* What a client's callbacks saw (the event thread writes, the test reads). */
typedef struct h_cseen {
    const char *who;       /* printed with each notable event ("A", "B"...) */
    atomic_int kinds[8];   /* on_event calls per rlock_event_kind */
    atomic_int lost_calls; /* on_lock_lost calls */
    atomic_int printed;    /* RENEWAL_FAILED / CONNECTION_LOST lines printed */
    atomic_int muted;      /* set by h_cseen_mute_all: records and prints nothing */
    struct h_cseen *next;  /* recorders not freed yet */
} h_cseen;
/*
 * h_config(), url = hc->url, watchdog_timeout_ms wd, pubsub_mode, retries
 * (20 x up to 250 ms: a failover takes ~2.5 s), seen (may be NULL) as
 * on_event and on_lock_lost recorder.
 */
void h_cluster_config(const h_cluster *hc, rlock_config *cfg, long long wd, int pubsub_mode,
                      h_cseen *seen);
/* Opens that client; fails the test on error. */
rlock_client *h_cluster_open(const h_cluster *hc, long long wd, int pubsub_mode, h_cseen *seen);
/* A recorder on the heap (a failed test leaves its client running: the
 * recorder must outlive the test's stack frame); free it after the close. */
h_cseen *h_cseen_new(const char *who);
void h_cseen_free(h_cseen *seen);
/* Mutes every recorder not freed yet: those of a failed test, whose clients
 * still run (h_cluster_fixture_stop calls it, so a later test's output is
 * not mixed with theirs). */
void h_cseen_mute_all(void);
/* Loss reports seen: LOCK_LOST events + on_lock_lost calls. */
int h_cseen_lost(h_cseen *seen);

/*
 * A thread of the test's own that waits for a lock (rlock_try_lock with
 * wait_ms and a watchdog lease), records when it returned (done_ms), holds
 * it hold_ms (0) and unlocks it: ownership is
 * per thread, so the thread that took it gives it back.
 */
typedef struct h_cwaiter {
    rlock *lock;
    long long wait_ms;
    long long started_ms;
    int rc;               /* of rlock_try_lock, once done_ms is set */
    int unlock_rc;        /* of rlock_unlock, once finished */
    atomic_llong done_ms; /* h_now_ms() when try_lock returned; 0 before */
    atomic_int finished;
    pthread_t th;
} h_cwaiter;
/* Starts it (on the heap, like h_cseen: a failed test may leave it running). */
h_cwaiter *h_cwaiter_start(rlock *lock, long long wait_ms);
long long h_cwaiter_done_ms(h_cwaiter *w);
/* Waits for the thread to finish (fails the test after timeout_ms, scaled), joins it. */
void h_cwaiter_join(h_cwaiter *w, long long timeout_ms);
/* Frees a joined waiter. */
void h_cwaiter_free(h_cwaiter *w);

/* cmocka fixtures: *state = a fresh cluster (h_cluster *), per test. */
int h_cluster_fixture_start(void **state);
int h_cluster_fixture_stop(void **state);
/* A cmocka test with a cluster of its own (needs cmocka.h). */
#define H_CLUSTER_TEST(fn)                                                                         \
    cmocka_unit_test_setup_teardown(fn, h_cluster_fixture_start, h_cluster_fixture_stop)

#endif /* RLOCK_TEST_HARNESS_CLUSTER_H */
