/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * error.c - the per-thread detail of the last failed call: its status, the
 * errno of a failed system call, Redis's own error text, and one line for a
 * person (rlock_last_error_info, rlock_last_error).
 *
 * Threads: any; everything here is thread-local, so no locking. Library
 * threads (watchdog, subscriber) record too, and read their own message
 * back for event details.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local rlock__error_detail last;

void rlock__error_save(rlock__error_detail *saved) {
    *saved = last;
}

void rlock__error_restore(const rlock__error_detail *saved) {
    unsigned mark = last.mark;
    last = *saved;
    last.mark = mark + 1; /* a record happened in between, as far as marks can tell */
}

/* Appends ": detail" after the n bytes of buf, cut to fit (the message is one line). */
static void append_detail(char *buf, size_t size, size_t n, const char *detail) {
    for (const char *p = ": "; *p != '\0' && n + 1 < size; p++)
        buf[n++] = *p;
    for (const char *p = detail; *p != '\0' && n + 1 < size; p++)
        buf[n++] = *p;
    buf[n] = '\0';
}

static int is_control(unsigned char c) {
    return c < 0x20 || c == 0x7f;
}

/*
 * The message is one line whatever it quotes (a lock name may hold any
 * byte): a control byte becomes "\xNN", as in log lines; cut to fit.
 */
static void escape_controls(char message[RLOCK__MESSAGE_MAX]) {
    char out[RLOCK__MESSAGE_MAX];
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)message;
    while (*p != '\0' && !is_control(*p))
        p++;
    if (*p == '\0')
        return; /* the common case: nothing to escape */
    for (p = (const unsigned char *)message; *p != '\0'; p++) {
        size_t width = is_control(*p) ? 4 : 1;
        if (o + width >= sizeof(out))
            break;
        if (width == 4)
            o += (size_t)snprintf(out + o, sizeof(out) - o, "\\x%02x", *p);
        else
            out[o++] = (char)*p;
    }
    out[o] = '\0';
    memcpy(message, out, o + 1);
}

/*
 * Formats into locals first: callers may pass the last message or Redis text
 * as an argument ("giving it back failed too (%s)"), and those live in the
 * very buffers being written.
 */
static void record(int status, int sys_errno, int append_errno, const char *redis_error,
                   int append_redis, const char *fmt, va_list ap) {
    char message[sizeof(last.message)], redis_text[sizeof(last.redis_error)];
    snprintf(redis_text, sizeof(redis_text), "%s", redis_error);
    int wrote = vsnprintf(message, sizeof(message), fmt, ap);
    size_t n = wrote < 0 ? 0 : (size_t)wrote < sizeof(message) ? (size_t)wrote : sizeof(message) - 1;
    if (sys_errno != 0 && append_errno)
        append_detail(message, sizeof(message), n, strerror(sys_errno));
    else if (redis_text[0] != '\0' && append_redis)
        append_detail(message, sizeof(message), n, redis_text);
    escape_controls(message);
    last.status = status;
    last.sys_errno = sys_errno;
    last.host_not_found = 0;
    last.mark++;
    memcpy(last.redis_error, redis_text, sizeof(redis_text));
    memcpy(last.message, message, sizeof(message));
}

int rlock__fail(int status, int sys_errno, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    record(status, sys_errno, 1, "", 0, fmt, ap);
    va_end(ap);
    return status;
}

int rlock__fail_errno(int status, int sys_errno, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    record(status, sys_errno, 0, "", 0, fmt, ap);
    va_end(ap);
    return status;
}

int rlock__reply_status(const char *text) {
    static const struct {
        const char *prefix;
        int status;
    } codes[] = {{"NOAUTH", RLOCK_EAUTH},
                 {"WRONGPASS", RLOCK_EAUTH},
                 {"NOPERM", RLOCK_ENOPERM},
                 {"NOTALOCK", RLOCK_ENOTLOCK},
                 {"NOREPLICAS", RLOCK_ENOREPL}};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        size_t len = strlen(codes[i].prefix);
        if (strncmp(text, codes[i].prefix, len) == 0 && (text[len] == ' ' || text[len] == '\0'))
            return codes[i].status;
    }
    /* A script's redis.call refused by the ACL: "ERR The user executing the
     * script can't publish to the channel / access at least one of the keys
     * ..." (Redis 7.0), or a wrapped "NOPERM ...". */
    if (strstr(text, "NOPERM") != NULL || strstr(text, "user executing the script can't") != NULL)
        return RLOCK_ENOPERM;
    if (strstr(text, "NOTALOCK") != NULL)
        return RLOCK_ENOTLOCK;
    return RLOCK_EREDIS;
}

