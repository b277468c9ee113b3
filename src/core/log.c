/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.c - the log lines of rlock_config.log: what each event says as a
 * line, and the log-only lines other layers post (a refused connection
 * name, a failed registration, a resubscription, open and close).
 *
 * A line is "rlock <id8> <WORD>" then key=value pairs and ": <detail>":
 * WORD is stable (an operator greps for it; docs/operations.md lists each
 * with its meaning and what to do), the lock name is quoted with \" \\ and
 * control characters escaped, and no line holds a control character (a
 * lock name may hold any byte but NUL). Lines are built only when the
 * callback is set and wants their level.
 *
 * Threads: any thread formats a log-only line (rlock__log); the event
 * thread formats event lines. Pure but for the queue (events.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* A lock name longer than this is cut (the line says so with "..."). */
#define NAME_SHOWN_MAX 200

int rlock__log_wanted(const rlock__settings *s, int level) {
    return s->log != NULL && level <= s->log_level;
}

static const struct {
    rlock_event_kind kind;
    const char *word;
    int level;
} event_words[] = {
    {RLOCK_EVENT_RENEWAL_FAILED, "RENEWAL_FAILED", RLOCK_LOG_WARN},
    {RLOCK_EVENT_LOCK_LOST, "LOCK_LOST", RLOCK_LOG_ERROR},
    {RLOCK_EVENT_CONNECTION_LOST, "CONNECTION_LOST", RLOCK_LOG_WARN},
    {RLOCK_EVENT_RECONNECTED, "RECONNECTED", RLOCK_LOG_INFO},
    {RLOCK_EVENT_SUBSCRIBE_REFUSED, "SUBSCRIBE_REFUSED", RLOCK_LOG_WARN},
    {RLOCK_EVENT_MASTER_SWITCHED, "MASTER_SWITCHED", RLOCK_LOG_WARN},
};

#define NWORDS (sizeof(event_words) / sizeof(event_words[0]))

int rlock__event_level(rlock_event_kind kind) {
    for (size_t i = 0; i < NWORDS; i++)
        if (event_words[i].kind == kind)
            return event_words[i].level;
    return RLOCK_LOG_WARN; /* a kind added later is worth a look */
}

/* A growing line: appends stop quietly at its end. */
typedef struct line {
    char *buf;
    size_t size, used;
} line;

static void put(line *l, const char *fmt, ...) RLOCK__PRINTF(2, 3);

static void put(line *l, const char *fmt, ...) {
    va_list ap;
    if (l->used + 1 >= l->size)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(l->buf + l->used, l->size - l->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        l->used = (size_t)n < l->size - l->used ? l->used + (size_t)n : l->size - 1;
}

/* Appends s as a quoted value: \" \\ and bytes outside printable ASCII as \xNN. */
static void put_quoted(line *l, const char *s) {
    size_t n = strlen(s);
    put(l, "\"");
    for (size_t i = 0; i < n && i < NAME_SHOWN_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            put(l, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            put(l, "\\x%02x", c);
        else
            put(l, "%c", c);
    }
    put(l, n > NAME_SHOWN_MAX ? "\"..." : "\"");
}

/* Replaces the control characters of a finished line (a detail may quote a name). */
static void flatten(char *s) {
    for (; *s != '\0'; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

/* "rlock <first 8 characters of the client id> <word>" */
static void put_head(line *l, const rlock__settings *s, const char *word) {
    put(l, "rlock %.8s %s", s->client_id, word);
}

void rlock__event_line(const rlock__settings *s, const rlock_event *event, char *buf,
                       size_t size) {
    line l = {buf, size, 0};
    const char *word = NULL;
    char unknown[32];
    buf[0] = '\0';
    for (size_t i = 0; i < NWORDS && word == NULL; i++)
        if (event_words[i].kind == event->kind)
            word = event_words[i].word;
    if (word == NULL) {
        snprintf(unknown, sizeof(unknown), "EVENT_%d", (int)event->kind);
        word = unknown;
    }
    put_head(&l, s, word);
    if (event->name != NULL) {
        put(&l, " lock=");
        put_quoted(&l, event->name);
    } else if (event->kind == RLOCK_EVENT_RENEWAL_FAILED) {
        put(&l, " lock=(many)"); /* more than 64 in one failed round: one event for them */
    }
    if (event->owner != 0) /* the hold's field in Redis is "<client id>:<owner>" */
        put(&l, " owner=%llu", (unsigned long long)event->owner);
    if (event->kind == RLOCK_EVENT_RENEWAL_FAILED || event->kind == RLOCK_EVENT_LOCK_LOST)
        put(&l, " lease_left_ms=%lld", event->lease_left_ms);
    if (event->status != RLOCK_OK)
        put(&l, " status=%s", rlock_status_name(event->status));
    put(&l, ": %s", event->detail != NULL ? event->detail : "");
    flatten(buf);
}

void rlock__log(rlock__events *ev, int level, const char *word, const char *fmt, ...) {
    const rlock__settings *s = ev->settings;
    char buf[RLOCK__LOG_LINE_MAX];
    if (s == NULL || !rlock__log_wanted(s, level))
        return;
    line l = {buf, sizeof(buf), 0};
    buf[0] = '\0';
    put_head(&l, s, word);
    if (l.used + 1 < l.size) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf + l.used, l.size - l.used, fmt, ap);
        va_end(ap);
        (void)n; /* a long line is cut */
    }
    flatten(buf);
    rlock__post_line(ev, level, buf);
}
