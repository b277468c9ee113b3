/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inspect.c - reading locks from Redis, in Redisson's layout (docs/design.md
 * section 2, ../shared research redisson.md section 3), read-only:
 *
 *   plain    the hash N: fields "<uuid>:<thread>" -> hold count, a TTL
 *   fair     the same, plus the list redisson_lock_queue:{N} (waiters in
 *            order) and the zset redisson_lock_timeout:{N} (their deadlines);
 *            each waiter sleeps on redisson_lock__channel:{N}:<uuid>:<thread>
 *   rw       the hash has a field "mode" (read / write); readers
 *            "<uuid>:<thread>", the writer "<uuid>:<thread>:write"; channel
 *            redisson_rwlock:{N}
 *   fenced   a plain hash beside the string redisson_lock_token:{N}
 *
 * ({N} is N itself when the name holds a '{': Redisson's prefixName rule.)
 * A fair lock whose queue is empty is laid out as a plain one: it shows as
 * plain then. Names are found with SCAN on every master (never KEYS); each
 * batch of names is read with one pipeline per node (through the seam of
 * src/api/inspect.h), then their channels' subscribers, then the
 * registrations of the clients that own or wait.
 *
 * Threads: the main thread.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rlockctl.h"

#define SCAN_COUNT "1000"
#define BATCH 128            /* names read per round of pipelines */
#define QUEUE_MAX "999"      /* a fair queue's entries shown: 0..999 */
#define FIELDS_MAX 10000     /* a hash with more fields is no lock to list (show still reads it) */

const char *ctl_kind_name(int kind) {
    static const char *const names[] = {"plain", "fair", "rw", "fenced"};
    return kind >= 0 && kind <= KIND_FENCED ? names[kind] : "?";
}

int ctl_run(ctl *c, const rlock__inspect_cmd *cmds, int n, redisReply **replies) {
    return rlock__inspect_run(c->client, cmds, n, replies);
}

void ctl_free_replies(redisReply **replies, int n) {
    for (int i = 0; i < n; i++)
        if (replies[i] != NULL)
            freeReplyObject(replies[i]);
}

/* Redisson's prefixName(), the library's own (kind/layout.c). */
static char *prefixed(const char *prefix, const char *name, size_t len, size_t *out_len) {
    char *out = rlock__inspect_prefixed(prefix, name, len, out_len);
    if (out == NULL) {
        fprintf(stderr, "rlockctl: out of memory\n");
        exit(CTL_REDIS);
    }
    return out;
}

char *ctl_lock_channel(const char *name, size_t len, int kind, size_t *out_len) {
    return prefixed(kind == KIND_RW ? "redisson_rwlock" : "redisson_lock__channel", name, len,
                    out_len);
}

/* Whether s (len bytes) ends with ":<uuid 36 chars>:<digits>": a fair waiter's channel. */
static size_t waiter_suffix(const char *s, size_t len) {
    size_t i = len;
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')
        i--;
    if (i == len || i < 38 || s[i - 1] != ':' || s[i - 38] != ':')
        return 0;
    for (size_t k = i - 37; k < i - 1; k++)
        if (!(s[k] == '-' || (s[k] >= '0' && s[k] <= '9') || (s[k] >= 'a' && s[k] <= 'f') ||
              (s[k] >= 'A' && s[k] <= 'F')))
            return 0;
    return len - (i - 38);
}

/* The name inside "{N}" (N without '{'), else the text as it is: prefixName undone. */
static char *unprefixed(const char *s, size_t len, size_t *out_len) {
    if (len >= 2 && s[0] == '{' && s[len - 1] == '}' && memchr(s + 1, '{', len - 2) == NULL) {
        *out_len = len - 2;
        return xstrndup(s + 1, len - 2);
    }
    if (memchr(s, '{', len) == NULL)
        return NULL; /* Redisson would have wrapped it */
    *out_len = len;
    return xstrndup(s, len);
}

char *ctl_channel_lock(const char *channel, size_t len, size_t *out_len) {
    static const char *const prefixes[] = {"redisson_lock__channel:", "redisson_rwlock:"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t plen = strlen(prefixes[i]);
        if (len <= plen || memcmp(channel, prefixes[i], plen) != 0)
            continue;
        size_t rest = len - plen;
        if (i == 0)
            rest -= waiter_suffix(channel + plen, rest);
        return unprefixed(channel + plen, rest, out_len);
    }
    return NULL;
}

long long ctl_lock_waiters(const ctl_lock *lock) {
    long long n = 0;
    if (lock->kind == KIND_FAIR)
        return lock->queue_len;
    for (int i = 0; i < lock->nchannels; i++) {
        const ctl_channel *ch = &lock->channels[i];
        n += ch->classic + (ch->sharded > 0 ? ch->sharded : 0);
    }
    return n;
}

const char *ctl_renewal(const ctl_lock *lock, long long *wd_ms) {
    *wd_ms = -1;
    for (int i = 0; i < lock->nowners; i++)
        if (lock->owners[i].process != NULL && lock->owners[i].process->watchdog_timeout_ms > 0)
            *wd_ms = lock->owners[i].process->watchdog_timeout_ms;
    if (!lock->held || lock->ttl_ms < 0)
        return NULL;
    for (int i = 0; i < lock->nowners; i++) /* a TTL still high says nothing then */
        if (ctl_stuck(&lock->owners[i]) != NULL)
            return "stopped";
    if (*wd_ms <= 0)
        return NULL;
    return lock->ttl_ms * 3 >= *wd_ms * 2 ? "on time" : "late";
}

/* ---- names: SCAN on every master ---------------------------------------------- */

void ctl_names_add(ctl_names *ns, const char *s, size_t len) {
    if (ns->n == ns->cap) {
        ns->cap = ns->cap ? ns->cap * 2 : 64;
        ns->v = xrealloc(ns->v, (size_t)ns->cap * sizeof(*ns->v));
    }
    ns->v[ns->n++] = (ctl_name){.s = xstrndup(s, len), .len = len};
}

void ctl_names_free(ctl_names *ns) {
    for (int i = 0; i < ns->n; i++)
        free(ns->v[i].s);
    free(ns->v);
    *ns = (ctl_names){0};
}

static int cmp_bytes(const char *a, size_t alen, const char *b, size_t blen) {
    int r = memcmp(a, b, alen < blen ? alen : blen);
    return r != 0 ? r : (alen > blen) - (alen < blen);
}

static int cmp_names(const void *a, const void *b) {
    const ctl_name *x = a, *y = b;
    return cmp_bytes(x->s, x->len, y->s, y->len);
}

/* Sorts and drops repeats (SCAN may return a key twice). */
static void names_sort_unique(ctl_names *ns) {
    int out = 0;
    if (ns->n > 1)
        qsort(ns->v, (size_t)ns->n, sizeof(*ns->v), cmp_names);
    for (int i = 0; i < ns->n; i++) {
        if (out > 0 && cmp_names(&ns->v[out - 1], &ns->v[i]) == 0) {
            free(ns->v[i].s);
            continue;
        }
        ns->v[out++] = ns->v[i];
    }
    ns->n = out;
}

/* SCAN's reply: [cursor, [key, ...]]. */
static int is_scan_reply(const redisReply *r) {
    return r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
           r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_ARRAY;
}

/* Every key of type `type` matching `match` on one master; keep() sifts each page. */
static int scan_master(ctl *c, rlock__inspect_node *node, const char *match, const char *type,
                       ctl_sift keep, ctl_names *out) {
    char cursor[32] = "0";
    do {
        int page = out->n;
        const char *argv[] = {"SCAN", cursor, "MATCH", match, "COUNT", SCAN_COUNT, "TYPE", type};
        rlock__inspect_cmd cmd = {.node = node, .argc = 8, .argv = argv};
        redisReply *r = NULL;
        int status = ctl_run(c, &cmd, 1, &r);
        if (status != RLOCK_OK)
            return status;
        if (!is_scan_reply(r)) {
            status = ctl_reply_failed(&cmd, r);
            freeReplyObject(r);
            return status;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            const redisReply *k = r->element[1]->element[i];
            if (k->type == REDIS_REPLY_STRING)
                ctl_names_add(out, k->str, k->len);
        }
        freeReplyObject(r);
        status = keep != NULL ? keep(c, out, page) : RLOCK_OK;
        if (status != RLOCK_OK)
            return status;
    } while (strcmp(cursor, "0") != 0);
    return RLOCK_OK;
}

int ctl_scan(ctl *c, const char *match, const char *type, ctl_sift keep, ctl_names *out) {
    rlock__inspect_node *masters[RLOCK__INSPECT_MAX_MASTERS];
    int n = 0;
    int status = rlock__inspect_masters(c->client, masters, RLOCK__INSPECT_MAX_MASTERS, &n);
    for (int i = 0; i < n && status == RLOCK_OK; i++)
        status = scan_master(c, masters[i], match, type, keep, out);
    return status;
}

/* A lock's hash: a TTL (PTTL >= 0) and 1..FIELDS_MAX fields. */
static int may_be_lock(const redisReply *pttl, const redisReply *hlen) {
    return pttl->type == REDIS_REPLY_INTEGER && pttl->integer >= 0 &&
           hlen->type == REDIS_REPLY_INTEGER && hlen->integer > 0 && hlen->integer <= FIELDS_MAX;
}

/*
 * Drops from ns->v[from..] the hashes that cannot be locks, after a PTTL and
 * an HLEN each (one pipeline per node): a lock's hash always has a TTL
 * (Redisson's scripts set one with every change) and a field per holding
 * thread. So the sessions, caches and million-field hashes that SCAN ...
 * TYPE hash returns too are never HGETALLed, which on a production Redis
 * would block it and move the lot, for nothing.
 */
static int keep_lock_hashes(ctl *c, ctl_names *ns, int from) {
    int n = ns->n - from, kept = from;
    if (n == 0)
        return RLOCK_OK;
    rlock__inspect_cmd *cmds = xcalloc((size_t)n * 2, sizeof(*cmds));
    const char **argv = xcalloc((size_t)n * 4, sizeof(*argv));
    size_t *argvlen = xcalloc((size_t)n * 4, sizeof(*argvlen));
    redisReply **rs = xcalloc((size_t)n * 2, sizeof(*rs));
    for (int i = 0; i < n * 2; i++) {
        const ctl_name *name = &ns->v[from + i / 2];
        argv[i * 2] = i % 2 == 0 ? "PTTL" : "HLEN", argvlen[i * 2] = 4;
        argv[i * 2 + 1] = name->s, argvlen[i * 2 + 1] = name->len;
        cmds[i] = (rlock__inspect_cmd){.argc = 2, .argv = argv + i * 2, .argvlen = argvlen + i * 2};
    }
    int status = ctl_run(c, cmds, n * 2, rs);
    for (int i = 0; i < n * 2 && status == RLOCK_OK; i++)
        if (rs[i]->type == REDIS_REPLY_ERROR && strncmp(rs[i]->str, "WRONGTYPE", 9) != 0)
            status = ctl_reply_failed(&cmds[i], rs[i]);
    for (int i = 0; i < n; i++) { /* on an error all are kept, for the caller to free */
        if (status == RLOCK_OK && !may_be_lock(rs[i * 2], rs[i * 2 + 1]))
            free(ns->v[from + i].s);
        else
            ns->v[kept++] = ns->v[from + i];
    }
    ns->n = kept;
    ctl_free_replies(rs, n * 2);
    free(rs), free(argvlen), free(argv), free(cmds);
    return status;
}

/* The lock names of fair queues (redisson_lock_queue:...) matching pattern. */
static int scan_queues(ctl *c, const char *pattern, ctl_names *out) {
    static const char prefix[] = "redisson_lock_queue:";
    ctl_names queues = {0};
    int status = ctl_scan(c, "redisson_lock_queue:*", "list", NULL, &queues);
    for (int i = 0; i < queues.n && status == RLOCK_OK; i++) {
        size_t len;
        char *name = unprefixed(queues.v[i].s + sizeof(prefix) - 1,
                                queues.v[i].len - (sizeof(prefix) - 1), &len);
        if (name != NULL && ctl_glob_match(pattern, name, len))
            ctl_names_add(out, name, len);
        free(name);
    }
    ctl_names_free(&queues);
    return status;
}

/* ---- one lock's layout ------------------------------------------------------------ */

enum { R_TYPE, R_HASH, R_PTTL, R_QUEUE, R_QUEUE_LEN, R_TIMEOUTS, R_TOKEN, R_PER_NAME };

/* The commands reading name's layout into cmds[0..R_PER_NAME); keys in keys[0..3). */
static void layout_cmds(const char *name, size_t len, char **keys, size_t *klen,
                        rlock__inspect_cmd *cmds, const char **argv, size_t *argvlen) {
    keys[0] = prefixed("redisson_lock_queue", name, len, &klen[0]);
    keys[1] = prefixed("redisson_lock_timeout", name, len, &klen[1]);
    keys[2] = prefixed("redisson_lock_token", name, len, &klen[2]);
    static const char *const verbs[R_PER_NAME][4] = {
        {"TYPE"}, {"HGETALL"}, {"PTTL"}, {"LRANGE", NULL, "0", QUEUE_MAX}, {"LLEN"},
        {"ZRANGE", NULL, "0", "-1"}, {"GET"}};
    static const int argcs[R_PER_NAME] = {2, 2, 2, 4, 2, 5, 2};
    const char *key[R_PER_NAME] = {name, name, name, keys[0], keys[0], keys[1], keys[2]};
    size_t key_len[R_PER_NAME] = {len, len, len, klen[0], klen[0], klen[1], klen[2]};
    for (int i = 0; i < R_PER_NAME; i++) {
        const char **a = argv + i * 5;
        size_t *l = argvlen + i * 5;
        for (int k = 0; k < argcs[i]; k++) {
            a[k] = k == 1 ? key[i] : k == 4 ? "WITHSCORES" : verbs[i][k];
            l[k] = k == 1 ? key_len[i] : strlen(a[k]);
        }
        cmds[i] = (rlock__inspect_cmd){.argc = argcs[i], .argv = a, .argvlen = l};
    }
}

static int is_digits(const char *s, size_t len) {
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/*
 * Parses an owner field "<id>:<thread>" or "<id>:<thread>:write" (the id
 * without ':'). 0, or -1 if it is no owner field.
 */
static int parse_owner(const char *field, size_t len, ctl_owner *o) {
    const char *colon = memchr(field, ':', len);
    if (colon == NULL || colon == field)
        return -1;
    size_t id_len = (size_t)(colon - field), rest = len - id_len - 1;
    const char *thread = colon + 1;
    int write = rest > 6 && memcmp(thread + rest - 6, ":write", 6) == 0;
    size_t thread_len = write ? rest - 6 : rest;
    if (!is_digits(thread, thread_len))
        return -1;
    *o = (ctl_owner){.field = xstrndup(field, len), .field_len = len,
                     .client_id = xstrndup(field, id_len),
                     .thread = xstrndup(thread, thread_len), .write = write,
                     .conns = -1, .idle_s = -1};
    return 0;
}

static void owner_clear(ctl_owner *o) {
    free(o->conn_name);
    free(o->field);
    free(o->client_id);
    free(o->thread);
}

static void lock_clear(ctl_lock *l) {
    for (int i = 0; i < l->nowners; i++)
        owner_clear(&l->owners[i]);
    for (int i = 0; i < l->nqueue; i++)
        owner_clear(&l->queue[i].who);
    for (int i = 0; i < l->nchannels; i++)
        free(l->channels[i].name);
    free(l->owners);
    free(l->queue);
    free(l->channels);
    free(l->name);
}

/* The hash's fields into l (owners, mode); -1 if a field is not a lock's. */
static int read_hash(const redisReply *h, ctl_lock *l) {
    if (h == NULL || h->type != REDIS_REPLY_ARRAY || h->elements == 0 || h->elements % 2 != 0)
        return -1;
    l->owners = xcalloc(h->elements / 2, sizeof(*l->owners));
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i], *v = h->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            return -1;
        if (f->len == 4 && memcmp(f->str, "mode", 4) == 0) {
            l->mode = strcmp(v->str, "write") == 0 ? "write" : "read";
            continue;
        }
        ctl_owner *o = &l->owners[l->nowners];
        if (!is_digits(v->str, v->len) || parse_owner(f->str, f->len, o) != 0)
            return -1;
        o->holds = strtoll(v->str, NULL, 10);
        l->nowners++;
    }
    return 0;
}

