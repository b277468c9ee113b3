/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rawredis.h - plain hiredis connections for the demo and the benchmarks.
 *
 * The demo and the benchmarks talk to Redis twice: through librlock, and
 * through raw hiredis connections of their own (to read the stock, to sample
 * INFO, to run the baseline). The raw side must not borrow anything from
 * librlock, so that a bug in the library cannot hide itself; hence this small
 * header-only copy of the url syntax of rlock.h:
 *
 *   redis://[[user]:password@]host[:port][/db]   (user, password %-encoded)
 *   unix:///path/to/socket[?db=N]
 *
 * Everything is static inline so that each program compiles it on its own.
 */
#ifndef RLOCK_TEST_RAWREDIS_H
#define RLOCK_TEST_RAWREDIS_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

typedef struct raw_url {
    char host[256];
    int port;
    char unix_path[1024]; /* empty for TCP */
    char user[256];       /* empty = default user */
    char password[256];   /* empty = no AUTH */
    int db;
} raw_url;

/* CLOCK_MONOTONIC in ns: system-wide, so stamps compare across processes. */
static inline uint64_t raw_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void raw_sleep_ms(double ms) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000.0);
    ts.tv_nsec = (long)((ms - (double)ts.tv_sec * 1000.0) * 1e6);
    nanosleep(&ts, NULL);
}

static inline int raw_hex(char ch) {
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Copies [s, s+len) into out (size cap) with %XX decoded; -1 if malformed. */
static inline int raw_decode(const char *s, size_t len, char *out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == '%') {
            if (i + 2 >= len) /* needs two hex digits */
                return -1;
            int hi = raw_hex(s[i + 1]), lo = raw_hex(s[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            ch = (char)(hi * 16 + lo);
            i += 2;
        }
        if (n + 1 >= cap)
            return -1;
        out[n++] = ch;
    }
    out[n] = '\0';
    return 0;
}

/* Copies [s, s+len) into out (size cap) verbatim; -1 if it does not fit. */
static inline int raw_copy(const char *s, size_t len, char *out, size_t cap) {
    if (len + 1 > cap)
        return -1;
    memcpy(out, s, len);
    out[len] = '\0';
    return 0;
}

static inline int raw_parse_unix(const char *rest, raw_url *u) {
    const char *q = strchr(rest, '?');
    size_t len = q ? (size_t)(q - rest) : strlen(rest);
    if (len == 0 || raw_copy(rest, len, u->unix_path, sizeof u->unix_path) < 0)
        return -1;
    if (q != NULL) {
        if (strncmp(q, "?db=", 4) != 0)
            return -1;
        u->db = atoi(q + 4);
    }
    return 0;
}

/* "[user]:password@" before host; user or password may be empty. */
static inline int raw_parse_userinfo(const char *s, size_t len, raw_url *u) {
    const char *colon = memchr(s, ':', len);
    if (colon == NULL) /* "password@" alone is not in the grammar */
        return -1;
    if (raw_decode(s, (size_t)(colon - s), u->user, sizeof u->user) < 0)
        return -1;
    return raw_decode(colon + 1, len - (size_t)(colon - s) - 1, u->password, sizeof u->password);
}

/* host[:port] or [ipv6][:port], spanning [s, s+len). */
static inline int raw_parse_hostport(const char *s, size_t len, raw_url *u) {
    const char *port = NULL;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close == NULL || raw_copy(s + 1, (size_t)(close - s - 1), u->host, sizeof u->host) < 0)
            return -1;
        if (close + 1 < s + len) {
            if (close[1] != ':')
                return -1;
            port = close + 2;
        }
    } else {
        const char *colon = memchr(s, ':', len);
        size_t hlen = colon ? (size_t)(colon - s) : len;
        if (raw_copy(s, hlen, u->host, sizeof u->host) < 0)
            return -1;
        port = colon ? colon + 1 : NULL;
    }
    if (u->host[0] == '\0')
        return -1;
    if (port != NULL) {
        u->port = atoi(port);
        if (u->port <= 0 || u->port > 65535)
            return -1;
    }
    return 0;
}

