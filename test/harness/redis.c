/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redis.c - the tests' second Redis client (the oracle that checks what
 * librlock wrote): urls, raw hiredis connections, commands that fail the test
 * on a broken connection, INFO commandstats. Urls are parsed by
 * test/rawredis.h, the same copy of rlock.h's url syntax the demo and the
 * benchmarks use, so that nothing here borrows from librlock.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "fail.h"
#include "rawredis.h"
#include "redis.h"

const char *h_url(void) {
    const char *u = getenv("RLOCK_TEST_URL");
    return (u && *u) ? u : "redis://127.0.0.1:6379";
}

const char *h_url_db(int db) {
    static char buf[512];
    const char *u = h_url();
    const char *rest;

    if (strncmp(u, "redis://", 8) != 0)
        return NULL;
    rest = u + 8;
    if (strchr(rest, '/') || strchr(rest, '?') || strlen(u) > 400)
        return NULL;
    snprintf(buf, sizeof buf, "%s/%d", u, db);
    return buf;
}

const char *h_url_host_port(const char *url) {
    if (strncmp(url, "redis://", 8) != 0)
        H_FAIL("not a redis:// url: %s", url);
    return url + 8;
}

const char *h_url_auth(char *out, size_t size, const char *base, const char *user,
                       const char *password) {
    int n = snprintf(out, size, "redis://%s:%s@%s", user, password, h_url_host_port(base));
    if (n < 0 || (size_t)n >= size)
        H_FAIL("url for user %s on %s does not fit in %zu bytes", user, base, size);
    return out;
}