/* The fair queue and its deadlines into l. */
static void read_queue(const redisReply *q, const redisReply *t, ctl_lock *l) {
    if (q == NULL || q->type != REDIS_REPLY_ARRAY || q->elements == 0)
        return;
    l->queue = xcalloc(q->elements, sizeof(*l->queue));
    for (size_t i = 0; i < q->elements; i++) {
        const redisReply *e = q->element[i];
        ctl_waiter *w = &l->queue[l->nqueue];
        if (e->type != REDIS_REPLY_STRING || parse_owner(e->str, e->len, &w->who) != 0)
            continue;
        w->deadline_ms = -1;
        for (size_t k = 0; t != NULL && t->type == REDIS_REPLY_ARRAY && k + 1 < t->elements; k += 2)
            if (t->element[k]->type == REDIS_REPLY_STRING && t->element[k]->len == e->len &&
                memcmp(t->element[k]->str, e->str, e->len) == 0)
                w->deadline_ms = strtoll(t->element[k + 1]->str, NULL, 10);
        l->nqueue++;
    }
}

/* What TYPE answered, as words ("a string"). */
static void describe_type(const char *type, char *buf, size_t size) {
    snprintf(buf, size, "%s %s", strchr("aeiou", type[0]) != NULL ? "an" : "a", type);
}

