/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * clients.c - which process a client id is: the registration every rlock
 * client (>= 0.5) keeps, a hash rlock:client:<uuid> with fields id, host,
 * pid, program, version, started_ms, url (no credentials) and
 * watchdog_timeout_ms, its TTL renewed by the client's watchdog; and the
 * connections it names `CLIENT SETNAME rlock:<host>:<pid>:<uuid first 8>`,
 * seen in CLIENT LIST on each master. Java Redisson registers nothing.
 *
 * Threads: the main thread.
 */
#include <stdlib.h>
#include <string.h>

#include "rlockctl.h"

#define REGISTRATION_PREFIX "rlock:client:"

void ctl_process_free(ctl_process *p) {
    if (p == NULL)
        return;
    free(p->id);
    free(p->host);
    free(p->program);
    free(p->version);
    free(p->url);
    free(p);
}

static long long number_or(const redisReply *v, long long none) {
    char *end = NULL;
    long long n = strtoll(v->str, &end, 10);
    return end != v->str && *end == '\0' ? n : none;
}

/* A registration's fields (HGETALL) and TTL; NULL if there is none. */
static ctl_process *read_process(const char *id, const redisReply *h, const redisReply *ttl) {
    if (h == NULL || h->type != REDIS_REPLY_ARRAY || h->elements == 0)
        return NULL;
    ctl_process *p = xcalloc(1, sizeof(*p));
    p->id = xstrndup(id, strlen(id));
    p->pid = p->started_ms = p->watchdog_timeout_ms = p->idle_s = -1;
    p->ttl_ms = ttl != NULL && ttl->type == REDIS_REPLY_INTEGER ? ttl->integer : -1;
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i], *v = h->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        char **text = strcmp(f->str, "host") == 0      ? &p->host
                      : strcmp(f->str, "program") == 0 ? &p->program
                      : strcmp(f->str, "version") == 0 ? &p->version
                      : strcmp(f->str, "url") == 0     ? &p->url : NULL;
        if (text != NULL) {
            free(*text);
            *text = xstrndup(v->str, v->len);
        } else if (strcmp(f->str, "pid") == 0) {
            p->pid = number_or(v, -1);
        } else if (strcmp(f->str, "started_ms") == 0) {
            p->started_ms = number_or(v, -1);
        } else if (strcmp(f->str, "watchdog_timeout_ms") == 0) {
            p->watchdog_timeout_ms = number_or(v, -1);
        }
    }
    return p;
}

int ctl_read_processes(ctl *c, char **ids, int n, ctl_process **out) {
    if (n == 0)
        return RLOCK_OK;
    rlock__inspect_cmd *cmds = xcalloc((size_t)n * 2, sizeof(*cmds));
    const char **argv = xcalloc((size_t)n * 4, sizeof(*argv));
    char **keys = xcalloc((size_t)n, sizeof(*keys));
    redisReply **rs = xcalloc((size_t)n * 2, sizeof(*rs));
    for (int i = 0; i < n; i++) {
        size_t len = strlen(REGISTRATION_PREFIX) + strlen(ids[i]);
        keys[i] = xmalloc(len + 1);
        snprintf(keys[i], len + 1, "%s%s", REGISTRATION_PREFIX, ids[i]);
        argv[i * 4] = "HGETALL", argv[i * 4 + 1] = keys[i];
        argv[i * 4 + 2] = "PTTL", argv[i * 4 + 3] = keys[i];
        cmds[i * 2] = (rlock__inspect_cmd){.argc = 2, .argv = argv + i * 4};
        cmds[i * 2 + 1] = (rlock__inspect_cmd){.argc = 2, .argv = argv + i * 4 + 2};
    }
    int status = ctl_run(c, cmds, n * 2, rs);
    for (int i = 0; i < n * 2 && status == RLOCK_OK; i++)
        if (rs[i]->type == REDIS_REPLY_ERROR) /* refused: not "unregistered" */
            status = ctl_reply_failed(&cmds[i], rs[i]);
    for (int i = 0; i < n && status == RLOCK_OK; i++)
        out[i] = read_process(ids[i], rs[i * 2], rs[i * 2 + 1]);
    ctl_free_replies(rs, n * 2);
    for (int i = 0; i < n; i++)
        free(keys[i]);
    free(rs), free(keys), free(argv), free(cmds);
    return status;
}

