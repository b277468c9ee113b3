/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * loglines.c - the record of a client's log lines (see loglines.h).
 */
#include <stdio.h>
#include <string.h>

#include "fail.h"
#include "loglines.h"

void h_loglines_init(struct h_loglines *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
}

void h_loglines_destroy(struct h_loglines *r) {
    pthread_mutex_destroy(&r->mu);
}

/* On the client's event thread: records only (a harness failure off the main thread aborts). */
void h_loglines_cb(int level, const char *message, void *arg) {
    struct h_loglines *r = arg;
    char thread_name[32] = "";
    pthread_getname_np(pthread_self(), thread_name, sizeof thread_name);
    pthread_mutex_lock(&r->mu);
    if (r->n < H_LOGLINES_MAX) {
        struct h_logline *l = &r->line[r->n++];
        l->level = level;
        l->on_event_thread = strcmp(thread_name, "rlock-events") == 0;
        snprintf(l->text, sizeof l->text, "%s", message != NULL ? message : "(null)");
    } else {
        r->dropped++;
    }
    pthread_mutex_unlock(&r->mu);
}

/* Whether the line's word (its third space-separated token) is word. */
static int has_word(const char *text, const char *word) {
    const char *p = strchr(text, ' ');
    p = p != NULL ? strchr(p + 1, ' ') : NULL;
    size_t n = strlen(word);
    return p != NULL && strncmp(p + 1, word, n) == 0 && (p[1 + n] == ' ' || p[1 + n] == ':' ||
                                                         p[1 + n] == '\0');
}

int h_loglines_count(struct h_loglines *r, const char *word) {
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n; i++)
        n += has_word(r->line[i].text, word);
    pthread_mutex_unlock(&r->mu);
    return n;
}

struct h_logline h_loglines_find(struct h_loglines *r, const char *word) {
    struct h_logline found = {0};
    int ok = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && !ok; i++)
        if (has_word(r->line[i].text, word)) {
            found = r->line[i];
            ok = 1;
        }
    pthread_mutex_unlock(&r->mu);
    if (!ok) {
        h_loglines_dump(r);
        H_FAIL("no log line %s", word);
    }
    return found;
}

int h_loglines_n(struct h_loglines *r) {
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

struct h_logline h_loglines_get(struct h_loglines *r, int i) {
    pthread_mutex_lock(&r->mu);
    struct h_logline l = r->line[i];
    pthread_mutex_unlock(&r->mu);
    return l;
}

void h_loglines_dump(struct h_loglines *r) {
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n; i++)
        fprintf(stderr, "      log[%d] level %d%s: %s\n", i, r->line[i].level,
                r->line[i].on_event_thread ? "" : " (NOT on rlock-events)", r->line[i].text);
    pthread_mutex_unlock(&r->mu);
}