/*
 * Makes a lock of name from its replies (rs[R_PER_NAME]); lookup says what
 * the name holds. 1 if it is a lock (held, or a fair lock with a queue).
 */
static int read_layout(const char *name, size_t len, redisReply **rs, ctl_lock *l,
                       ctl_lookup *lookup) {
    const redisReply *type = rs[R_TYPE], *token = rs[R_TOKEN];
    *l = (ctl_lock){.ttl_ms = -2, .token = -1};
    *lookup = (ctl_lookup){.found = FOUND_NONE, .token = -1};
    if (token != NULL && token->type == REDIS_REPLY_STRING && is_digits(token->str, token->len))
        l->token = lookup->token = strtoll(token->str, NULL, 10);
    if (type == NULL || type->type != REDIS_REPLY_STATUS)
        return 0;
    int hash = strcmp(type->str, "hash") == 0;
    if (!hash && strcmp(type->str, "none") != 0) {
        lookup->found = FOUND_OTHER;
        describe_type(type->str, lookup->what, sizeof(lookup->what));
        return 0;
    }
    l->name = xstrndup(name, len);
    l->name_len = len;
    read_queue(rs[R_QUEUE], rs[R_TIMEOUTS], l);
    l->queue_len = rs[R_QUEUE_LEN]->type == REDIS_REPLY_INTEGER ? rs[R_QUEUE_LEN]->integer : 0;
    if (hash) {
        l->held = 1;
        l->ttl_ms = rs[R_PTTL] != NULL && rs[R_PTTL]->type == REDIS_REPLY_INTEGER
                        ? rs[R_PTTL]->integer : -1;
        if (read_hash(rs[R_HASH], l) != 0 || l->ttl_ms == -1) {
            lookup->found = FOUND_OTHER;
            snprintf(lookup->what, sizeof(lookup->what), "a hash %s", /* "..., not a lock" */
                     l->ttl_ms == -1 ? "without a TTL" : "with a field not <id>:<thread>");
            lock_clear(l);
            return 0;
        }
    }
    l->kind = l->mode != NULL ? KIND_RW
              : l->nqueue > 0 ? KIND_FAIR
              : l->token >= 0 ? KIND_FENCED : KIND_PLAIN;
    if (!hash && l->nqueue == 0) { /* neither held nor queued */
        lock_clear(l);
        return 0;
    }
    lookup->found = FOUND_LOCK;
    return 1;
}

