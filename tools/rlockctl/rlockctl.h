/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlockctl.h - the operator's tool: what its files share.
 *
 *   main.c      options, the command table, exit statuses, the client
 *   help.c      the man-style --help and `rlockctl help COMMAND`
 *   inspect.c   reading locks: SCAN on every master, each lock's layout
 *               (Redisson's: plain, fair, read-write, fenced), its waiters
 *   clients.c   client registrations (rlock:client:<uuid>) and CLIENT LIST
 *   text.c      bytes made safe for a terminal or a JSON string; durations
 *   render.c    the table and JSON forms of locks and clients
 *   commands.c  list, show, unlock, dequeue, clients
 *   watch.c     the refreshing view: holders, TTLs, waiters, hand-offs/s
 *
 * Redis is reached through an rlock_client (the public API) and the
 * read-only inspection seam src/api/inspect.h (tool-only, not exported).
 * Single-threaded; every allocation is checked (xmalloc exits with status 3
 * and a message when memory runs out).
 */
#ifndef RLOCKCTL_H
#define RLOCKCTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rlock.h"
#include "api/inspect.h"

/* ---- exit statuses (documented in --help and docs/rlockctl.md; stable) ---- */
enum {
    CTL_OK = 0,       /* done */
    CTL_NOTHING = 1,  /* no such lock / nothing matched / not locked / no client */
    CTL_USAGE = 2,    /* bad command line */
    CTL_REDIS = 3,    /* cannot connect, or Redis answered an error */
    CTL_REFUSED = 4,  /* unlock not confirmed (answered no, or no terminal and no --yes) */
    CTL_NOT_LOCK = 5  /* the key is not a lock rlockctl knows (every lock kind is unlocked) */
};

/* ---- main.c ---------------------------------------------------------------- */

typedef struct ctl_options {
    const char *url;         /* --url, $RLOCK_URL, else redis://127.0.0.1:6379 */
    int json;                /* --json */
    int yes;                 /* --yes */
    int timeout_ms;          /* --timeout: connect and command bound */
    long long interval_ms;   /* watch --interval */
    long long count;         /* watch -n: iterations (0: until interrupted) */
    int argc;                /* the command's own arguments */
    char **argv;
} ctl_options;

typedef struct ctl {
    ctl_options opt;
    rlock_client *client;
    FILE *out;               /* stdout */
} ctl;

/*
 * Prints "rlockctl: <what>: <rlock_last_error()>" on stderr -- unless the
 * failure was a reply ctl_reply_failed() said already; returns CTL_REDIS.
 */
int ctl_redis_error(const char *what, int status);
/*
 * An error reply (NOPERM, LOADING, ...) or a reply of the wrong shape to
 * cmd: says "rlockctl: VERB KEY: <Redis's text>" on stderr; returns
 * RLOCK_EREDIS. A reply is never taken for an answer about a lock when it
 * is an error: a refused TYPE is not "not locked".
 */
int ctl_reply_failed(const rlock__inspect_cmd *cmd, const redisReply *r);
/* malloc / realloc / strdup that exit(CTL_REDIS) with a message when memory runs out. */
void *xmalloc(size_t size);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t size);
char *xstrndup(const char *s, size_t len);

/* ---- help.c ---------------------------------------------------------------- */

void ctl_help(FILE *f);
/* The help of one command; 0, or -1 if there is no such command. */
int ctl_help_command(FILE *f, const char *command);
/* "usage: ..." of a command on stderr; returns CTL_USAGE. */
int ctl_usage(const char *command, const char *problem);

/* ---- inspect.c: what a lock is ------------------------------------------------ */

enum { KIND_PLAIN, KIND_FAIR, KIND_RW, KIND_FENCED };
const char *ctl_kind_name(int kind);

/* A client process, from its registration hash rlock:client:<uuid>. */
typedef struct ctl_process {
    char *id;                /* the client uuid */
    char *host, *program, *version, *url; /* NULL if the field is absent */
    long long pid, started_ms, watchdog_timeout_ms; /* -1 if absent */
    long long ttl_ms;        /* of the hash */
    int connections;         /* CLIENT LIST entries named for it (clients only) */
    long long idle_s;        /* the least idle one's idle seconds; -1: none (clients only) */
} ctl_process;

typedef struct ctl_owner {
    char *field;             /* "<uuid>:<thread>" or "<uuid>:<thread>:write" */
    size_t field_len;
    char *client_id;         /* the part before the first ':' */
    char *thread;            /* the part after it (without ":write") */
    int write;               /* a read-write lock's writer */
    long long holds;
    const ctl_process *process; /* NULL: unregistered */
    /*
     * Its client's connections (CLIENT LIST on every master, names
     * "rlock:<host>:<pid>:<first 8 of the id>"): how many (-1: CLIENT LIST
     * refused somewhere, not known), the least idle one's idle seconds, and
     * one's name (owned; NULL if none), which says host and pid when the
     * registration is gone.
     */
    int conns;
    long long idle_s;
    char *conn_name;
} ctl_owner;

