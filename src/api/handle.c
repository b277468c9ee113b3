/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * handle.c - lock handles: a name bound to a client and a lock kind.
 *
 * A handle owns copies of its name and channel name, and its kind's other
 * keys (rlock__kind_keys, made by the kind layer); it keeps its client's struct alive (client->handles) until
 * rlock_free, also past rlock_client_close. rlock_get_rw makes two handles
 * at once, one per kind.
 *
 * Threads: any application thread; a handle may be shared between threads.
 */
#include <string.h>

#include "api.h"

static void free_handle(rlock *lock) {
    lock->magic = 0;
    rlock__free(lock->name);
    rlock__free(lock->channel);
    rlock__kind_keys_free(&lock->keys);
    rlock__free(lock);
}

/* A handle of kind for name (its length checked by the caller); NULL if out of memory. */
static rlock *new_handle(rlock_client *c, const rlock__kind *kind, const char *name, size_t len) {
    rlock *lock = rlock__calloc(1, sizeof(*lock));
    if (lock == NULL)
        return NULL;
    lock->name = rlock__memdup0(name, len);
    lock->channel = rlock__prefixed_name(kind->channel_prefix, name, len, &lock->channel_len);
    if (lock->name == NULL || lock->channel == NULL ||
        rlock__kind_keys_make(&lock->keys, kind, name, len) != RLOCK_OK) {
        free_handle(lock);
        return NULL;
    }
    lock->magic = RLOCK__LOCK_MAGIC;
    lock->client = c;
    lock->engine = &c->engine;
    lock->client_id = c->id;
    lock->kind = kind;
    lock->name_len = len;
    lock->publish_verb = rlock__net_publish_verb(&c->net, name, len, lock->channel,
                                                 lock->channel_len);
    return lock;
}

/*
 * A fair lock's scripts name its three keys, a fenced lock's two, a
 * read-write lock's touch its per-hold keys and its writers' set: in a
 * Cluster they must hash to the name's slot. Redisson's names do for a name
 * without braces and for one with a "{tag}" of its own; not for e.g. "a}b"
 * (the queue key's tag is "a") or "a{b" (no tag: each key hashes whole).
 * Refused here rather than by CROSSSLOT (or a hold key on another node) on
 * the first lock.
 */
static int check_slots(rlock_client *c, const rlock *lock) {
    const char *keys[] = {lock->keys.queue, lock->keys.timeouts, lock->keys.token_key, lock->keys.writers};
    size_t lens[] = {lock->keys.queue_len, lock->keys.timeouts_len, lock->keys.token_key_len, lock->keys.writers_len};
    const char *what = lock->kind == &rlock__fair    ? "fair"
                       : lock->kind == &rlock__fenced ? "fenced"
                                                      : "read-write";
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (keys[i] != NULL && !rlock__net_same_slot(&c->net, lock->name, lock->name_len, keys[i],
                                                     lens[i]))
            return rlock__fail(RLOCK_EINVAL, 0, "%s lock name '%.200s': its key '%.200s' hashes "
                                                "to another Cluster slot than the name (a name "
                                                "with '}' but no '{', or with '{' but no "
                                                "non-empty {tag})", what, lock->name, keys[i]);
    /* A read hold's key ("{name}:<owner>:rwlock_timeout:<k>") differs per owner: by the rule. */
    if (lock->keys.writers != NULL && rlock__net_slot_of(&c->net, lock->name, lock->name_len) >= 0 &&
        !rlock__derived_keys_share_slot(lock->name, lock->name_len))
        return rlock__fail(RLOCK_EINVAL, 0, "%s lock name '%.200s': its read holds' keys hash to "
                                            "other Cluster slots than the name", what, lock->name);
    return RLOCK_OK;
}

/* A handle of kind for name (len checked), its names checked for the Cluster; or an error. */
static int make_handle(rlock_client *c, const rlock__kind *kind, const char *name, size_t len,
                       rlock **out) {
    rlock *lock = new_handle(c, kind, name, len);
    if (lock == NULL)
        return RLOCK_ENOMEM;
    int status = check_slots(c, lock);
    if (status != RLOCK_OK) {
        free_handle(lock);
        return status;
    }
    *out = lock;
    return RLOCK_OK;
}