/* ---- waiters: the channels' subscribers ------------------------------------------- */

static void add_channel(ctl_lock *l, char *name, size_t len) {
    l->channels = xrealloc(l->channels, (size_t)(l->nchannels + 1) * sizeof(*l->channels));
    l->channels[l->nchannels++] = (ctl_channel){.name = name, .len = len, .sharded = -1};
}

/* The channels the lock's waiters sleep on: each queued waiter's, or the lock's. */
static void lock_channels(ctl_lock *l) {
    size_t len;
    char *base = ctl_lock_channel(l->name, l->name_len, l->kind, &len);
    if (l->kind != KIND_FAIR) {
        add_channel(l, base, len);
        return;
    }
    for (int i = 0; i < l->nqueue; i++) {
        const ctl_owner *w = &l->queue[i].who;
        char *ch = xmalloc(len + 1 + w->field_len + 1);
        memcpy(ch, base, len);
        ch[len] = ':';
        memcpy(ch + len + 1, w->field, w->field_len);
        ch[len + 1 + w->field_len] = '\0';
        add_channel(l, ch, len + 1 + w->field_len);
    }
    free(base);
}

static long long count_of(const redisReply *r) {
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[1]->type != REDIS_REPLY_INTEGER)
        return -1;
    return r->element[1]->integer;
}

