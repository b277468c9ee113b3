/*
 * handle.c - lock handles: a name bound to a client and a lock kind.
 *
 * A handle owns copies of its name and channel name (and a fair lock's
 * queue key names, a fenced lock's counter key name); it keeps its client's struct alive (client->handles)
 * until rlock_free, also past rlock_client_close.
 *
 * Threads: any application thread; a handle may be shared between threads.
 */
#include <string.h>

#include "api.h"

static void free_handle(rlock *lock) {
    lock->magic = 0;
    rlock__free(lock->name);
    rlock__free(lock->channel);
    rlock__free(lock->queue);
    rlock__free(lock->timeouts);
    rlock__free(lock->token_key);
    rlock__free(lock);
}

/* A handle of kind for name (its length checked by the caller); NULL if out of memory. */
static rlock *new_handle(rlock_client *c, const rlock__kind *kind, const char *name, size_t len) {
    rlock *lock = rlock__calloc(1, sizeof(*lock));
    if (lock == NULL)
        return NULL;
    lock->name = rlock__memdup0(name, len);
    lock->channel = rlock__lock_channel(name, len, &lock->channel_len);
    if (kind == &rlock__fair) {
        lock->queue = rlock__prefixed_name("redisson_lock_queue", name, len, &lock->queue_len);
        lock->timeouts =
            rlock__prefixed_name("redisson_lock_timeout", name, len, &lock->timeouts_len);
    }
    if (kind == &rlock__fenced)
        lock->token_key =
            rlock__prefixed_name("redisson_lock_token", name, len, &lock->token_key_len);
    if (lock->name == NULL || lock->channel == NULL ||
        (kind == &rlock__fair && (lock->queue == NULL || lock->timeouts == NULL)) ||
        (kind == &rlock__fenced && lock->token_key == NULL)) {
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
 * A fair lock's scripts name its three keys, a fenced lock's two: in a
 * Cluster they must hash to one slot. Redisson's names do for a name
 * without braces and for one with a "{tag}" of its own; not for e.g. "a}b"
 * (the queue key's tag is "a") or "a{b" (no tag: each key hashes whole).
 * Refused here rather than by CROSSSLOT on the first lock.
 */
static int check_slots(rlock_client *c, const rlock *lock) {
    const char *keys[] = {lock->queue, lock->timeouts, lock->token_key};
    size_t lens[] = {lock->queue_len, lock->timeouts_len, lock->token_key_len};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const char *what = lock->kind == &rlock__fair ? "fair" : "fenced";
        if (keys[i] != NULL && !rlock__net_same_slot(&c->net, lock->name, lock->name_len, keys[i],
                                                     lens[i]))
            return rlock__fail(RLOCK_EINVAL, 0, "%s lock name '%.200s': its key '%.200s' hashes "
                                                "to another Cluster slot than the name (a name "
                                                "with '}' but no '{', or with '{' but no "
                                                "non-empty {tag})", what, lock->name, keys[i]);
    }
    return RLOCK_OK;
}

/* rlock_get, rlock_get_fair: a handle of kind for name. */
static int get_handle(rlock_client *client, const rlock__kind *kind, const char *name,
                      rlock **out) {
    rlock__guard g;
    if (out == NULL)
        return RLOCK_EINVAL;
    *out = NULL;
    int status = rlock__enter(&g, client);
    if (status != RLOCK_OK)
        return status;
    size_t len = name != NULL ? strnlen(name, RLOCK_MAX_NAME_LEN + 1) : 0;
    if (len == 0 || len > RLOCK_MAX_NAME_LEN)
        return rlock__leave_status(
            &g, rlock__fail(RLOCK_EINVAL, 0, "lock name: NULL, empty or longer than %d bytes",
                            RLOCK_MAX_NAME_LEN));
    rlock *lock = new_handle(client, kind, name, len);
    if (lock == NULL)
        return rlock__leave_status(&g, RLOCK_ENOMEM);
    if ((status = check_slots(client, lock)) != RLOCK_OK) {
        free_handle(lock);
        return rlock__leave_status(&g, status);
    }
    pthread_mutex_lock(&client->mutex);
    client->handles++;
    pthread_mutex_unlock(&client->mutex);
    *out = lock;
    return rlock__leave_status(&g, RLOCK_OK);
}

int rlock_get(rlock_client *client, const char *name, rlock **out) {
    return get_handle(client, &rlock__reentrant, name, out);
}

int rlock_get_fair(rlock_client *client, const char *name, rlock **out) {
    return get_handle(client, &rlock__fair, name, out);
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
