/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * identity.c - who a client is, for a person looking at Redis: the name of
 * every connection it opens, and the registration hash that ties the first
 * half of its owner fields to a host and a process.
 *
 * Connection name (CLIENT SETNAME, shown by CLIENT LIST):
 *   rlock:<host>:<pid>:<first 8 characters of the client id>
 * Registration (rlock_config.register_client; docs/operations.md):
 *   HASH rlock:client:<client id>, TTL max(watchdog_timeout_ms, 1000) ms:
 *   id, host, pid, program, version, started_ms (wall clock), url (without
 *   credentials), watchdog_timeout_ms.
 * rlockctl reads exactly this layout: a change here is a change of format.
 *
 * Threads: the opening thread only (before the client is published).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api.h"

#define KEY_PREFIX "rlock:client:"
#define HOST_MAX 64

/*
 * This host's name, as CLIENT SETNAME accepts it (no spaces, printable
 * ASCII): other bytes become '_'. ':' cannot occur in a host name.
 */
static void host_name(char *buf, size_t size) {
    if (gethostname(buf, size) != 0 || buf[0] == '\0')
        snprintf(buf, size, "unknown");
    buf[size - 1] = '\0';
    for (char *p = buf; *p != '\0'; p++)
        if (*p <= ' ' || *p > '~' || *p == ':')
            *p = '_';
}

void rlock__name_client(rlock__settings *s, const char *client_id) {
    char host[HOST_MAX + 1];
    host_name(host, sizeof(host));
    snprintf(s->client_id, sizeof(s->client_id), "%s", client_id);
    snprintf(s->conn_name, sizeof(s->conn_name), "rlock:%s:%d:%.8s", host, (int)getpid(),
             client_id);
}

/* The field values of the registration, as text. */
typedef struct identity {
    char key[sizeof(KEY_PREFIX) + 36];
    char host[HOST_MAX + 1];
    char pid[24];
    char started_ms[24];
    char watchdog_timeout_ms[24];
    char url[512];
} identity;

int rlock__register_client(rlock_client *c, const char *url) {
    identity id;
    const rlock__settings *s = &c->settings;
    snprintf(id.key, sizeof(id.key), KEY_PREFIX "%s", c->id);
    host_name(id.host, sizeof(id.host));
    rlock__fmt_i64(id.pid, getpid());
    rlock__fmt_i64(id.started_ms, rlock__wall_ms());
    rlock__fmt_i64(id.watchdog_timeout_ms, s->watchdog_timeout_ms);
    rlock__url_redacted(url, id.url, sizeof(id.url));
    const char *fields[] = {"id",      c->id,          "host",       id.host,
                            "pid",     id.pid,         "program",    program_invocation_short_name,
                            "version", rlock_version(), "started_ms", id.started_ms,
                            "url",     id.url,          "watchdog_timeout_ms",
                            id.watchdog_timeout_ms};
    return rlock__registration_start(&c->engine, id.key, fields,
                                     (int)(sizeof(fields) / sizeof(fields[0]) / 2));
}