/* Redis < 7 has no PUBSUB SHARDNUMSUB: "ERR unknown subcommand ..." (6.0: "Unknown"). */
static int is_unknown_subcommand(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR && strncasecmp(r->str, "ERR unknown subcommand", 22) == 0;
}

/* PUBSUB NUMSUB and SHARDNUMSUB of every channel of locks[0..n), at the channel's node. */
static int read_subscribers(ctl *c, ctl_lock *locks, int n) {
    int total = 0, k = 0;
    for (int i = 0; i < n; i++) {
        lock_channels(&locks[i]);
        total += locks[i].nchannels;
    }
    rlock__inspect_cmd *cmds = xcalloc((size_t)total * 2, sizeof(*cmds));
    const char **argv = xcalloc((size_t)total * 6, sizeof(*argv));
    size_t *argvlen = xcalloc((size_t)total * 6, sizeof(*argvlen));
    redisReply **rs = xcalloc((size_t)total * 2, sizeof(*rs));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < locks[i].nchannels; j++, k += 2) {
            ctl_channel *ch = &locks[i].channels[j];
            rlock__inspect_node *node = rlock__inspect_channel_node(c->client, ch->name, ch->len);
            for (int s = 0; s < 2; s++) {
                const char **a = argv + (k + s) * 3;
                size_t *l = argvlen + (k + s) * 3;
                a[0] = "PUBSUB", a[1] = s == 0 ? "NUMSUB" : "SHARDNUMSUB", a[2] = ch->name;
                l[0] = 6, l[1] = strlen(a[1]), l[2] = ch->len;
                cmds[k + s] = (rlock__inspect_cmd){.node = node, .argc = 3, .argv = a,
                                                   .argvlen = l};
            }
        }
    int status = ctl_run(c, cmds, total * 2, rs);
    for (k = 0; k < total * 2 && status == RLOCK_OK; k++)
        if (count_of(rs[k]) < 0 && !(k % 2 == 1 && is_unknown_subcommand(rs[k])))
            status = ctl_reply_failed(&cmds[k], rs[k]);
    k = 0;
    for (int i = 0; i < n && status == RLOCK_OK; i++)
        for (int j = 0; j < locks[i].nchannels; j++, k += 2) {
            locks[i].channels[j].classic = count_of(rs[k]);
            locks[i].channels[j].sharded = count_of(rs[k + 1]); /* -1: Redis < 7 */
        }
    ctl_free_replies(rs, total * 2);
    free(rs);
    free(argvlen);
    free(argv);
    free(cmds);
    return status;
}