/* Fills *u from url; -1 if it is not of the forms above. */
static inline int raw_parse_url(const char *url, raw_url *u) {
    memset(u, 0, sizeof *u);
    u->port = 6379;
    if (strncmp(url, "unix://", 7) == 0)
        return raw_parse_unix(url + 7, u);
    if (strncmp(url, "redis://", 8) != 0)
        return -1;
    const char *s = url + 8;
    const char *slash = strchr(s, '/');
    const char *end = slash ? slash : s + strlen(s);
    const char *at = NULL;
    for (const char *p = s; p < end; p++) /* the last '@' ends the userinfo */
        if (*p == '@')
            at = p;
    if (at != NULL && raw_parse_userinfo(s, (size_t)(at - s), u) < 0)
        return -1;
    const char *host = at ? at + 1 : s;
    if (raw_parse_hostport(host, (size_t)(end - host), u) < 0)
        return -1;
    if (slash != NULL && slash[1] != '\0')
        u->db = atoi(slash + 1);
    return 0;
}

/* Runs a command and returns 0 unless it failed or Redis answered an error. */
/* SCRIPT LOAD body on c; its SHA1 (41 bytes with the NUL) into sha. 0 or -1. */
static inline int raw_load_script(redisContext *c, const char *body, char *sha) {
    redisReply *r = (redisReply *)redisCommand(c, "SCRIPT LOAD %s", body);
    int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok)
        memcpy(sha, r->str, 41);
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

static inline int raw_ok(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    int rc = (r == NULL || r->type == REDIS_REPLY_ERROR) ? -1 : 0;
    if (r != NULL && r->type == REDIS_REPLY_ERROR)
        fprintf(stderr, "redis: %s\n", r->str);
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

/*
 * Runs a command answering an integer (or a decimal string, or nil = 0) and
 * stores it in *out. Returns 0, or -1 on a connection error or another reply.
 */
static inline int raw_int(redisContext *c, long long *out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    int rc = 0;
    if (r == NULL)
        return -1;
    if (r->type == REDIS_REPLY_INTEGER)
        *out = r->integer;
    else if (r->type == REDIS_REPLY_STRING)
        *out = strtoll(r->str, NULL, 10);
    else if (r->type == REDIS_REPLY_NIL)
        *out = 0;
    else
        rc = -1;
    freeReplyObject(r);
    return rc;
}

/*
 * Connects, authenticates and selects the db of url. Prints why on stderr and
 * returns NULL on failure. The caller frees with redisFree().
 */
static inline redisContext *raw_connect(const char *url) {
    raw_url u;
    struct timeval tv = {5, 0};
    if (raw_parse_url(url, &u) < 0) {
        fprintf(stderr, "malformed url: %s\n", url);
        return NULL;
    }
    redisContext *c = u.unix_path[0] ? redisConnectUnixWithTimeout(u.unix_path, tv)
                                     : redisConnectWithTimeout(u.host, u.port, tv);
    if (c == NULL || c->err) {
        fprintf(stderr, "cannot connect to %s: %s\n", url, c ? c->errstr : "out of memory");
        redisFree(c);
        return NULL;
    }
    int bad = 0;
    if (u.password[0] != '\0')
        bad = u.user[0] ? raw_ok(c, "AUTH %s %s", u.user, u.password)
                        : raw_ok(c, "AUTH %s", u.password);
    if (!bad && u.db != 0)
        bad = raw_ok(c, "SELECT %d", u.db);
    if (bad) {
        fprintf(stderr, "cannot log in to %s\n", url);
        redisFree(c);
        return NULL;
    }
    return c;
}

#endif /* RLOCK_TEST_RAWREDIS_H */
