/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lockkey.c - the lock key and its channel as Redis holds them, read and
 * written with raw commands: owner fields and counts, the channel name and
 * its subscribers, a raw subscriber, a foreign holder, watchdog renewals seen
 * as PTTL jumps, orphaned fields that must expire unrenewed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "fail.h"
#include "lockkey.h"
#include "redis.h"

static char *dup_reply_str(const redisReply *r) {
    char *s = malloc(r->len + 1);
    if (!s)
        abort();
    memcpy(s, r->str, r->len);
    s[r->len] = 0;
    return s;
}

int h_lock_fields(redisContext *c, const char *name, size_t len, char **field, long long *value) {
    redisReply *r = h_cmd(c, "HGETALL %b", name, len);
    int n;
    if (field)
        *field = NULL;
    if (value)
        *value = 0;
    if (r->type != REDIS_REPLY_ARRAY) {
        int t = r->type;
        freeReplyObject(r);
        H_FAIL("HGETALL: expected an array, got type %d", t);
    }
    n = (int)(r->elements / 2);
    if (n > 0 && field)
        *field = dup_reply_str(r->element[0]);
    if (n > 0 && value) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.*s", (int)r->element[1]->len, r->element[1]->str);
        *value = strtoll(buf, NULL, 10);
    }
    freeReplyObject(r);
    return n;
}

/* 1 if field is "<client_id>:<decimal>". */
static int field_of(const char *field, const char *client_id) {
    size_t idlen = strlen(client_id);
    if (strncmp(field, client_id, idlen) != 0 || field[idlen] != ':' || !field[idlen + 1])
        return 0;
    return strspn(field + idlen + 1, "0123456789") == strlen(field + idlen + 1);
}

int h_lock_is(redisContext *c, const char *name, size_t len, const char *client_id,
              long long count) {
    char *field = NULL;
    long long value = 0;
    int n = h_lock_fields(c, name, len, &field, &value);
    int ok = 1;

    if (n != 1) {
        fprintf(stderr, "lock key has %d fields, expected 1\n", n);
        ok = 0;
    } else if (!client_id || !field_of(field, client_id)) {
        fprintf(stderr, "lock field is \"%s\", expected \"%s:<thread id>\"\n", field,
                client_id ? client_id : "(null)");
        ok = 0;
    } else if (value != count) {
        fprintf(stderr, "lock field \"%s\" = %lld, expected %lld\n", field, value, count);
        ok = 0;
    }
    free(field);
    return ok;
}

char *h_lock_owner(redisContext *c, const char *name) {
    char *field = NULL;
    int n = h_lock_fields(c, name, strlen(name), &field, NULL);
    if (n != 1) {
        free(field);
        H_FAIL("lock %s has %d fields, expected 1", name, n);
    }
    return field;
}

char *h_channel(const char *name, size_t len, size_t *out_len) {
    static const char prefix[] = "redisson_lock__channel:";
    size_t plen = sizeof prefix - 1;
    int tagged = memchr(name, '{', len) != NULL;
    size_t n = plen + len + (tagged ? 0 : 2);
    char *s = malloc(n + 1), *p;
    if (!s)
        abort();
    memcpy(s, prefix, plen);
    p = s + plen;
    if (!tagged)
        *p++ = '{';
    memcpy(p, name, len);
    p += len;
    if (!tagged)
        *p++ = '}';
    *p = 0;
    if (out_len)
        *out_len = n;
    return s;
}

long long h_numsub(redisContext *c, const char *name, size_t len) {
    return h_numsub_kind(c, name, len, 0);
}

long long h_numsub_kind(redisContext *c, const char *name, size_t len, int sharded) {
    size_t clen;
    char *ch = h_channel(name, len, &clen);
    redisReply *r = h_cmd(c, sharded ? "PUBSUB SHARDNUMSUB %b" : "PUBSUB NUMSUB %b", ch, clen);
    long long n;
    free(ch);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
        freeReplyObject(r);
        H_FAIL("PUBSUB NUMSUB: unexpected reply");
    }
    n = r->element[1]->integer;
    freeReplyObject(r);
    return n;
}