/* Whether [s, s+n) are n hex digits. */
static int is_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* Past Lua's "@user_script:N: " or "@user_script: N: " at text, if there. */
static const char *skip_user_script(const char *text) {
    static const char user_script[] = "@user_script:";
    const char *p = text;
    if (strncmp(p, user_script, sizeof(user_script) - 1) != 0)
        return text;
    p += sizeof(user_script) - 1;
    p += *p == ' ';
    while (*p >= '0' && *p <= '9')
        p++;
    return strncmp(p, ": ", 2) == 0 ? p + 2 : text;
}

/*
 * Redis's own words of an error a script's redis.call met, without what Lua
 * wraps them in: Redis 7's " script: <sha>, on @user_script:N." after them;
 * Redis 6.2's "ERR Error running script (call to f_<sha>): @user_script:N: "
 * (twice over, and a '-' of the reply's, for a refusal before the command
 * ran) before them. Other text is copied as it is.
 */
static void redis_words(const char *text, char *out, size_t size) {
    static const char call_to[] = "ERR Error running script (call to f_";
    const char *rest = strstr(text, "): ");
    if (strncmp(text, call_to, sizeof(call_to) - 1) == 0 && rest != NULL) {
        const char *prev = NULL;
        for (text = rest + 3; text != prev;) {
            prev = text;
            text = skip_user_script(text);
        }
        text += *text == '-';
    }
    size_t len = strlen(text);
    for (const char *p = strstr(text, " script: "); p != NULL; p = strstr(p + 1, " script: ")) {
        const char *sha = p + 9;
        if (strlen(sha) >= 40 && is_hex(sha, 40) && strncmp(sha + 40, ", on @", 6) == 0) {
            len = (size_t)(p - text);
            break;
        }
    }
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\r' || text[len - 1] == '\n'))
        len--;
    snprintf(out, size, "%.*s", (int)len, text);
}

static int fail_with_redis_text(int status, const char *text, const char *fmt, ...) {
    char words[RLOCK__MESSAGE_MAX], message[RLOCK__MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    redis_words(text, words, sizeof(words));
    return rlock__fail_redis(status, text, "%s: %s", message, words);
}

int rlock__fail_redis(int status, const char *redis_text, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    record(status, 0, 0, redis_text, 0, fmt, ap);
    va_end(ap);
    return status;
}

int rlock__fail_reply_as(const redisReply *reply, const char *where, int otherwise) {
    const char *text = reply != NULL && reply->type == REDIS_REPLY_ERROR ? reply->str : "";
    int status = text[0] != '\0' ? rlock__reply_status(text) : RLOCK_EREDIS;
    if (text[0] == '\0')
        return fail_with_redis_text(status, "", "%s: unexpected reply type", where);
    return fail_with_redis_text(status == RLOCK_EREDIS ? otherwise : status, text, "%s", where);
}

int rlock__fail_reply(const redisReply *reply, const char *where) {
    return rlock__fail_reply_as(reply, where, RLOCK_EREDIS);
}

void rlock__fail_host_not_found(void) {
    last.host_not_found = 1;
}

const char *rlock__last_message(void) {
    return last.message;
}

unsigned rlock__error_mark(void) {
    return last.mark;
}

int rlock__fail_default(int status, unsigned mark) {
    if (status >= 0 || (last.mark != mark && last.status == status))
        return status;
    return rlock__fail(status, 0, "%s", rlock_strerror(status));
}

void rlock_last_error_info(rlock_error_info *out) {
    if (out == NULL)
        return;
    out->status = last.status;
    out->sys_errno = last.sys_errno;
    out->host_not_found = last.host_not_found;
    out->redis_error = last.redis_error;
    out->message = last.message;
}

const char *rlock_last_error(void) {
    return last.message;
}