/*
 * rlock_get, rlock_get_fair, rlock_get_fenced, rlock_get_rw: n handles for
 * name, of kinds[i] into *outs[i]; all of them, or none (every *outs[i] NULL).
 */
static int get_handles(rlock_client *client, const rlock__kind *const *kinds, rlock **const *outs,
                       int n, const char *name) {
    rlock__guard g;
    for (int i = 0; i < n; i++)
        if (outs[i] == NULL)
            return rlock__fail(RLOCK_EINVAL, 0, "%s: NULL out pointer (where the handle goes)",
                               n == 2 ? "rlock_get_rw" : "rlock_get");
    for (int i = 0; i < n; i++)
        *outs[i] = NULL;
    int status = rlock__enter(&g, client);
    if (status != RLOCK_OK)
        return status;
    size_t len = name != NULL ? strnlen(name, RLOCK_MAX_NAME_LEN + 1) : 0;
    if (len == 0 || len > RLOCK_MAX_NAME_LEN) { /* refused before the client: not counted */
        rlock__leave(&g);
        return rlock__fail(RLOCK_EINVAL, 0, "lock name: NULL, empty or longer than %d bytes",
                           RLOCK_MAX_NAME_LEN);
    }
    for (int i = 0; i < n && status == RLOCK_OK; i++)
        status = make_handle(client, kinds[i], name, len, outs[i]);
    if (status != RLOCK_OK) {
        for (int i = 0; i < n; i++) {
            if (*outs[i] != NULL)
                free_handle(*outs[i]);
            *outs[i] = NULL;
        }
        return rlock__leave_status(&g, status);
    }
    pthread_mutex_lock(&client->mutex);
    client->handles += n;
    pthread_mutex_unlock(&client->mutex);
    return rlock__leave_status(&g, RLOCK_OK);
}

/* One handle of kind for name. */
static int get_handle(rlock_client *client, const rlock__kind *kind, const char *name,
                      rlock **out) {
    const rlock__kind *kinds[] = {kind};
    rlock **outs[] = {out};
    return get_handles(client, kinds, outs, 1, name);
}

int rlock_get(rlock_client *client, const char *name, rlock **out) {
    return get_handle(client, &rlock__reentrant, name, out);
}

int rlock_get_fair(rlock_client *client, const char *name, rlock **out) {
    return get_handle(client, &rlock__fair, name, out);
}

int rlock_get_rw(rlock_client *client, const char *name, rlock **read_lock, rlock **write_lock) {
    const rlock__kind *kinds[] = {&rlock__rw_read, &rlock__rw_write};
    rlock **outs[] = {read_lock, write_lock};
    if (read_lock != NULL && read_lock == write_lock) /* one would overwrite the other */
        return rlock__fail(RLOCK_EINVAL, 0, "rlock_get_rw: read_lock and write_lock are the same "
                                            "pointer");
    return get_handles(client, kinds, outs, 2, name);
}

int rlock_get_fenced(rlock_client *client, const char *name, rlock **out) {
    return get_handle(client, &rlock__fenced, name, out);
}

void rlock_free(rlock *lock) {
    if (lock == NULL || lock->magic != RLOCK__LOCK_MAGIC)
        return;
    rlock_client *c = lock->client;
    int last = 0;
    free_handle(lock);
    if (rlock__inherited(c))
        return; /* the parent's client is not ours to touch */
    pthread_mutex_lock(&c->mutex);
    c->handles--;
    last = c->handles == 0 && atomic_load(&c->state) == RLOCK__CLOSED;
    pthread_mutex_unlock(&c->mutex);
    if (last)
        rlock__client_free(c);
}

const char *rlock_name(const rlock *lock) {
    if (lock == NULL || lock->magic != RLOCK__LOCK_MAGIC)
        return NULL;
    return lock->name;
}