redisContext *h_sub_open(const char *url, const char *name, size_t len) {
    redisContext *c = h_redis_url(url);
    size_t clen;
    char *ch = h_channel(name, len, &clen);
    redisReply *r = h_cmd(c, "SUBSCRIBE %b", ch, clen);
    free(ch);
    if (r->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        redisFree(c);
        H_FAIL("SUBSCRIBE: unexpected reply");
    }
    freeReplyObject(r);
    return c;
}

char *h_sub_read(redisContext *sub, long long timeout_ms) {
    long long ms = h_scaled(timeout_ms);
    struct timeval tv;
    void *reply = NULL;
    redisReply *r;
    char *s = NULL;

    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
    redisSetTimeout(sub, tv);
    if (redisGetReply(sub, &reply) != REDIS_OK || !reply)
        return NULL;
    r = reply;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        r->element[2]->type == REDIS_REPLY_STRING)
        s = dup_reply_str(r->element[2]);
    freeReplyObject(r);
    return s;
}

void h_foreign_lock(redisContext *c, const char *name, long long pexpire_ms) {
    h_cmd_ok(c, "HSET %s %s 1", name, H_FOREIGN_OWNER);
    h_cmd_ok(c, "PEXPIRE %s %lld", name, pexpire_ms);
}

void h_foreign_unlock(redisContext *c, const char *name) {
    size_t clen;
    char *ch = h_channel(name, strlen(name), &clen);
    h_cmd_ok(c, "DEL %s", name);
    h_cmd_ok(c, "PUBLISH %b 0", ch, clen);
    free(ch);
}

long long h_wait_renewal(redisContext *c, const char *name, long long min_jump_ms,
                         long long within_ms) {
    long long deadline = h_now_ms() + within_ms;
    long long prev = h_pttl(c, name, strlen(name));
    while (h_now_ms() < deadline) {
        long long p = h_pttl(c, name, strlen(name));
        if (p > prev + min_jump_ms)
            return p;
        prev = p;
        h_sleep_ms(2);
    }
    H_FAIL("no renewal of %s seen within %lld ms", name, within_ms);
}

/* Fields of a lock key: 0 (absent) or 1 with *count set; fails on more. */
int h_own_fields(redisContext *r, const char *name, const char *id, long long *count) {
    char *field = NULL;
    int n = h_lock_fields(r, name, strlen(name), &field, count);
    if (n > 1)
        H_FAIL("lock %s has %d fields", name, n);
    if (n == 1 && (strncmp(field, id, strlen(id)) != 0 || field[strlen(id)] != ':')) {
        free(field);
        H_FAIL("lock %s has a field of someone else", name);
    }
    free(field);
    return n;
}

/* Polls until the key is gone, checking meanwhile that nobody renews it (its
 * PTTL only decreases) and that it holds count 1. Returns how long it took. */
long long h_orphan_expires(redisContext *r, const char *name, const char *id, long long lease_ms) {
    long long t0 = h_now_ms(), prev = h_pttl(r, name, strlen(name)), count = 0;
    while (h_exists(r, name, strlen(name))) {
        long long p = h_pttl(r, name, strlen(name));
        if (h_own_fields(r, name, id, &count) == 1 && count != 1)
            H_FAIL("orphan of %s has count %lld", name, count);
        if (p > prev + 5)
            H_FAIL("orphan of %s was renewed (PTTL %lld -> %lld)", name, prev, p);
        if (p >= 0)
            prev = p;
        if (h_now_ms() - t0 > lease_ms + H_MS(500))
            H_FAIL("orphan of %s still there after %lld ms", name, h_now_ms() - t0);
        h_sleep_ms(10);
    }
    return h_now_ms() - t0;
}
