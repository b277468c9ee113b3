/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * render.c - what list, show and clients print: aligned tables for a
 * person, and one JSON document per run for a script (--json). Names and
 * owner fields are any bytes: text.c makes them safe for either.
 *
 * JSON fields (docs/rlockctl.md lists them): absent values are null, never
 * left out, so a script may index them without checking first.
 *
 * Threads: the main thread.
 */
#include <string.h>

#include "rlockctl.h"

void ctl_put_owner_short(FILE *f, const ctl_owner *o) {
    size_t id_len = strlen(o->client_id);
    ctl_put_text(f, o->client_id, id_len < 8 ? id_len : 8);
    fputc(':', f);
    ctl_put_str(f, o->thread);
    fprintf(f, "%s x%lld", o->write ? ":write" : "", o->holds);
}

/* CLIENT LIST's idle= (whole seconds) as "41s", "4m03s". */
static const char *idle_text(long long idle_s, char *buf, size_t size) {
    if (idle_s >= 0 && idle_s < 60) {
        snprintf(buf, size, "%llds", idle_s);
        return buf;
    }
    return ctl_duration(idle_s * 1000, buf, size);
}

/* "2 connections, least idle 0s" */
static void put_conns(FILE *f, const ctl_owner *o) {
    char idle[32];
    fprintf(f, "%d connection%s %s", o->conns, o->conns == 1 ? " idle" : "s, least idle",
            idle_text(o->idle_s, idle, sizeof(idle)));
}

/* A registration's fields: host, pid, program, version, the client's uptime. */
static void put_registration(FILE *f, const ctl_process *p) {
    char age[32];
    fputs("host ", f);
    ctl_put_str(f, p->host);
    fprintf(f, "  pid %lld  program ", p->pid);
    ctl_put_str(f, p->program);
    if (p->version != NULL) {
        fputs("  rlock ", f);
        ctl_put_str(f, p->version);
    }
    if (p->started_ms > 0) /* the client's, not the hold's: a lock's age is not kept */
        fprintf(f, "  client up %s",
                ctl_duration(ctl_wall_ms() - p->started_ms, age, sizeof(age)));
}

void ctl_put_party(FILE *f, const ctl_owner *o) {
    const char *stuck = ctl_stuck(o);
    if (o->process != NULL) {
        put_registration(f, o->process);
        if (o->conns == 0) {
            fputs("  no connection: process gone?", f);
        } else if (o->conns > 0) {
            fputs("  ", f);
            put_conns(f, o);
            if (stuck != NULL)
                fputs(": process stopped?", f);
        }
        return;
    }
    if (o->conns > 0) { /* a live client rewrites its registration every third of its TTL */
        fputs("no registration (expired, or register_client off); ", f);
        put_conns(f, o);
        fputs(" (", f);
        ctl_put_str(f, o->conn_name);
        fputs(stuck != NULL ? "): process stopped?" : ")", f);
        return;
    }
    fputs("unregistered, no connection named for it (Java Redisson, rlock < 0.5, or gone)", f);
}

/* "host:pid" from a registration, else from a connection name "rlock:<host>:<pid>:<id8>". */
static int put_host_pid(FILE *f, const ctl_owner *o) {
    if (o->process != NULL && o->process->host != NULL) {
        ctl_put_str(f, o->process->host);
        fprintf(f, ":%lld", o->process->pid);
        return 1;
    }
    if (o->conn_name == NULL || strlen(o->conn_name) < 6 + 9)
        return 0;
    ctl_put_text(f, o->conn_name + 6, strlen(o->conn_name) - 6 - 9);
    return 1;
}

void ctl_put_party_short(FILE *f, const ctl_owner *o) {
    char idle[32];
    if (o->process == NULL && o->conns <= 0)
        return; /* Java Redisson, rlock < 0.5: nothing names its process */
    fputs(" (", f);
    if (!put_host_pid(f, o))
        fputc('?', f); /* a registration without host */
    if (o->conns == 0)
        fputs(": no connection, gone?", f);
    else if (ctl_stuck(o) != NULL)
        fprintf(f, ": %sidle %s, stopped?", o->process == NULL ? "no registration, " : "",
                idle_text(o->idle_s, idle, sizeof(idle)));
    fputc(')', f);
}