typedef struct ctl_waiter {
    ctl_owner who;           /* holds unused */
    long long deadline_ms;   /* wall clock, from the timeout zset; -1 if none */
} ctl_waiter;

typedef struct ctl_channel {
    char *name;
    size_t len;
    long long classic;       /* PUBSUB NUMSUB at the channel's node */
    long long sharded;       /* PUBSUB SHARDNUMSUB there; -1 if the server has none */
} ctl_channel;

typedef struct ctl_lock {
    char *name;
    size_t name_len;
    int kind;                /* KIND_* */
    int held;                /* the hash exists (a fair lock may be free with a queue) */
    const char *mode;        /* read-write: "read" / "write"; else NULL */
    long long ttl_ms;        /* PTTL of the hash: -1 none, -2 not held */
    long long token;         /* fenced: the last token given; -1 if none */
    ctl_owner *owners;
    int nowners;
    ctl_waiter *queue;       /* fair: in order, the first 1000 */
    int nqueue;
    long long queue_len;     /* fair: LLEN of the queue, all of it */
    ctl_channel *channels;   /* where its waiters sleep */
    int nchannels;
} ctl_lock;

/* What looking a name up found. */
enum { FOUND_LOCK, FOUND_NONE, FOUND_OTHER };

typedef struct ctl_lookup {
    int found;               /* FOUND_* */
    char what[96];           /* FOUND_OTHER: e.g. "a string", "a hash without a TTL" */
    long long token;         /* FOUND_NONE: a fenced lock's last token, or -1 */
} ctl_lookup;

typedef struct ctl_locks {
    ctl_lock *v;
    int n, cap;
    ctl_process **processes; /* registrations read for the owners (owned) */
    int nprocesses;
} ctl_locks;

/* A key's name: any bytes (NUL-terminated too, for messages). */
typedef struct ctl_name {
    char *s;                 /* owned by the ctl_names holding it */
    size_t len;
} ctl_name;

typedef struct ctl_names {
    ctl_name *v;
    int n, cap;
} ctl_names;

void ctl_names_add(ctl_names *ns, const char *s, size_t len);
void ctl_names_free(ctl_names *ns);
/* Drops from ns->v[from..] the names not wanted (freeing them); RLOCK_OK or an error. */
typedef int (*ctl_sift)(ctl *c, ctl_names *ns, int from);
/*
 * Every key of type `type` matching `match` on every master, with SCAN
 * (never KEYS), appended to out; keep (may be NULL) sifts each page as it
 * comes, so memory follows what is kept. RLOCK_OK or an error (said on
 * stderr, or recorded for rlock_last_error()).
 */
int ctl_scan(ctl *c, const char *match, const char *type, ctl_sift keep, ctl_names *out);

/*
 * The locks whose names match pattern (Redis glob; NULL: all), read from
 * every master with SCAN (never KEYS): lock hashes, and fair queues whose
 * lock is free. Sorted by name. RLOCK_OK or an error (message recorded).
 */
int ctl_find_locks(ctl *c, const char *pattern, ctl_locks *out);
/* One lock by name: *lookup says what the name holds; out gets the lock if it is one. */
int ctl_find_lock(ctl *c, const char *name, size_t len, ctl_lookup *lookup, ctl_locks *out);
void ctl_locks_free(ctl_locks *locks);
/* The channel (owned) on which the lock's unlock messages wake its waiters. */
char *ctl_lock_channel(const char *name, size_t len, int kind, size_t *out_len);
/* The lock name a channel belongs to (owned), or NULL if it is no lock channel. */
char *ctl_channel_lock(const char *channel, size_t len, size_t *out_len);
/* Waiters: the fair queue's length, else the subscribers of its channels. */
long long ctl_lock_waiters(const ctl_lock *lock);
/*
 * Renewal as the TTL tells it, for a held lock whose owner's registration
 * names its watchdog timeout (*wd_ms): "on time" (TTL above two thirds of it:
 * the watchdog renews every third), "late" (below: missed renewals, or a
 * lock taken with a fixed lease); "stopped" when an owner's process cannot be
 * renewing (ctl_stuck: gone or stopped), whatever the TTL; or NULL when it
 * cannot be told.
 */
const char *ctl_renewal(const ctl_lock *lock, long long *wd_ms);
/* Runs n commands through the inspection seam; frees nothing. CTL-style: RLOCK_OK or error. */
int ctl_run(ctl *c, const rlock__inspect_cmd *cmds, int n, redisReply **replies);
void ctl_free_replies(redisReply **replies, int n);

/* ---- clients.c -------------------------------------------------------------- */

typedef struct ctl_conns {  /* CLIENT LIST entries named rlock:<host>:<pid>:<uuid8> */
    char *name;
    char *addr;              /* the master it is connected to */
    int count;
    long long idle_s;        /* the least idle one's idle= (seconds) */
    int registered;          /* a registration found names these connections */
} ctl_conns;