/* ---- owners' processes --------------------------------------------------------------- */

static int has_id(char **ids, int n, const char *id) {
    for (int i = 0; i < n; i++)
        if (strcmp(ids[i], id) == 0)
            return 1;
    return 0;
}

static const ctl_process *process_of(const ctl_locks *ls, const char *id) {
    for (int i = 0; i < ls->nprocesses; i++)
        if (ls->processes[i] != NULL && strcmp(ls->processes[i]->id, id) == 0)
            return ls->processes[i];
    return NULL;
}

/* The client id of owner k of l: its owners, then its queued waiters. */
static char *party_id(const ctl_lock *l, int k) {
    return k < l->nowners ? l->owners[k].client_id : l->queue[k - l->nowners].who.client_id;
}

/* Reads the registrations of the clients of locks[first..] and points owners at them. */
static int read_owner_processes(ctl *c, ctl_locks *ls, int first) {
    int total = 0, n = 0;
    for (int i = first; i < ls->n; i++)
        total += ls->v[i].nowners + ls->v[i].nqueue;
    char **ids = xcalloc((size_t)total, sizeof(*ids));
    for (int i = first; i < ls->n; i++)
        for (int k = 0; k < ls->v[i].nowners + ls->v[i].nqueue; k++) {
            char *id = party_id(&ls->v[i], k);
            if (process_of(ls, id) == NULL && !has_id(ids, n, id))
                ids[n++] = id;
        }
    ls->processes = xrealloc(ls->processes, (size_t)(ls->nprocesses + n) * sizeof(*ls->processes));
    for (int i = 0; i < n; i++)
        ls->processes[ls->nprocesses + i] = NULL;
    int status = ctl_read_processes(c, ids, n, ls->processes + ls->nprocesses);
    ls->nprocesses += n;
    for (int i = first; i < ls->n; i++) {
        ctl_lock *l = &ls->v[i];
        for (int k = 0; k < l->nowners; k++)
            l->owners[k].process = process_of(ls, l->owners[k].client_id);
        for (int k = 0; k < l->nqueue; k++)
            l->queue[k].who.process = process_of(ls, l->queue[k].who.client_id);
    }
    free(ids);
    return status;
}