void ctl_put_head_stuck(FILE *f, const ctl_lock *l) {
    const char *why = ctl_head_stuck(l);
    if (why == NULL)
        return;
    fputs("  queue head stuck: ", f);
    ctl_put_text(f, l->queue[0].who.field, l->queue[0].who.field_len);
    fputs(" (", f);
    if (put_host_pid(f, &l->queue[0].who))
        fputs(": ", f);
    fprintf(f, "%s)", why);
}

int ctl_text_width(const char *s, size_t len) {
    int w = 0; /* UTF-8 continuation bytes take no column */
    for (size_t i = 0; i < len; i++)
        w += ((unsigned char)s[i] & 0xc0) != 0x80;
    return w;
}

static void pad(FILE *f, int n) {
    for (; n > 0; n--)
        fputc(' ', f);
}

/* A column: s ("?" if NULL; its first max bytes if max > 0), padded to width. */
static void put_cell(FILE *f, const char *s, int width, size_t max) {
    size_t len = s != NULL ? strlen(s) : 1;
    if (max > 0 && len > max)
        len = max;
    ctl_put_text(f, s != NULL ? s : "?", len);
    pad(f, width - ctl_text_width(s != NULL ? s : "?", len));
}

static const char *state_of(const ctl_lock *l) {
    return !l->held ? "free" : l->mode != NULL ? l->mode : "held";
}

/* ---- list ---------------------------------------------------------------------------- */

void ctl_render_list(ctl *c, const ctl_locks *locks) {
    FILE *f = c->out;
    int width = 4;
    char ttl[32];
    for (int i = 0; i < locks->n; i++) {
        int w = ctl_text_width(locks->v[i].name, locks->v[i].name_len);
        width = w > width ? w : width; /* capped at 48, a longer name pushed its row's columns */
    }
    fprintf(f, "%-*s  %-6s  %-5s  %-10s  %-7s  %s\n", width, "NAME", "KIND", "STATE", "TTL",
            "WAITERS", "OWNERS");
    for (int i = 0; i < locks->n; i++) {
        const ctl_lock *l = &locks->v[i];
        ctl_put_text(f, l->name, l->name_len);
        pad(f, width - ctl_text_width(l->name, l->name_len));
        fprintf(f, "  %-6s  %-5s  %-10s  %-7lld  ", ctl_kind_name(l->kind), state_of(l),
                ctl_duration(l->ttl_ms, ttl, sizeof(ttl)), ctl_lock_waiters(l));
        for (int k = 0; k < l->nowners; k++) {
            fputs(k > 0 ? ", " : "", f);
            ctl_put_owner_short(f, &l->owners[k]);
            ctl_put_party_short(f, &l->owners[k]);
        }
        fputs(l->nowners == 0 ? "-" : "", f);
        ctl_put_head_stuck(f, l);
        fputc('\n', f);
    }
}

/* ---- JSON --------------------------------------------------------------------------- */

static void json_str_or_null(FILE *f, const char *s) {
    if (s == NULL)
        fputs("null", f);
    else
        ctl_put_json(f, s, strlen(s));
}

static void json_num_or_null(FILE *f, long long v) {
    if (v < 0)
        fputs("null", f);
    else
        fprintf(f, "%lld", v);
}

/* ,"key":"value" (or null). */
static void json_key_str(FILE *f, const char *key, const char *v) {
    fprintf(f, ",\"%s\":", key);
    json_str_or_null(f, v);
}

/* ,"key":n (or null when n < 0). */
static void json_key_num(FILE *f, const char *key, long long n) {
    fprintf(f, ",\"%s\":", key);
    json_num_or_null(f, n);
}