typedef struct ctl_clients {
    ctl_process **v;         /* every registration found */
    int n;
    ctl_conns *conns;        /* per (name, master) */
    int nconns;
    ctl_conns *others;       /* connections with other names (a Redisson clientName) */
    int nothers;
    int conns_known;         /* every master answered CLIENT LIST */
} ctl_clients;

/*
 * The connections named rlock:* on every master (not rlockctl's own) into
 * out->conns; out->conns_known is 0 if a master refused CLIENT LIST (said on
 * stderr). RLOCK_OK or an error.
 */
int ctl_list_conns(ctl *c, ctl_clients *out);
/*
 * Whether a party cannot be moving: no connection left while registered
 * (process gone), or every connection idle longer than two thirds of its
 * watchdog timeout (the default's without a registration: renewals
 * stopped). NULL if it can, or
 * if that cannot be told (CLIENT LIST refused; a Java owner: no named
 * connection, no registration); else why, in a few words.
 */
const char *ctl_stuck(const ctl_owner *o);
/* ctl_stuck of a fair lock's queue head (NULL: no queue, or it can move). */
const char *ctl_head_stuck(const ctl_lock *l);

/* HGETALL rlock:client:<id> for each id (NULL entries for unregistered ones). */
int ctl_read_processes(ctl *c, char **ids, int n, ctl_process **out);
void ctl_process_free(ctl_process *p);
/* Every registration (SCAN rlock:client:* on every master) and rlock:* connection. */
int ctl_find_clients(ctl *c, ctl_clients *out);
void ctl_clients_free(ctl_clients *clients);

/* ---- text.c --------------------------------------------------------------- */

/*
 * Writes bytes for a terminal: printable ASCII and valid UTF-8 as they are,
 * others \xNN -- C0 and C1 controls included, so nothing read from Redis
 * (names, owner fields, registrations, error messages) can drive the
 * operator's terminal. Every such string is printed through it.
 */
void ctl_put_text(FILE *f, const char *s, size_t len);
/* ctl_put_text of a NUL-terminated string; "?" for NULL (an absent field). */
void ctl_put_str(FILE *f, const char *s);
/* Writes a JSON string literal (quotes included); bytes that are not UTF-8 as \u00NN. */
void ctl_put_json(FILE *f, const char *s, size_t len);
/* "29.812s", "4m03s", "2h01m", "3d04h" for ms >= 0; "-" for ms < 0. Into buf. */
const char *ctl_duration(long long ms, char *buf, size_t size);
/* Milliseconds since the epoch (CLOCK_REALTIME). */
long long ctl_wall_ms(void);
/* Redis's glob (SCAN MATCH) applied to name: 1 if it matches. */
int ctl_glob_match(const char *pattern, const char *name, size_t len);

/* ---- render.c ------------------------------------------------------------- */

/* Terminal columns of len bytes of UTF-8 (continuation bytes take none). */
int ctl_text_width(const char *s, size_t len);
void ctl_render_list(ctl *c, const ctl_locks *locks);
void ctl_render_list_json(ctl *c, const ctl_locks *locks);
void ctl_render_show(ctl *c, const ctl_lock *lock);
void ctl_render_lock_json(FILE *f, const ctl_lock *lock);
void ctl_render_clients(ctl *c, const ctl_clients *clients);
void ctl_render_clients_json(ctl *c, const ctl_clients *clients);
/* "1a2b3c4d:17 x2" / "1a2b3c4d:17:write x1": an owner in a few columns. */
void ctl_put_owner_short(FILE *f, const ctl_owner *o);
/*
 * Who a party is and whether its process answers: "host H  pid N  program P
 * rlock V  client up 4m03s  2 connections, least idle 0s" (": process
 * stopped?" after it when they idle too long; "no connection: process
 * gone?" in its place), "no registration (expired, or register_client off);
 * 2 connections, least idle 41s (rlock:H:N:1a2b3c4d)" (": process stopped?"
 * when idle too long), or "unregistered, no connection named for it (Java
 * Redisson, rlock < 0.5, or gone)".
 */
void ctl_put_party(FILE *f, const ctl_owner *o);
/*
 * The same in a few columns, after an owner in list and watch: " (host:pid)",
 * " (host:pid: no connection, gone?)", " (host:pid: no registration, idle
 * 41s, stopped?)"; nothing when nothing names the process.
 */
void ctl_put_party_short(FILE *f, const ctl_owner *o);
/* "  queue head stuck: <entry> (host:pid: <why>)" after list's and watch's owners, if so. */
void ctl_put_head_stuck(FILE *f, const ctl_lock *l);

/* ---- commands.c / watch.c --------------------------------------------------- */

int ctl_cmd_list(ctl *c);
int ctl_cmd_show(ctl *c);
int ctl_cmd_unlock(ctl *c);
int ctl_cmd_dequeue(ctl *c);
int ctl_cmd_clients(ctl *c);
int ctl_cmd_watch(ctl *c);

#endif /* RLOCKCTL_H */
