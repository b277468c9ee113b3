/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * layout.c - Redisson's names, which Java programs sharing our locks read
 * and write too (docs/redisson.md):
 *   the owner field  "<client uuid>:<owner id>" (Redisson: "<uuid>:<thread id>")
 *   the channel      "redisson_lock__channel:{<name>}"; a name with '{' is used
 *                    as it is (Redisson's rule), so "X" and "{X}" share one.
 *   the fair lock's  "redisson_lock_queue:{<name>}", "redisson_lock_timeout:{<name>}"
 *                    (same rule), and a waiter's channel "<channel>:<owner field>"
 *   the read-write   "redisson_rwlock:{<name>}" (channel), per read hold
 *   lock's           "{<name>}:<owner field>:rwlock_timeout:<k>" (suffixName rule:
 *                    "<name>:..." for a name with '{'), the writer field
 *                    "<owner field>:write"; and rlock's "rlock_rwlock_writers:{<name>}"
 *   the fenced lock's "redisson_lock_token:{<name>}" (its token counter)
 * and a handle's keys by its kind (rlock__kind_keys), made and freed here.
 *
 * Pure functions: any thread, no shared state.
 */
#include <string.h>

#include "internal.h"

size_t rlock__owner_field(const char *client_id, uint64_t owner, char *buf) {
    memcpy(buf, client_id, 36);
    buf[36] = ':';
    return 37 + rlock__fmt_u64(buf + 37, owner);
}

size_t rlock__owner_field_of(const void *client_id, uint64_t owner, char *buf) {
    return rlock__owner_field(client_id, owner, buf);
}

/* Redisson's prefixName(): a name with '{' is used as it is, else wrapped in one. */
int rlock__derived_keys_share_slot(const char *name, size_t len) {
    const char *open = memchr(name, '{', len);
    if (open == NULL)
        return memchr(name, '}', len) == NULL;
    const char *close = memchr(open + 1, '}', len - (size_t)(open + 1 - name));
    return close != NULL && close > open + 1;
}

char *rlock__prefixed_name(const char *prefix, const char *name, size_t len, size_t *out_len) {
    size_t prefix_len = strlen(prefix);
    int tagged = memchr(name, '{', len) != NULL;
    size_t total = prefix_len + 1 + len + (tagged ? 0 : 2);
    char *out = rlock__malloc(total + 1);
    if (out == NULL)
        return NULL;
    char *p = out;
    memcpy(p, prefix, prefix_len);
    p += prefix_len;
    *p++ = ':';
    if (!tagged)
        *p++ = '{';
    memcpy(p, name, len);
    p += len;
    if (!tagged)
        *p++ = '}';
    *p = '\0';
    *out_len = total;
    return out;
}

/* The part of a key of several a lock's keys share: what follows the prefix's ':'. */
static void set_family(rlock__kind_keys *k) {
    const char *key = k->queue != NULL ? k->queue : k->token_key != NULL ? k->token_key : k->writers;
    size_t len = k->queue != NULL       ? k->queue_len
                 : k->token_key != NULL ? k->token_key_len
                                        : k->writers_len;
    if (key == NULL)
        return;
    const char *colon = memchr(key, ':', len);
    k->family = colon + 1;
    k->family_len = len - (size_t)(colon + 1 - key);
}

int rlock__kind_keys_make(rlock__kind_keys *k, const rlock__kind *kind, const char *name,
                          size_t len) {
    int rw = kind == &rlock__rw_read || kind == &rlock__rw_write;
    memset(k, 0, sizeof(*k));
    if (kind == &rlock__fair) {
        k->queue = rlock__prefixed_name("redisson_lock_queue", name, len, &k->queue_len);
        k->timeouts = rlock__prefixed_name("redisson_lock_timeout", name, len, &k->timeouts_len);
    }
    if (kind == &rlock__fenced)
        k->token_key = rlock__prefixed_name("redisson_lock_token", name, len, &k->token_key_len);
    if (rw)
        k->writers = rlock__prefixed_name("rlock_rwlock_writers", name, len, &k->writers_len);
    if ((kind == &rlock__fair && (k->queue == NULL || k->timeouts == NULL)) ||
        (kind == &rlock__fenced && k->token_key == NULL) || (rw && k->writers == NULL)) {
        rlock__kind_keys_free(k);
        return RLOCK_ENOMEM;
    }
    set_family(k);
    return RLOCK_OK;
}

void rlock__kind_keys_free(rlock__kind_keys *k) {
    rlock__free(k->queue);
    rlock__free(k->timeouts);
    rlock__free(k->token_key);
    rlock__free(k->writers);
    memset(k, 0, sizeof(*k));
}