/* A registration's fields, without the braces. */
static void json_process_fields(FILE *f, const ctl_process *p) {
    fputs("\"id\":", f);
    json_str_or_null(f, p->id);
    json_key_str(f, "host", p->host);
    json_key_num(f, "pid", p->pid);
    json_key_str(f, "program", p->program);
    json_key_str(f, "version", p->version);
    json_key_num(f, "started_ms", p->started_ms);
    json_key_str(f, "url", p->url);
    json_key_num(f, "watchdog_timeout_ms", p->watchdog_timeout_ms);
    json_key_num(f, "ttl_ms", p->ttl_ms);
}

static void json_process(FILE *f, const ctl_process *p) {
    if (p == NULL) {
        fputs("null", f);
        return;
    }
    fputc('{', f);
    json_process_fields(f, p);
    fputc('}', f);
}

static void json_party(FILE *f, const ctl_owner *o) {
    fputs("\"owner\":", f);
    ctl_put_json(f, o->field, o->field_len);
    json_key_str(f, "client_id", o->client_id);
    json_key_str(f, "thread", o->thread);
    fputs(",\"process\":", f);
    json_process(f, o->process);
    json_key_num(f, "connections", o->conns);
    json_key_num(f, "idle_s", o->idle_s);
    json_key_str(f, "connection_name", o->conn_name);
    json_key_str(f, "stuck", ctl_stuck(o));
}

void ctl_render_lock_json(FILE *f, const ctl_lock *l) {
    long long now = ctl_wall_ms();
    fputs("{\"name\":", f);
    ctl_put_json(f, l->name, l->name_len);
    fprintf(f, ",\"kind\":\"%s\",\"held\":%s,\"mode\":", ctl_kind_name(l->kind),
            l->held ? "true" : "false");
    json_str_or_null(f, l->mode);
    fprintf(f, ",\"ttl_ms\":%lld,\"token\":", l->ttl_ms);
    json_num_or_null(f, l->token);
    fputs(",\"owners\":[", f);
    for (int k = 0; k < l->nowners; k++) {
        fputs(k > 0 ? ",{" : "{", f);
        json_party(f, &l->owners[k]);
        fprintf(f, ",\"write\":%s,\"holds\":%lld}", l->owners[k].write ? "true" : "false",
                l->owners[k].holds);
    }
    fputs("],\"queue\":[", f);
    for (int k = 0; k < l->nqueue; k++) {
        fputs(k > 0 ? ",{" : "{", f);
        json_party(f, &l->queue[k].who);
        json_key_num(f, "deadline_ms", l->queue[k].deadline_ms);
        fputs(",\"due_in_ms\":", f);
        if (l->queue[k].deadline_ms < 0)
            fputs("null", f);
        else
            fprintf(f, "%lld", l->queue[k].deadline_ms - now);
        fputs("}", f);
    }
    fputs("],\"channels\":[", f);
    for (int k = 0; k < l->nchannels; k++) {
        fputs(k > 0 ? ",{\"channel\":" : "{\"channel\":", f);
        ctl_put_json(f, l->channels[k].name, l->channels[k].len);
        fprintf(f, ",\"subscribers\":%lld,\"sharded_subscribers\":", l->channels[k].classic);
        json_num_or_null(f, l->channels[k].sharded);
        fputs("}", f);
    }
    long long wd_ms;
    fprintf(f, "],\"waiters\":%lld,\"renewal\":", ctl_lock_waiters(l));
    json_str_or_null(f, ctl_renewal(l, &wd_ms));
    json_key_str(f, "head_stuck", ctl_head_stuck(l));
    fputc('}', f);
}

void ctl_render_list_json(ctl *c, const ctl_locks *locks) {
    fputs("{\"locks\":[", c->out);
    for (int i = 0; i < locks->n; i++) {
        fputs(i > 0 ? ",\n" : "\n", c->out);
        ctl_render_lock_json(c->out, &locks->v[i]);
    }
    fputs("\n]}\n", c->out);
}

/* ---- show ---------------------------------------------------------------------------- */