/* Whether a connection name "rlock:<host>:<pid>:<id8>" is one of client id's. */
static int conn_of(const char *name, const char *id) {
    size_t len = strlen(name), idl = strlen(id);
    return idl >= 8 && len > 9 && name[len - 9] == ':' && memcmp(name + len - 8, id, 8) == 0;
}

/* Counts o's client's connections among cl's (unknown if CLIENT LIST was refused). */
static void match_conns(ctl_owner *o, const ctl_clients *cl) {
    o->conns = cl->conns_known ? 0 : -1;
    o->idle_s = -1;
    for (int i = 0; i < cl->nconns; i++) {
        const ctl_conns *k = &cl->conns[i];
        if (!conn_of(k->name, o->client_id))
            continue;
        o->conns = (o->conns < 0 ? 0 : o->conns) + k->count;
        if (o->idle_s < 0 || k->idle_s < o->idle_s)
            o->idle_s = k->idle_s;
        if (o->conn_name == NULL)
            o->conn_name = xstrndup(k->name, strlen(k->name));
    }
}

/*
 * Matches the owners and waiters of locks[first..] to their clients'
 * connections: a registration says who a client was, its connections
 * whether the process is still there (a SIGKILLed one's close at once, a
 * stopped one's stay, idle).
 */
static int read_owner_conns(ctl *c, ctl_locks *ls, int first) {
    ctl_clients cl = {0};
    if (first == ls->n)
        return RLOCK_OK;
    int status = ctl_list_conns(c, &cl);
    for (int i = first; i < ls->n && status == RLOCK_OK; i++) {
        for (int k = 0; k < ls->v[i].nowners; k++)
            match_conns(&ls->v[i].owners[k], &cl);
        for (int k = 0; k < ls->v[i].nqueue; k++)
            match_conns(&ls->v[i].queue[k].who, &cl);
    }
    ctl_clients_free(&cl);
    return status;
}

const char *ctl_stuck(const ctl_owner *o) {
    if (o->conns < 0)
        return NULL;
    if (o->conns == 0)
        return o->process != NULL ? "no connection: process gone?" : NULL;
    /*
     * Without a registration its watchdog timeout is not known: the default's
     * (a client with register_client = 0 has connections and no registration
     * while alive, so its idle time decides, not the missing hash).
     */
    long long wd = o->process != NULL && o->process->watchdog_timeout_ms > 0
                       ? o->process->watchdog_timeout_ms : 30000;
    if (o->idle_s * 1000 <= wd * 2 / 3)
        return NULL;
    return o->process != NULL ? "connections idle: process stopped?"
                              : "no registration, connections idle: process stopped?";
}

const char *ctl_head_stuck(const ctl_lock *l) {
    if (l->kind != KIND_FAIR || l->nqueue == 0)
        return NULL;
    const ctl_owner *head = &l->queue[0].who;
    const char *why = ctl_stuck(head);
    if (why != NULL)
        return why;
    /*
     * A live head takes a free lock within a round trip of its release; one
     * still queued whose registration is gone while its connections stay
     * (a live client rewrites it every third of its TTL) is stopped.
     */
    if (!l->held && head->process == NULL && head->conns > 0)
        return "registration expired while connected: process stopped?";
    if (head->conns > 0)
        return NULL; /* its connections told: a waiter subscribes just after it queues */
    /*
     * Every waiter, rlock's or Java Redisson's, listens on its own channel
     * while queued (lock_channels: channels[0] is the head's); a stopped
     * process still does, a dead one does not -- which tells of a killed Java
     * head, and of an rlock head whose registration has expired too.
     */
    const ctl_channel *ch = l->nchannels > 0 ? &l->channels[0] : NULL;
    if (ch != NULL && ch->classic == 0 && ch->sharded <= 0)
        return "nobody listens on its channel: process gone?";
    return NULL;
}

