/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * text.c - bytes made safe to show: lock names and owner fields are any
 * bytes, so a name holding an escape sequence must not drive the terminal
 * and a JSON document must stay valid. Also durations, the wall clock, and
 * Redis's glob for names.
 *
 * Threads: the main thread. No state.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlockctl.h"

/* Length of the valid UTF-8 sequence (>= 2 bytes) at s, or 0. */
static size_t utf8_seq(const unsigned char *s, size_t left) {
    size_t n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    if (n == 0 || s[0] > 0xf4 || n > left)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    /* Overlong 3- and 4-byte forms, surrogates, and code points above U+10FFFF. */
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
        return 0;
    return n;
}

/*
 * Writes s: valid UTF-8 sequences as they are, every other byte through
 * escape(). With keep_c1 0 the C1 controls U+0080..U+009F (0xc2 0x80..0x9f)
 * are escaped too: a terminal may obey them (U+009B is CSI, as ESC [ is).
 */
static void put_escaped(FILE *f, const char *s, size_t len, int keep_c1,
                        void (*escape)(FILE *, unsigned char)) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t seq = u[i] >= 0x80 ? utf8_seq(u + i, len - i) : 0;
        if (seq == 2 && !keep_c1 && u[i] == 0xc2 && u[i + 1] < 0xa0)
            seq = 0;
        if (seq > 0) {
            fwrite(u + i, 1, seq, f);
            i += seq;
        } else {
            escape(f, u[i++]);
        }
    }
}

/* Printable ASCII as it is, a backslash doubled, anything else \xNN. */
static void escape_text(FILE *f, unsigned char c) {
    if (c == '\\')
        fputs("\\\\", f);
    else if (c >= 0x20 && c < 0x7f)
        fputc(c, f);
    else
        fprintf(f, "\\x%02x", c);
}

/* JSON's escapes; a byte that is not UTF-8 as \u00NN (read back as Latin-1). */
static void escape_json(FILE *f, unsigned char c) {
    if (c == '"' || c == '\\')
        fprintf(f, "\\%c", c);
    else if (c == '\n')
        fputs("\\n", f);
    else if (c == '\t')
        fputs("\\t", f);
    else if (c < 0x20 || c >= 0x7f)
        fprintf(f, "\\u%04x", c);
    else
        fputc(c, f);
}

void ctl_put_text(FILE *f, const char *s, size_t len) {
    put_escaped(f, s, len, 0, escape_text);
}

void ctl_put_str(FILE *f, const char *s) {
    ctl_put_text(f, s != NULL ? s : "?", s != NULL ? strlen(s) : 1);
}

void ctl_put_json(FILE *f, const char *s, size_t len) {
    fputc('"', f);
    put_escaped(f, s, len, 1, escape_json); /* a C1 control is a character JSON carries */
    fputc('"', f);
}

const char *ctl_duration(long long ms, char *buf, size_t size) {
    if (ms < 0)
        snprintf(buf, size, "-");
    else if (ms < 60000)
        snprintf(buf, size, "%lld.%03llds", ms / 1000, ms % 1000);
    else if (ms < 3600000)
        snprintf(buf, size, "%lldm%02llds", ms / 60000, ms / 1000 % 60);
    else if (ms < 86400000)
        snprintf(buf, size, "%lldh%02lldm", ms / 3600000, ms / 60000 % 60);
    else
        snprintf(buf, size, "%lldd%02lldh", ms / 86400000, ms / 3600000 % 24);
    return buf;
}

long long ctl_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* fnmatch() without flags is Redis's glob (*, ?, [a-z], [^a] or [!a], \x) for names
 * without NUL bytes, which rlock's names never have. */
int ctl_glob_match(const char *pattern, const char *name, size_t len) {
    if (pattern == NULL)
        return 1;
    if (memchr(name, '\0', len) != NULL)
        return 0;
    char *copy = xstrndup(name, len);
    int match = fnmatch(pattern, copy, 0) == 0;
    free(copy);
    return match;
}