static void show_queue(FILE *f, const ctl_lock *l) {
    char due[32];
    long long now = ctl_wall_ms();
    for (int k = 0; k < l->nqueue; k++) {
        const ctl_waiter *w = &l->queue[k];
        fprintf(f, k == 0 ? "queue     %d. " : "          %d. ", k + 1);
        ctl_put_text(f, w->who.field, w->who.field_len);
        if (w->deadline_ms < 0)
            fputs("  no deadline\n", f);
        else if (w->deadline_ms < now)
            fprintf(f, "  deadline passed %s ago (dead)\n",
                    ctl_duration(now - w->deadline_ms, due, sizeof(due)));
        else
            fprintf(f, "  deadline in %s\n", ctl_duration(w->deadline_ms - now, due, sizeof(due)));
        fputs("            ", f);
        ctl_put_party(f, &w->who);
        fputc('\n', f);
    }
    if (l->queue_len > l->nqueue)
        fprintf(f, "          and %lld more\n", l->queue_len - l->nqueue);
    const char *stuck = ctl_head_stuck(l);
    if (stuck == NULL)
        return;
    fprintf(f, "stuck     the queue's head does not %s: %s\n          remedy: rlockctl dequeue ",
            l->held ? "move" : "take the free lock", stuck);
    ctl_put_text(f, l->name, l->name_len); /* escaped for the terminal; quoting is the shell's */
    fputc(' ', f);
    ctl_put_text(f, l->queue[0].who.field, l->queue[0].who.field_len);
    fputs(" (removes it, wakes the next)\n", f);
}

void ctl_render_show(ctl *c, const ctl_lock *l) {
    FILE *f = c->out;
    char ttl[32];
    fputs("name      ", f);
    ctl_put_text(f, l->name, l->name_len);
    fprintf(f, "\nkind      %s\n", ctl_kind_name(l->kind));
    if (l->held)
        fprintf(f, "state     %s, TTL %s\n", l->mode != NULL ? l->mode : "held",
                ctl_duration(l->ttl_ms, ttl, sizeof(ttl)));
    else
        fprintf(f, "state     free, %lld waiter%s queued%s\n", l->queue_len,
                l->queue_len == 1 ? "" : "s",
                ctl_head_stuck(l) != NULL ? " behind a stuck head (below)" : "");
    if (l->token >= 0)
        fprintf(f, "token     %lld (the last fencing token given)\n", l->token);
    for (int k = 0; k < l->nowners; k++) {
        const ctl_owner *o = &l->owners[k];
        fputs(k == 0 ? "owner     " : "          ", f);
        ctl_put_text(f, o->field, o->field_len);
        fprintf(f, "  holds %lld%s\n          ", o->holds, o->write ? "  (writer)" : "");
        ctl_put_party(f, o);
        fputc('\n', f);
    }
    long long wd_ms;
    const char *renewal = ctl_renewal(l, &wd_ms);
    if (renewal != NULL && renewal[0] == 's')
        fprintf(f, "renewal   stopped (an owner's process is gone or stopped: no renewal comes; "
                   "the lock expires when its TTL %s ends, unless force-unlocked)\n",
                ctl_duration(l->ttl_ms, ttl, sizeof(ttl)));
    else if (renewal != NULL)
        fprintf(f, "renewal   %s (TTL %s the last third of the owner's watchdog timeout %s%s)\n",
                renewal, renewal[0] == 'o' ? "within" : "below",
                ctl_duration(wd_ms, ttl, sizeof(ttl)),
                renewal[0] == 'o' ? "" : ": renewals missed, or a lock with a fixed lease");
    show_queue(f, l);
    for (int k = 0; k < l->nchannels; k++) {
        const ctl_channel *ch = &l->channels[k];
        fputs(k == 0 ? "waiters   " : "          ", f);
        ctl_put_text(f, ch->name, ch->len);
        fprintf(f, "  %lld subscribed", ch->classic);
        if (ch->sharded >= 0)
            fprintf(f, ", %lld sharded", ch->sharded);
        fputc('\n', f);
    }
}

/* ---- clients ------------------------------------------------------------------------- */