/* Connects to the host or socket of u; fails the test if it cannot. */
static redisContext *connect_or_fail(const char *url, const raw_url *u) {
    struct timeval tv = {(time_t)(h_scaled(5000) / 1000), 0};
    redisContext *c = u->unix_path[0] ? redisConnectUnixWithTimeout(u->unix_path, tv)
                                      : redisConnectWithTimeout(u->host, u->port, tv);
    if (!c || c->err) {
        char err[256];
        snprintf(err, sizeof err, "%s", c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        H_FAIL("cannot connect to %s: %s", url, err);
    }
    tv.tv_sec = (time_t)(h_scaled(10000) / 1000);
    redisSetTimeout(c, tv);
    return c;
}

redisContext *h_redis_url(const char *url) {
    raw_url u;
    redisContext *c;

    if (raw_parse_url(url, &u) < 0)
        H_FAIL("bad url: %s", url);
    c = connect_or_fail(url, &u);
    if (u.password[0] && (u.user[0] ? raw_ok(c, "AUTH %s %s", u.user, u.password)
                                    : raw_ok(c, "AUTH %s", u.password)) != 0) {
        redisFree(c);
        H_FAIL("AUTH refused by %s", url);
    }
    if (u.db != 0 && raw_ok(c, "SELECT %d", u.db) != 0) {
        redisFree(c);
        H_FAIL("SELECT %d refused by %s", u.db, url);
    }
    return c;
}

redisContext *h_redis(void) {
    return h_redis_url(h_url());
}

static redisReply *h_vcmd(redisContext *c, const char *fmt, va_list ap) {
    redisReply *r = redisvCommand(c, fmt, ap);
    if (!r)
        H_FAIL("redis command \"%s\" failed: %s", fmt, c->errstr);
    return r;
}

redisReply *h_cmd(redisContext *c, const char *fmt, ...) {
    va_list ap;
    redisReply *r;
    va_start(ap, fmt);
    r = h_vcmd(c, fmt, ap);
    va_end(ap);
    return r;
}

long long h_cmd_int(redisContext *c, const char *fmt, ...) {
    va_list ap;
    redisReply *r;
    long long v;
    va_start(ap, fmt);
    r = h_vcmd(c, fmt, ap);
    va_end(ap);
    if (r->type != REDIS_REPLY_INTEGER) {
        char got[200];
        snprintf(got, sizeof got, "type %d %s", r->type,
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
        freeReplyObject(r);
        H_FAIL("\"%s\": expected an integer reply, got %s", fmt, got);
    }
    v = r->integer;
    freeReplyObject(r);
    return v;
}

void h_cmd_ok(redisContext *c, const char *fmt, ...) {
    va_list ap;
    redisReply *r;
    va_start(ap, fmt);
    r = h_vcmd(c, fmt, ap);
    va_end(ap);
    if (r->type == REDIS_REPLY_ERROR) {
        char got[200];
        snprintf(got, sizeof got, "%s", r->str);
        freeReplyObject(r);
        H_FAIL("\"%s\" answered %s", fmt, got);
    }
    freeReplyObject(r);
}

char *h_cmd_str(redisContext *c, const char *fmt, ...) {
    va_list ap;
    redisReply *r;
    char *s = NULL;
    va_start(ap, fmt);
    r = h_vcmd(c, fmt, ap);
    va_end(ap);
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
        s = malloc(r->len + 1);
        if (!s)
            abort();
        memcpy(s, r->str, r->len);
        s[r->len] = 0;
    } else if (r->type != REDIS_REPLY_NIL) {
        int t = r->type;
        freeReplyObject(r);
        H_FAIL("\"%s\": expected a string reply, got type %d", fmt, t);
    }
    freeReplyObject(r);
    return s;
}

int h_exists(redisContext *c, const char *name, size_t len) {
    return (int)h_cmd_int(c, "EXISTS %b", name, len);
}

long long h_pttl(redisContext *c, const char *name, size_t len) {
    return h_cmd_int(c, "PTTL %b", name, len);
}

long long h_hget_int(redisContext *c, const char *key, const char *field) {
    char *v = h_cmd_str(c, "HGET %s %s", key, field);
    long long n = v != NULL ? atoll(v) : 0;
    free(v);
    return n;
}

/* The number after key (which starts a line) in INFO section; 0 if absent. */
static long long info_number(redisContext *c, const char *section, const char *key) {
    redisReply *r = h_cmd(c, "INFO %s", section);
    const char *p;
    long long n = 0;

    if (r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        H_FAIL("INFO %s: unexpected reply", section);
    }
    for (p = r->str; (p = strstr(p, key)) != NULL; p++) {
        if (p == r->str || p[-1] == '\n') {
            n = strtoll(p + strlen(key), NULL, 10);
            break;
        }
    }
    freeReplyObject(r);
    return n;
}

long long h_commandstat_calls(redisContext *c, const char *cmd) {
    char key[128];
    snprintf(key, sizeof key, "cmdstat_%s:calls=", cmd);
    return info_number(c, "commandstats", key);
}

long long h_info_stat(redisContext *c, const char *field) {
    char key[128];
    snprintf(key, sizeof key, "%s:", field);
    return info_number(c, "stats", key);
}

/* ---- CLIENT LIST --------------------------------------------------------------- */

void h_conn_name(const char *client_id, char *buf, size_t size) {
    char host[256];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    snprintf(buf, size, "rlock:%s:%d:%.8s", host, (int)getpid(), client_id);
}

/* Calls fn for each CLIENT LIST line with its name ("" if none) and id. */
static void each_client(redisContext *c, void (*fn)(const char *line, const char *name,
                                                    long long id, void *arg),
                        void *arg) {
    redisReply *reply = h_cmd(c, "CLIENT LIST");
    if (reply->type != REDIS_REPLY_STRING) {
        freeReplyObject(reply);
        H_FAIL("CLIENT LIST: unexpected reply");
    }
    char *save = NULL;
    for (char *line = strtok_r(reply->str, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char name[512] = "";
        long long id = -1;
        const char *p = strstr(line, " name=");
        if (p != NULL)
            sscanf(p + 6, "%511[^ ]", name);
        sscanf(line, "id=%lld", &id);
        fn(line, name, id, arg);
    }
    freeReplyObject(reply);
}

typedef struct conn_count {
    char want[512];
    h_conns n;
    redisContext *kill_on; /* h_kill_named: CLIENT KILL ID of the named ones here */
} conn_count;

int h_server_major(redisContext *c) {
    char *info = h_cmd_str(c, "INFO server");
    const char *v = info ? strstr(info, "redis_version:") : NULL;
    int major = v ? atoi(v + strlen("redis_version:")) : 0;
    free(info);
    return major;
}

/* Whether CLIENT LIST's line has `field` (" sub=") with a count other than 0 (6.2 has no ssub). */
static int counted(const char *line, const char *field) {
    const char *at = strstr(line, field);
    return at != NULL && atoll(at + strlen(field)) != 0;
}

static void count_conn(const char *line, const char *name, long long id, void *arg) {
    conn_count *cc = arg;
    if (strcmp(name, cc->want) == 0) {
        cc->n.named++;
        cc->n.named_sub += counted(line, " sub=") || counted(line, " ssub=");
        if (cc->kill_on != NULL)
            h_cmd_ok(cc->kill_on, "CLIENT KILL ID %lld", id);
    } else if (name[0] == '\0') {
        cc->n.unnamed++;
    }
}

h_conns h_client_list(redisContext *c, const char *client_id) {
    conn_count cc = {.kill_on = NULL};
    h_conn_name(client_id, cc.want, sizeof cc.want);
    each_client(c, count_conn, &cc);
    return cc.n;
}

int h_kill_named(redisContext *c, const char *client_id) {
    conn_count cc = {.kill_on = c};
    h_conn_name(client_id, cc.want, sizeof cc.want);
    each_client(c, count_conn, &cc);
    return cc.n.named;
}

long long h_script_calls(redisContext *c) {
    return h_commandstat_calls(c, "evalsha") + h_commandstat_calls(c, "eval");
}

long long h_scripts_quiet(redisContext *c, long long quiet_ms, long long timeout_ms) {
    long long deadline = h_now_ms() + h_scaled(timeout_ms);
    long long last = h_script_calls(c), since = h_now_ms();
    for (;;) {
        long long v;
        h_sleep_ms(10);
        v = h_script_calls(c);
        if (v != last) {
            last = v;
            since = h_now_ms();
        } else if (h_now_ms() - since >= quiet_ms) {
            return v;
        }
        if (h_now_ms() > deadline)
            H_FAIL("waiters never went quiet: %lld script calls and counting", v);
    }
}
