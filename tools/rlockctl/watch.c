/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * watch.c - `rlockctl watch NAME|PATTERN`: a screen redrawn every interval,
 * like top: each matching lock's holders, TTL, waiters and hand-offs per
 * second.
 *
 * Hand-offs are counted two ways, because one way misses some:
 *   - unlock messages heard: the tool listens on the locks' channels
 *     (PSUBSCRIBE redisson_lock__channel:* and redisson_rwlock:* on one
 *     master, which hears every classic PUBLISH -- a Cluster broadcasts
 *     them; and, when the deployment's locks use sharded pub/sub, SSUBSCRIBE
 *     to each shown lock's channels at their shard). Every release to zero,
 *     force unlock and fair hand-over publishes one;
 *   - an in-process hand-off (rlock_config.local_handoffs) publishes
 *     nothing: it shows as the holder changing between two screens. When
 *     that happens and no message was heard for the lock meanwhile, it
 *     counts one (several in one interval still count one: a lower bound).
 * Rate = (messages + such changes) / the interval's length.
 *
 * No curses: an ANSI "home + clear" before each screen on a terminal; piped
 * (tests, logs), screens follow each other, each opened by a header line.
 *
 * A failover (Sentinel, Cluster) does not end a watch once its first screen
 * is drawn: a listener whose connection fails is dropped, and so is the
 * PSUBSCRIBE's listener when its server is no longer among the masters the
 * client routes to (stopped or cut off, it reports no error); the next
 * screen listens again where the client now routes (the new master). A
 * sample that fails is said on stderr in place of its screen and tried
 * again an interval later.
 *
 * Threads: the main thread. SIGINT ends the loop (the handler sets a flag).
 */
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rlockctl.h"

#define MAX_LISTENERS (RLOCK__INSPECT_MAX_MASTERS + 1)

/* Messages heard for one lock (keyed by the name its channel names). */
typedef struct tally {
    char *key;
    size_t len;
    long long interval;      /* since the last screen */
    long long total;
    char *owners;            /* the holders at the last screen ("" if free) */
} tally;

typedef struct listener {
    rlock__inspect_node *node;
    redisContext *ctx;
    int classic;             /* it carries the PSUBSCRIBE */
} listener;

typedef struct watch {
    ctl *c;
    const char *target;
    int pattern;             /* target has glob characters */
    char *target_key;        /* not a pattern: the tally key of target (tally_key) */
    size_t target_key_len;
    int refusal_said;        /* a refused subscription was reported */
    int sharded;             /* the deployment's locks use SPUBLISH */
    listener ls[MAX_LISTENERS];
    int nls;
    char **ssubscribed;      /* channels SSUBSCRIBEd so far */
    size_t *sslen;
    int nss;
    tally *t;
    int nt;
    long long heard;         /* messages in all, since start */
} watch;

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static tally *tally_of(watch *w, const char *key, size_t len) {
    for (int i = 0; i < w->nt; i++)
        if (w->t[i].len == len && memcmp(w->t[i].key, key, len) == 0)
            return &w->t[i];
    w->t = xrealloc(w->t, (size_t)(w->nt + 1) * sizeof(*w->t));
    w->t[w->nt] = (tally){.key = xstrndup(key, len), .len = len, .owners = xstrndup("", 0)};
    return &w->t[w->nt++];
}

/* The key a lock's tally goes by: as its channels name it ("X" for "{X}" too). Owned. */
static char *tally_key(const char *name, size_t len, size_t *key_len) {
    size_t clen;
    char *channel = ctl_lock_channel(name, len, KIND_PLAIN, &clen);
    char *key = ctl_channel_lock(channel, clen, key_len);
    free(channel);
    if (key != NULL)
        return key;
    *key_len = len;
    return xstrndup(name, len);
}

static tally *tally_of_lock(watch *w, const ctl_lock *l) {
    size_t len;
    char *key = tally_key(l->name, l->name_len, &len);
    tally *t = tally_of(w, key, len);
    free(key);
    return t;
}

/*
 * Whether a lock heard of (by its tally key) is one this watch shows. Others
 * are not tallied: the listener hears every lock on the server, and a watch
 * running for hours would keep (and search, per message) a tally of each.
 */
static int watched(const watch *w, const char *key, size_t len) {
    if (w->pattern)
        return ctl_glob_match(w->target, key, len);
    return len == w->target_key_len && memcmp(key, w->target_key, len) == 0;
}

/* ---- listening ------------------------------------------------------------------------ */

static listener *listener_at(watch *w, rlock__inspect_node *node) {
    for (int i = 0; i < w->nls; i++)
        if (w->ls[i].node == node)
            return &w->ls[i];
    if (w->nls == MAX_LISTENERS)
        return NULL;
    listener *l = &w->ls[w->nls];
    int status = rlock__inspect_listen(w->c->client, node, &l->ctx);
    if (status != RLOCK_OK) {
        ctl_redis_error("watch: listening", status);
        return NULL;
    }
    l->node = node;
    l->classic = 0;
    w->nls++;
    return l;
}

static void forget_sharded(watch *w) {
    for (int i = 0; i < w->nss; i++)
        free(w->ssubscribed[i]);
    w->nss = 0;
}

/*
 * Drops listener i (why: said on stderr): what it carried is subscribed
 * again at the next screen, where the client routes then -- the PSUBSCRIBE
 * at the master, every shown lock's SSUBSCRIBE at its shard (again also
 * those on listeners still up: harmless).
 */
static void drop_listener(watch *w, int i, const char *why) {
    listener *l = &w->ls[i];
    fputs("rlockctl: watch: ", stderr);
    ctl_put_str(stderr, why);
    fputs("; listening again at the next screen\n", stderr);
    rlock__inspect_close(l->ctx);
    forget_sharded(w);
    w->ls[i] = w->ls[--w->nls];
}

/* Classic messages: PSUBSCRIBE on the first master (every node hears every PUBLISH). */
static int listen_classic(watch *w) {
    static const char *const argv[] = {"PSUBSCRIBE", "redisson_lock__channel:*",
                                       "redisson_rwlock:*"};
    static const size_t argvlen[] = {10, 24, 17};
    rlock__inspect_node *masters[RLOCK__INSPECT_MAX_MASTERS];
    int n = 0;
    int status = rlock__inspect_masters(w->c->client, masters, RLOCK__INSPECT_MAX_MASTERS, &n);
    if (status != RLOCK_OK || n == 0)
        return ctl_redis_error("watch", status != RLOCK_OK ? status : RLOCK_EIO);
    listener *l = listener_at(w, masters[0]);
    if (l == NULL)
        return CTL_REDIS;
    status = rlock__inspect_subscribe(l->ctx, 3, (const char **)argv, argvlen);
    if (status != RLOCK_OK)
        return ctl_redis_error("watch: PSUBSCRIBE", status);
    l->classic = 1;
    return CTL_OK;
}

/* Drops the PSUBSCRIBE's listener if its server is no longer one the client routes to. */
static void follow_masters(watch *w) {
    rlock__inspect_node *masters[RLOCK__INSPECT_MAX_MASTERS];
    int n = 0;
    if (rlock__inspect_masters(w->c->client, masters, RLOCK__INSPECT_MAX_MASTERS, &n) != RLOCK_OK)
        return;
    for (int i = 0; i < w->nls; i++) {
        if (!w->ls[i].classic)
            continue;
        for (int k = 0; k < n; k++)
            if (masters[k] == w->ls[i].node)
                return;
        drop_listener(w, i, "the listener's server is no longer a master the client uses");
        return;
    }
}

/* Whether a listener carries the PSUBSCRIBE (none after its drop: listen again). */
static int listening_classic(const watch *w) {
    for (int i = 0; i < w->nls; i++)
        if (w->ls[i].classic)
            return 1;
    return 0;
}

static int ssubscribed(const watch *w, const char *ch, size_t len) {
    for (int i = 0; i < w->nss; i++)
        if (w->sslen[i] == len && memcmp(w->ssubscribed[i], ch, len) == 0)
            return 1;
    return 0;
}

/* Sharded messages: SSUBSCRIBE each new channel of the locks shown, at its shard. */
static void listen_sharded(watch *w, const ctl_locks *locks) {
    for (int i = 0; w->sharded && i < locks->n; i++)
        for (int k = 0; k < locks->v[i].nchannels; k++) {
            const ctl_channel *ch = &locks->v[i].channels[k];
            if (ssubscribed(w, ch->name, ch->len))
                continue;
            listener *l = listener_at(w, rlock__inspect_channel_node(w->c->client, ch->name,
                                                                     ch->len));
            const char *argv[] = {"SSUBSCRIBE", ch->name};
            size_t argvlen[] = {10, ch->len};
            if (l == NULL || rlock__inspect_subscribe(l->ctx, 2, argv, argvlen) != RLOCK_OK)
                continue; /* counted by holder changes only */
            w->ssubscribed = xrealloc(w->ssubscribed, (size_t)(w->nss + 1) * sizeof(char *));
            w->sslen = xrealloc(w->sslen, (size_t)(w->nss + 1) * sizeof(size_t));
            w->ssubscribed[w->nss] = xstrndup(ch->name, ch->len);
            w->sslen[w->nss++] = ch->len;
        }
}

/* A subscription the server refused (an ACL without the channels): said once. */
static void take_refusal(watch *w, const redisReply *r) {
    if (w->refusal_said++)
        return;
    fputs("rlockctl: watch: a subscription was refused: ", stderr);
    ctl_put_str(stderr, r->str);
    fputs("; hand-offs are counted from holder changes only\n", stderr);
}

/* Counts one message of a watched lock, or says a refused subscription. */
static void take_message(watch *w, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) {
        take_refusal(w, r);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    int at = strcmp(kind, "pmessage") == 0                                        ? 2
             : strcmp(kind, "message") == 0 || strcmp(kind, "smessage") == 0 ? 1 : -1;
    if (at < 0 || (size_t)at >= r->elements || r->element[at]->type != REDIS_REPLY_STRING)
        return;
    size_t len;
    char *key = ctl_channel_lock(r->element[at]->str, r->element[at]->len, &len);
    if (key != NULL && watched(w, key, len)) {
        tally *t = tally_of(w, key, len);
        t->interval++;
        t->total++;
        w->heard++;
    }
    free(key);
}

/* Reads what came on every listener until deadline_ms (or an interrupt). */
static int listen_until(watch *w, int64_t deadline_ms) {
    struct pollfd pfd[MAX_LISTENERS];
    while (!interrupted) {
        int64_t left = deadline_ms - rlock__inspect_now_ms();
        if (left <= 0)
            return CTL_OK;
        for (int i = 0; i < w->nls; i++)
            pfd[i] = (struct pollfd){.fd = w->ls[i].ctx->fd, .events = POLLIN};
        if (poll(pfd, (nfds_t)w->nls, (int)left) <= 0)
            continue; /* timeout, or EINTR: the loop checks both */
        int polled = w->nls;
        for (int i = polled - 1; i >= 0; i--) { /* last first: a drop moves the last to i */
            redisReply *r = NULL;
            int status;
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            while ((status = rlock__inspect_read(w->ls[i].ctx, rlock__inspect_now_ms(), &r)) ==
                   RLOCK_OK) {
                take_message(w, r);
                freeReplyObject(r);
            }
            if (status != RLOCK_BUSY)
                drop_listener(w, i, rlock_last_error());
        }
    }
    return CTL_OK;
}

/* ---- sampling and the screen ---------------------------------------------------------- */

static int has_glob(const char *s) {
    return strpbrk(s, "*?[\\") != NULL;
}

static int sample(watch *w, ctl_locks *locks) {
    if (w->pattern)
        return ctl_find_locks(w->c, w->target, locks);
    ctl_lookup lookup;
    return ctl_find_lock(w->c, w->target, strlen(w->target), &lookup, locks);
}

/* The holders as one string (fields joined by ' '): what an owner change compares. */
static char *owners_of(const ctl_lock *l) {
    size_t len = 0;
    for (int k = 0; k < l->nowners; k++)
        len += l->owners[k].field_len + 1;
    char *s = xcalloc(len + 1, 1), *p = s;
    for (int k = 0; k < l->nowners; k++) {
        memcpy(p, l->owners[k].field, l->owners[k].field_len);
        p += l->owners[k].field_len;
        *p++ = ' ';
    }
    return s;
}

/* The NAME column's width: the widest name of the screen (a longer one pushed the columns). */
static int name_width(const watch *w, const ctl_locks *locks) {
    int width = 4;
    for (int i = 0; i < locks->n; i++)
        if (ctl_text_width(locks->v[i].name, locks->v[i].name_len) > width)
            width = ctl_text_width(locks->v[i].name, locks->v[i].name_len);
    for (int i = 0; i < w->nt; i++)
        if (w->t[i].interval > 0 && watched(w, w->t[i].key, w->t[i].len) &&
            ctl_text_width(w->t[i].key, w->t[i].len) > width)
            width = ctl_text_width(w->t[i].key, w->t[i].len);
    return width;
}

static void draw_header(watch *w, long long screen, int width) {
    FILE *f = w->c->out;
    char when[16];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof(when), "%H:%M:%S", localtime_r(&now, &tm));
    if (isatty(fileno(f)))
        fputs("\033[H\033[2J", f);
    fputs("-- rlockctl watch ", f);
    ctl_put_text(f, w->target, strlen(w->target));
    fprintf(f, "  every %lld ms  screen %lld  %s  %s, %s pub/sub, %lld messages heard\n",
            w->c->opt.interval_ms, screen, when,
            rlock__inspect_clustered(w->c->client) ? "cluster" : "one master",
            w->sharded ? "sharded" : "classic", w->heard);
    fprintf(f, "%-*s  %-6s  %-5s  %-10s  %-7s  %-11s  %-6s  %-7s  %s\n", width, "NAME", "KIND",
            "STATE", "TTL", "WAITERS", "HAND-OFFS/S", "TOTAL", "RENEWAL", "HOLDERS");
}

