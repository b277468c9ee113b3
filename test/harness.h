/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness.h - shared helpers for rlock's tests, benchmarks and demo: the one
 * header they include. Each concern has its header and source in harness/:
 *
 *   fail     h_fail, H_FAIL, H_ASSERT_RC/BETWEEN, H_WAIT_FOR, H_POLL_UNTIL
 *   timing   h_now_ms, h_sleep_ms, h_scaled / H_MS (TEST_TIMEOUT_SCALE)
 *   redis    the second Redis client: h_url, h_redis, h_cmd*, commandstats
 *   lockkey  lock keys and channels in Redis: H_ASSERT_LOCK_IS, h_numsub,
 *            raw subscribers, foreign holders, renewals
 *   client   librlock clients: h_unique_name, h_open*, h_lost, timed calls
 *   lossrec  lost locks counted per name: on_lock_lost calls, LOCK_LOST events
 *   eventlog every on_event and on_lock_lost call of a client, in order
 *   loglines every line of a client's log callback, in order
 *   actor    h_actor threads and the h_op_* calls they run
 *   child    forked processes, H_CHILD_CHECK, h_child and its line protocol
 *   server   redis-servers of our own (h_server_*) and their cmocka fixtures
 *   sentinel a master, two replicas and three sentinels (h_sentinels_*)
 *   cluster  3 masters + 3 replicas in cluster mode (h_cluster_*): the slot
 *            rule, slot migration in phases, kill, CLUSTER FAILOVER
 *   exclusion processes x threads contending for one lock, checking in
 *            shared memory that no two hold it at once (h_excl_*)
 *   tool     rlockctl run as a process (h_tool_run*), jq on its --json
 *
 * The harness does not depend on cmocka (the benchmarks and the demo link it
 * without -lcmocka). When the program is linked with cmocka, a harness
 * failure fails the current cmocka test (cmocka's _fail(), found through a
 * weak reference); otherwise it prints the message and aborts. In a forked
 * child a harness failure prints the message and exits with status 99
 * (h_child_exit); on a thread other than the main one it aborts. So: call
 * assertions and the failing h_* helpers from the test's main thread, and
 * report results from helper threads and child processes through variables /
 * exit codes.
 *
 * Every deadline used by the tests goes through h_scaled(), which multiplies
 * by the environment's TEST_TIMEOUT_SCALE (default 1; valgrind uses 10).
 *
 * Tests that count commands (INFO commandstats) assume nobody else uses the
 * test server meanwhile: scripts/with-redis.sh gives each run its own.
 */
#ifndef RLOCK_TEST_HARNESS_H
#define RLOCK_TEST_HARNESS_H

#include "harness/fail.h"
#include "harness/timing.h"
#include "harness/redis.h"
#include "harness/lockkey.h"
#include "harness/client.h"
#include "harness/lossrec.h"
#include "harness/eventlog.h"
#include "harness/loglines.h"
#include "harness/actor.h"
#include "harness/child.h"
#include "harness/server.h"
#include "harness/sentinel.h"
#include "harness/cluster.h"
#include "harness/exclusion.h"
#include "harness/tool.h"

#endif /* RLOCK_TEST_HARNESS_H */
