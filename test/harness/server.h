/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.h - redis-servers of the tests' own (fault tests, and tests that
 * need a server they may stop): start, pause, kill, restart, stop, and the
 * cmocka fixtures that give a test or a group one.
 */
#ifndef RLOCK_TEST_HARNESS_SERVER_H
#define RLOCK_TEST_HARNESS_SERVER_H

#include <sys/types.h>

#include <hiredis/hiredis.h>

typedef struct h_server h_server;

/*
 * Starts redis-server bound to 127.0.0.1 on a free random port, in a new
 * temporary directory, with no persistence and DEBUG enabled for local
 * connections; it gets SIGKILL if the thread that started it dies (call
 * from the test's main thread). Returns once it answers PING. Fails the
 * test if it cannot be started.
 */
h_server *h_server_start(void);
/* Like h_server_start, with more redis-server arguments (a NULL-ended list,
 * at most 16), e.g. {"--replicaof", "127.0.0.1", "6379", NULL}. */
h_server *h_server_start_args(const char *const *args);
/*
 * Like h_server_start_args, on a given port (e.g. from h_free_port). NULL
 * if the server could not start there: the port, or a port in args (a
 * cluster bus port), was taken meanwhile: pick others and try again.
 */
h_server *h_server_start_port(int port, const char *const *args);
/*
 * A port nobody listens on now, below the kernel's ephemeral range (32768..),
 * so that outgoing connections cannot be handed it before a server binds it.
 * Another test may still take it meanwhile: start servers on it with
 * h_server_start_port and retry on NULL.
 */
int h_free_port(void);
/*
 * Starts redis-sentinel on port (which must be free) with conf (the lines
 * after bind, dir and logfile, which the harness writes) in its own
 * directory; waits for PING. password: the requirepass conf sets (the
 * harness then AUTHs, and h_server_url carries it), or NULL. NULL if the
 * port was taken meanwhile (pick others and try again). Stop it like a
 * server.
 */
h_server *h_sentinel_start(int port, const char *conf, const char *password);
/* redis://127.0.0.1:PORT (owned by the server object). */
const char *h_server_url(const h_server *s);
int h_server_port(const h_server *s);
/* pid of the running redis-server, 0 if it is not running. */
pid_t h_server_pid(const h_server *s);
/* A raw connection to it (redisFree() it). */
redisContext *h_server_redis(const h_server *s);
/* SIGSTOP, and waits until /proc/PID/stat shows state T. */
void h_server_pause(h_server *s);
/* SIGCONT, and waits until it is no longer stopped. */
void h_server_resume(h_server *s);
/* 1 while it is stopped (paused). */
int h_server_stopped(const h_server *s);
/* SIGKILL and reap (after checking that /proc/PID/cmdline still shows
 * our redis on our port; if not, it only forgets the pid). */
void h_server_kill(h_server *s);
/* Kills it if running, then starts it again on the same port and data
 * directory (empty: nothing is persisted); waits for PING. */
void h_server_restart(h_server *s);
/* Kills it, removes its directory and frees s. NULL is a no-op. */
void h_server_stop(h_server *s);

/* n independent servers (h_server_start each) into out[0..n-1]: a Redlock's masters. */
void h_servers_start(int n, h_server **out);
/* h_server_stop of each (NULL entries skipped). */
void h_servers_stop(int n, h_server **s);

/*
 * cmocka fixtures, per test (cmocka_unit_test_setup_teardown) or per group
 * (cmocka_run_group_tests): *state = a fresh server (h_server *), also
 * reachable as h_srv until the fixture stops it.
 */
int h_server_fixture_start(void **state);
int h_server_fixture_stop(void **state);
/* The server of the fixture that runs (NULL outside one): for files whose
 * helpers reach it without the cmocka state. */
extern h_server *h_srv;
/* A cmocka test with a server of its own (needs cmocka.h). */
#define H_SERVER_TEST(fn)                                                                          \
    cmocka_unit_test_setup_teardown(fn, h_server_fixture_start, h_server_fixture_stop)

#endif /* RLOCK_TEST_HARNESS_SERVER_H */