/* One lock's row; its hand-offs this interval are messages + an unexplained change. */
static void draw_row(watch *w, const ctl_lock *l, double seconds, int first, int width) {
    FILE *f = w->c->out;
    char ttl[32];
    long long wd_ms;
    const char *renewal = ctl_renewal(l, &wd_ms);
    tally *t = tally_of_lock(w, l);
    char *owners = owners_of(l);
    int changed = !first && t->owners[0] != '\0' && owners[0] != '\0' &&
                  strcmp(t->owners, owners) != 0 && t->interval == 0;
    t->total += changed;
    ctl_put_text(f, l->name, l->name_len);
    fprintf(f, "%*s  %-6s  %-5s  %-10s  %-7lld  ", width - ctl_text_width(l->name, l->name_len),
            "", ctl_kind_name(l->kind), !l->held ? "free" : l->mode != NULL ? l->mode : "held",
            ctl_duration(l->ttl_ms, ttl, sizeof(ttl)), ctl_lock_waiters(l));
    if (first)
        fprintf(f, "%-11s  ", "-");
    else
        fprintf(f, "%-11.1f  ", (double)(t->interval + changed) / seconds);
    fprintf(f, "%-6lld  %-7s  ", t->total, renewal != NULL ? renewal : "-");
    for (int k = 0; k < l->nowners; k++) {
        fputs(k > 0 ? ", " : "", f);
        ctl_put_owner_short(f, &l->owners[k]);
        ctl_put_party_short(f, &l->owners[k]);
    }
    fputs(l->nowners == 0 ? "-" : "", f);
    ctl_put_head_stuck(f, l); /* the remedy is show's (rlockctl dequeue) */
    fputc('\n', f);
    free(t->owners);
    t->owners = owners;
    t->interval = -1; /* drawn: cleared below */
}