void ctl_render_clients(ctl *c, const ctl_clients *cl) {
    FILE *f = c->out;
    char up[32], wd[32], idle[32];
    if (cl->n > 0)
        fprintf(f, "%-8s  %-20s  %-7s  %-16s  %-7s  %-9s  %-5s  %-6s  %-9s  %s\n", "ID", "HOST",
                "PID", "PROGRAM", "VERSION", "UP", "CONNS", "IDLE", "WATCHDOG", "URL");
    for (int i = 0; i < cl->n; i++) {
        const ctl_process *p = cl->v[i];
        put_cell(f, p->id, 8, 8);
        fputs("  ", f);
        put_cell(f, p->host, 20, 0);
        fprintf(f, "  %-7lld  ", p->pid);
        put_cell(f, p->program, 16, 0);
        fputs("  ", f);
        put_cell(f, p->version, 7, 0);
        fprintf(f, "  %-9s  %-5d  %-6s  %-9s  ",
                ctl_duration(p->started_ms > 0 ? ctl_wall_ms() - p->started_ms : -1, up,
                             sizeof(up)),
                p->connections, p->idle_s < 0 ? "-" : idle_text(p->idle_s, idle, sizeof(idle)),
                ctl_duration(p->watchdog_timeout_ms, wd, sizeof(wd)));
        ctl_put_str(f, p->url);
        fputc('\n', f);
    }
    int header = 0;
    for (int k = 0; k < cl->nconns; k++) {
        if (cl->conns[k].registered)
            continue;
        if (!header++)
            fprintf(f, "%sconnections named rlock:* without a registration:\n%-40s  %-21s  %s\n",
                    cl->n > 0 ? "\n" : "", "NAME", "MASTER", "COUNT");
        ctl_put_text(f, cl->conns[k].name, strlen(cl->conns[k].name));
        pad(f, 40 - ctl_text_width(cl->conns[k].name, strlen(cl->conns[k].name)));
        fprintf(f, "  %-21s  %d\n", cl->conns[k].addr, cl->conns[k].count);
    }
    for (int k = 0; k < cl->nothers; k++) {
        const ctl_conns *o = &cl->others[k];
        if (k == 0)
            fprintf(f, "%sother named connections (a Java Redisson client's is its clientName):\n"
                       "%-40s  %-21s  %-5s  %s\n",
                    cl->n > 0 || header ? "\n" : "", "NAME", "MASTER", "COUNT", "LEAST IDLE");
        ctl_put_text(f, o->name, strlen(o->name));
        pad(f, 40 - ctl_text_width(o->name, strlen(o->name)));
        fprintf(f, "  %-21s  %-5d  %s\n", o->addr, o->count,
                idle_text(o->idle_s, idle, sizeof(idle)));
    }
}

void ctl_render_clients_json(ctl *c, const ctl_clients *cl) {
    FILE *f = c->out;
    fputs("{\"clients\":[", f);
    for (int i = 0; i < cl->n; i++) {
        fputs(i > 0 ? ",\n{" : "\n{", f);
        json_process_fields(f, cl->v[i]);
        fprintf(f, ",\"connections\":%d", cl->v[i]->connections);
        json_key_num(f, "idle_s", cl->v[i]->idle_s);
        fputc('}', f);
    }
    fputs("\n],\"connections\":[", f);
    for (int k = 0; k < cl->nconns; k++) {
        fputs(k > 0 ? ",\n{\"name\":" : "\n{\"name\":", f);
        ctl_put_json(f, cl->conns[k].name, strlen(cl->conns[k].name));
        fputs(",\"master\":", f);
        ctl_put_json(f, cl->conns[k].addr, strlen(cl->conns[k].addr));
        fprintf(f, ",\"count\":%d,\"registered\":%s}", cl->conns[k].count,
                cl->conns[k].registered ? "true" : "false");
    }
    fputs("\n],\"other_connections\":[", f);
    for (int k = 0; k < cl->nothers; k++) {
        fputs(k > 0 ? ",\n{\"name\":" : "\n{\"name\":", f);
        ctl_put_json(f, cl->others[k].name, strlen(cl->others[k].name));
        fputs(",\"master\":", f);
        ctl_put_json(f, cl->others[k].addr, strlen(cl->others[k].addr));
        fprintf(f, ",\"count\":%d,\"idle_s\":%lld}", cl->others[k].count, cl->others[k].idle_s);
    }
    fputs("\n]}\n", f);
}