/* ---- every registration and connection ---------------------------------------------- */

/* The ids of the registrations (SCAN rlock:client:* on every master), but rlockctl's own. */
static int scan_registrations(ctl *c, ctl_names *ids) {
    static const size_t plen = sizeof(REGISTRATION_PREFIX) - 1;
    ctl_names keys = {0};
    int status = ctl_scan(c, REGISTRATION_PREFIX "*", "hash", NULL, &keys);
    for (int i = 0; i < keys.n && status == RLOCK_OK; i++) {
        /* rlockctl's own client registers too: it is not what the operator asks about */
        const ctl_name *k = &keys.v[i];
        if (k->len > plen && strcmp(k->s + plen, rlock_client_id(c->client)) != 0)
            ctl_names_add(ids, k->s + plen, k->len - plen);
    }
    ctl_names_free(&keys);
    return status;
}

/* Counts a connection into *v (per name and master), keeping the least idle's idle. */
static void add_conn(ctl_conns **v, int *n, const char *name, size_t len, const char *addr,
                     long long idle_s) {
    for (int i = 0; i < *n; i++)
        if (strlen((*v)[i].name) == len && memcmp((*v)[i].name, name, len) == 0 &&
            strcmp((*v)[i].addr, addr) == 0) {
            (*v)[i].count++;
            if (idle_s < (*v)[i].idle_s)
                (*v)[i].idle_s = idle_s;
            return;
        }
    *v = xrealloc(*v, (size_t)(*n + 1) * sizeof(**v));
    (*v)[(*n)++] = (ctl_conns){.name = xstrndup(name, len),
                               .addr = xstrndup(addr, strlen(addr)), .count = 1,
                               .idle_s = idle_s};
}

/* The value of " key=" in a CLIENT LIST line (len bytes), or NULL. */
static const char *field_of(const char *line, size_t len, const char *key) {
    size_t klen = strlen(key);
    for (const char *p = line; p + klen <= line + len; p++)
        if ((p == line || p[-1] == ' ') && strncmp(p, key, klen) == 0)
            return p + klen;
    return NULL;
}

/* Whether a connection name "rlock:<host>:<pid>:<id8>" is this rlockctl's own client's. */
static int is_own(const char *name, size_t len, const char *own_id) {
    return len > 9 && name[len - 9] == ':' && memcmp(name + len - 8, own_id, 8) == 0;
}

/*
 * CLIENT LIST's lines whose name= starts with rlock: (not ours) are counted
 * per name; other names (not empty) apart.
 */
static void read_client_list(ctl_clients *cl, const char *text, const char *addr,
                             const char *own_id) {
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
        const char *name = field_of(line, len, "name=");
        const char *idle = field_of(line, len, "idle=");
        long long idle_s = idle != NULL ? strtoll(idle, NULL, 10) : 0;
        size_t nlen = 0;
        while (name != NULL && name + nlen < line + len && name[nlen] != ' ' && name[nlen] != '\r')
            nlen++;
        if (nlen > 6 && strncmp(name, "rlock:", 6) == 0) {
            if (!is_own(name, nlen, own_id))
                add_conn(&cl->conns, &cl->nconns, name, nlen, addr, idle_s);
        } else if (nlen > 0) { /* e.g. a Java Redisson client's clientName */
            add_conn(&cl->others, &cl->nothers, name, nlen, addr, idle_s);
        }
        line = end != NULL ? end + 1 : NULL;
    }
}

/*
 * CLIENT LIST refused at addr: connections unknown (no owner is called gone
 * for it). Said once per run, not at every batch of names or watch screen.
 */