/* Locks heard from this interval but free at the sample: a row each, so no hand-off hides. */
static void draw_free_heard(watch *w, double seconds, int width) {
    FILE *f = w->c->out;
    for (int i = 0; i < w->nt; i++) {
        tally *t = &w->t[i];
        if (t->interval <= 0 || !watched(w, t->key, t->len))
            continue;
        ctl_put_text(f, t->key, t->len);
        fprintf(f, "%*s  %-6s  %-5s  %-10s  %-7s  %-11.1f  %-6lld  %-7s  -\n",
                width - ctl_text_width(t->key, t->len), "", "?", "free", "-", "-",
                (double)t->interval / seconds, t->total, "-");
        t->owners[0] = '\0';
    }
}

/* Draws a screen; 0, or -1 if the output could not be written (main says so). */
static int draw(watch *w, const ctl_locks *locks, long long screen, double seconds) {
    int width = name_width(w, locks);
    draw_header(w, screen, width);
    for (int i = 0; i < locks->n; i++)
        draw_row(w, &locks->v[i], seconds, screen == 1, width);
    if (screen > 1)
        draw_free_heard(w, seconds, width);
    for (int i = 0; i < w->nt; i++)
        w->t[i].interval = 0;
    if (locks->n == 0)
        fputs("(no lock matches)\n", w->c->out);
    return fflush(w->c->out) != 0 || ferror(w->c->out) ? -1 : 0;
}