/* ---- batches ----------------------------------------------------------------------- */

static void locks_push(ctl_locks *ls, const ctl_lock *l) {
    if (ls->n == ls->cap) {
        ls->cap = ls->cap ? ls->cap * 2 : 16;
        ls->v = xrealloc(ls->v, (size_t)ls->cap * sizeof(*ls->v));
    }
    ls->v[ls->n++] = *l;
}

/*
 * Reads names[0..n) (one pipeline per node) and appends the locks among them
 * to out; lookups[i] (may be NULL) says what each name holds.
 */
static int read_batch(ctl *c, const ctl_name *names, int n, ctl_locks *out,
                      ctl_lookup *lookups) {
    int per = R_PER_NAME, first = out->n;
    rlock__inspect_cmd *cmds = xcalloc((size_t)n * per, sizeof(*cmds));
    const char **argv = xcalloc((size_t)n * per * 5, sizeof(*argv));
    size_t *argvlen = xcalloc((size_t)n * per * 5, sizeof(*argvlen));
    char **keys = xcalloc((size_t)n * 3, sizeof(*keys));
    size_t *klen = xcalloc((size_t)n * 3, sizeof(*klen));
    redisReply **rs = xcalloc((size_t)n * per, sizeof(*rs));
    for (int i = 0; i < n; i++)
        layout_cmds(names[i].s, names[i].len, keys + i * 3, klen + i * 3, cmds + i * per,
                    argv + (size_t)i * per * 5, argvlen + (size_t)i * per * 5);
    int status = ctl_run(c, cmds, n * per, rs);
    for (int i = 0; i < n * per && status == RLOCK_OK; i++)
        if (rs[i]->type == REDIS_REPLY_ERROR && strncmp(rs[i]->str, "WRONGTYPE", 9) != 0)
            status = ctl_reply_failed(&cmds[i], rs[i]); /* WRONGTYPE: a key of another type */
    for (int i = 0; i < n && status == RLOCK_OK; i++) {
        ctl_lock l;
        ctl_lookup ignored = {0}, *lookup = lookups != NULL ? &lookups[i] : &ignored;
        if (read_layout(names[i].s, names[i].len, rs + i * per, &l, lookup))
            locks_push(out, &l);
    }
    ctl_free_replies(rs, n * per);
    for (int i = 0; i < n * 3; i++)
        free(keys[i]);
    free(rs), free(klen), free(keys), free(argvlen), free(argv), free(cmds);
    if (status == RLOCK_OK)
        status = read_subscribers(c, out->v + first, out->n - first);
    if (status == RLOCK_OK)
        status = read_owner_processes(c, out, first);
    if (status == RLOCK_OK)
        status = read_owner_conns(c, out, first);
    return status;
}

int ctl_find_locks(ctl *c, const char *pattern, ctl_locks *out) {
    ctl_names ns = {0};
    *out = (ctl_locks){0};
    int status = ctl_scan(c, pattern != NULL ? pattern : "*", "hash", keep_lock_hashes, &ns);
    if (status == RLOCK_OK)
        status = scan_queues(c, pattern, &ns);
    names_sort_unique(&ns);
    for (int i = 0; i < ns.n && status == RLOCK_OK; i += BATCH)
        status = read_batch(c, ns.v + i, ns.n - i < BATCH ? ns.n - i : BATCH, out, NULL);
    ctl_names_free(&ns);
    return status;
}

int ctl_find_lock(ctl *c, const char *name, size_t len, ctl_lookup *lookup, ctl_locks *out) {
    ctl_name one = {.s = (char *)name, .len = len};
    *out = (ctl_locks){0};
    return read_batch(c, &one, 1, out, lookup);
}

void ctl_locks_free(ctl_locks *locks) {
    for (int i = 0; i < locks->n; i++)
        lock_clear(&locks->v[i]);
    for (int i = 0; i < locks->nprocesses; i++)
        ctl_process_free(locks->processes[i]);
    free(locks->processes);
    free(locks->v);
    *locks = (ctl_locks){0};
}
