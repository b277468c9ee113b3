/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redis.h - the tests' second Redis client: raw hiredis connections that
 * share nothing with librlock (urls parsed by test/rawredis.h), commands that
 * fail the test when the connection breaks, INFO commandstats counters, and
 * what CLIENT LIST says of an rlock client's named connections.
 */
#ifndef RLOCK_TEST_HARNESS_REDIS_H
#define RLOCK_TEST_HARNESS_REDIS_H

#include <stddef.h>

#include <hiredis/hiredis.h>

/* $RLOCK_TEST_URL, else "redis://127.0.0.1:6379". */
const char *h_url(void);
/* h_url() with "/db" appended (NULL if h_url() is not a plain
 * redis://host:port url). Static storage. */
const char *h_url_db(int db);
/* "HOST:PORT" of a plain redis://HOST:PORT url (e.g. h_url(), h_server_url());
 * fails the test for another scheme. Points into url. */
const char *h_url_host_port(const char *url);
/* "redis://USER:PASSWORD@HOST:PORT" for base "redis://HOST:PORT" (user and
 * password as given, not %-encoded), written to out (size bytes). Fails the
 * test if base is not redis:// or out is too small. Returns out. */
const char *h_url_auth(char *out, size_t size, const char *base, const char *user,
                       const char *password);

/* A new raw hiredis connection to h_url() (redis:// urls, with optional
 * password and /db; or unix://path). Fails the test if it cannot connect.
 * Free it with redisFree(). */
redisContext *h_redis(void);
/* The same for any url (e.g. h_server_url()). */
redisContext *h_redis_url(const char *url);

/*
 * Runs a command (hiredis format) and returns its reply; fails the test if
 * the connection broke. The reply may be an error reply. freeReplyObject()
 * it.
 */
redisReply *h_cmd(redisContext *c, const char *fmt, ...);
/* Runs a command that must answer an integer; returns it. */
long long h_cmd_int(redisContext *c, const char *fmt, ...);
/* Runs a command that must not answer an error. */
void h_cmd_ok(redisContext *c, const char *fmt, ...);
/* Runs a command that must answer a bulk string or nil; returns a malloc'd
 * copy or NULL for nil. */
char *h_cmd_str(redisContext *c, const char *fmt, ...);

/* EXISTS name (binary-safe, len bytes). */
int h_exists(redisContext *c, const char *name, size_t len);
/* PTTL name. */
long long h_pttl(redisContext *c, const char *name, size_t len);
/* HGET key field as a number (0 if the field or the key is absent). */
long long h_hget_int(redisContext *c, const char *key, const char *field);

/* The server's major version: INFO server's redis_version (Valkey 8 says 7.2.4 there: the
 * Redis release it is compatible with). Behaviour that differs by version is tested by it. */
int h_server_major(redisContext *c);
/* calls=N of "cmdstat_<cmd>" in INFO commandstats (0 if absent). */
long long h_commandstat_calls(redisContext *c, const char *cmd);
/* A field of INFO stats, e.g. total_connections_received (0 if absent). */
long long h_info_stat(redisContext *c, const char *field);
/* Script calls so far (EVALSHA + EVAL). */
long long h_script_calls(redisContext *c);
/*
 * Waits until no script has run for quiet_ms (every waiter has made its
 * attempts and sleeps). Fails the test if that does not happen within
 * timeout_ms (scaled). Returns the script call count.
 */
long long h_scripts_quiet(redisContext *c, long long quiet_ms, long long timeout_ms);

/* ---- CLIENT LIST: the connections of an rlock client (named rlock:<host>:<pid>:<id8>) ---- */

/* The name every connection of the client client_id opened by this process carries. */
void h_conn_name(const char *client_id, char *buf, size_t size);
/* What CLIENT LIST on c says: the connections named for client_id, and the unnamed. */
typedef struct h_conns {
    int named;     /* name=rlock:<host>:<pid>:<id8> */
    int named_sub; /* ... of them subscribed (sub or ssub not 0) */
    int unnamed;   /* no name at all (this very connection counts) */
} h_conns;
h_conns h_client_list(redisContext *c, const char *client_id);
/* CLIENT KILL ID of every connection named for client_id; how many. */
int h_kill_named(redisContext *c, const char *client_id);

#endif /* RLOCK_TEST_HARNESS_REDIS_H */