static void refused(ctl_clients *cl, const char *addr, const redisReply *r) {
    static int said;
    cl->conns_known = 0;
    if (said++)
        return;
    fprintf(stderr, "rlockctl: CLIENT LIST at %s: ", addr);
    ctl_put_str(stderr, r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    fputs(" (which processes are alive is not known)\n", stderr);
}

static int list_connections(ctl *c, rlock__inspect_node **masters, int n, ctl_clients *cl) {
    cl->conns_known = 1;
    for (int i = 0; i < n; i++) {
        const char *argv[] = {"CLIENT", "LIST"};
        rlock__inspect_cmd cmd = {.node = masters[i], .argc = 2, .argv = argv};
        redisReply *r = NULL;
        char addr[300];
        int status = ctl_run(c, &cmd, 1, &r);
        if (status != RLOCK_OK)
            return status;
        rlock__inspect_node_addr(masters[i], addr, sizeof(addr));
        if (r->type == REDIS_REPLY_STRING)
            read_client_list(cl, r->str, addr, rlock_client_id(c->client));
        else /* an ACL may refuse CLIENT LIST: the registrations still tell a lot */
            refused(cl, addr, r);
        freeReplyObject(r);
    }
    return RLOCK_OK;
}

int ctl_list_conns(ctl *c, ctl_clients *out) {
    rlock__inspect_node *masters[RLOCK__INSPECT_MAX_MASTERS];
    int nmasters = 0;
    int status = rlock__inspect_masters(c->client, masters, RLOCK__INSPECT_MAX_MASTERS, &nmasters);
    return status == RLOCK_OK ? list_connections(c, masters, nmasters, out) : status;
}

/* The connection name a registered client gives its connections. */
static int names_process(const ctl_conns *conn, const ctl_process *p) {
    char want[512];
    snprintf(want, sizeof(want), "rlock:%s:%lld:%.8s", p->host != NULL ? p->host : "", p->pid,
             p->id);
    return strcmp(conn->name, want) == 0;
}

int ctl_find_clients(ctl *c, ctl_clients *out) {
    rlock__inspect_node *masters[RLOCK__INSPECT_MAX_MASTERS];
    ctl_names ids = {0};
    int nmasters = 0;
    *out = (ctl_clients){0};
    int status = scan_registrations(c, &ids);
    if (status == RLOCK_OK) {
        char **id = xcalloc((size_t)ids.n, sizeof(*id));
        for (int i = 0; i < ids.n; i++)
            id[i] = ids.v[i].s;
        out->v = xcalloc((size_t)ids.n, sizeof(*out->v));
        status = ctl_read_processes(c, id, ids.n, out->v);
        for (int i = 0; i < ids.n; i++)
            if (out->v[i] != NULL) /* gone between SCAN and HGETALL: skipped */
                out->v[out->n++] = out->v[i];
        free(id);
    }
    if (status == RLOCK_OK)
        status = rlock__inspect_masters(c->client, masters, RLOCK__INSPECT_MAX_MASTERS, &nmasters);
    if (status == RLOCK_OK)
        status = list_connections(c, masters, nmasters, out);
    for (int i = 0; i < out->n; i++)
        for (int k = 0; k < out->nconns; k++)
            if (names_process(&out->conns[k], out->v[i])) {
                ctl_process *p = out->v[i];
                p->connections += out->conns[k].count;
                if (p->idle_s < 0 || out->conns[k].idle_s < p->idle_s)
                    p->idle_s = out->conns[k].idle_s;
                out->conns[k].registered = 1;
            }
    ctl_names_free(&ids);
    return status;
}

void ctl_clients_free(ctl_clients *clients) {
    for (int i = 0; i < clients->n; i++)
        ctl_process_free(clients->v[i]);
    for (int i = 0; i < clients->nconns; i++) {
        free(clients->conns[i].name);
        free(clients->conns[i].addr);
    }
    for (int i = 0; i < clients->nothers; i++) {
        free(clients->others[i].name);
        free(clients->others[i].addr);
    }
    free(clients->others);
    free(clients->v);
    free(clients->conns);
    *clients = (ctl_clients){0};
}