static void watch_free(watch *w) {
    for (int i = 0; i < w->nls; i++)
        rlock__inspect_close(w->ls[i].ctx);
    forget_sharded(w);
    for (int i = 0; i < w->nt; i++) {
        free(w->t[i].key);
        free(w->t[i].owners);
    }
    free(w->ssubscribed);
    free(w->sslen);
    free(w->t);
    free(w->target_key);
}

int ctl_cmd_watch(ctl *c) {
    watch w = {.c = c, .target = c->opt.argv[1], .pattern = has_glob(c->opt.argv[1]),
               .sharded = rlock__inspect_sharded(c->client)};
    w.target_key = tally_key(w.target, strlen(w.target), &w.target_key_len);
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);
    int status = listen_classic(&w);
    int64_t last = rlock__inspect_now_ms();
    for (long long screen = 1; status == CTL_OK && !interrupted; screen++) {
        ctl_locks locks;
        if (screen > 1)
            follow_masters(&w);
        if (!listening_classic(&w))
            (void)listen_classic(&w); /* said if it fails; tried again next screen */
        int rc = sample(&w, &locks);
        int64_t now = rlock__inspect_now_ms();
        int drawn = 0, failed = rc != RLOCK_OK;
        if (failed) {
            status = ctl_redis_error("watch", rc); /* the first screen's ends the watch */
        } else {
            listen_sharded(&w, &locks);
            drawn = draw(&w, &locks, screen, (double)(now - last > 0 ? now - last : 1) / 1000.0);
            last = now;
        }
        ctl_locks_free(&locks);
        if (drawn != 0 || (c->opt.count > 0 && screen >= c->opt.count) || (failed && screen == 1))
            break; /* nowhere to draw: stop (main reports it) rather than spin on */
        status = listen_until(&w, now + c->opt.interval_ms);
    }
    watch_free(&w);
    return status;
}
