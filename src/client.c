/*
 * client.c - client lifetime, lock handles, the call guard, and the registry
 * of open clients.
 *
 * Lifetime: rlock_client_open builds everything and starts the watchdog and
 * subscriber threads. rlock_client_close moves OPEN -> CLOSING (new calls get
 * RLOCK_ECLOSED), stops the threads, aborts commands in flight, waits for
 * calls in progress to return, releases connections and tables, and moves to
 * CLOSED only after that teardown. The struct itself lives on while lock
 * handles exist: whichever of rlock_client_close (at CLOSED) and the last
 * rlock_free (seeing CLOSED) comes last frees it.
 *
 * Call guard: every public call counts itself in client->calls (atomic) and
 * checks the state after counting, so close never frees what a call uses.
 *
 * Registry: the list of open clients, so that a thread's exit can drop its
 * holds from each of them, and so fork can be made a defined state.
 *
 * Threads: any application thread; exiting threads (registry walk); the
 * forking thread (atfork handlers). Locking: registry_mutex guards the
 * registry list; client->mutex guards state transitions and handles;
 * registry_mutex may be held while taking a client's holds.mutex, never the
 * reverse.
 */
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "internal.h"

static pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static rlock_client *registry; /* guarded by registry_mutex */

/* ---- registry and fork ---------------------------------------------------- */

static void registry_add(rlock_client *c) {
    pthread_mutex_lock(&registry_mutex);
    c->registry_next = registry;
    registry = c;
    pthread_mutex_unlock(&registry_mutex);
}

static void registry_remove(rlock_client *c) {
    pthread_mutex_lock(&registry_mutex);
    for (rlock_client **p = &registry; *p != NULL; p = &(*p)->registry_next) {
        if (*p == c) {
            *p = c->registry_next;
            break;
        }
    }
    pthread_mutex_unlock(&registry_mutex);
}

void rlock__registry_thread_exited(uint64_t tid) {
    pthread_mutex_lock(&registry_mutex);
    for (rlock_client *c = registry; c != NULL; c = c->registry_next)
        rlock__holds_thread_exited(&c->holds, tid);
    pthread_mutex_unlock(&registry_mutex);
}

void rlock__registry_fork_prepare(void) {
    pthread_mutex_lock(&registry_mutex);
}

void rlock__registry_fork_parent(void) {
    pthread_mutex_unlock(&registry_mutex);
}

/* The child inherits clients whose threads it does not have: forget them all. */
void rlock__registry_fork_child(void) {
    registry = NULL;
    pthread_mutex_unlock(&registry_mutex);
}

/* ---- call guard ------------------------------------------------------------ */

static int inherited(const rlock_client *c) {
    return c->fork_generation != rlock__fork_generation();
}

int rlock__enter(rlock__guard *g, rlock_client *c) {
    if (c == NULL || c->magic != RLOCK__CLIENT_MAGIC)
        return RLOCK_EINVAL;
    if (inherited(c))
        return RLOCK_ECLOSED;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &g->cancel_state);
    g->client = c;
    atomic_fetch_add(&c->calls, 1);
    if (atomic_load(&c->state) != RLOCK__OPEN) {
        rlock__leave(g);
        return RLOCK_ECLOSED;
    }
    return RLOCK_OK;
}

void rlock__leave(rlock__guard *g) {
    rlock_client *c = g->client;
    int ignored;
    if (atomic_fetch_sub(&c->calls, 1) == 1 && atomic_load(&c->state) != RLOCK__OPEN) {
        pthread_mutex_lock(&c->mutex);
        pthread_cond_broadcast(&c->idle);
        pthread_mutex_unlock(&c->mutex);
    }
    pthread_setcancelstate(g->cancel_state, &ignored);
}

int rlock__enter_lock(rlock__guard *g, rlock *lock) {
    if (lock == NULL || lock->magic != RLOCK__LOCK_MAGIC)
        return RLOCK_EINVAL;
    return rlock__enter(g, lock->client);
}

int rlock__closing(rlock_client *c) {
    return atomic_load(&c->state) != RLOCK__OPEN;
}

size_t rlock__owner(const rlock_client *c, uint64_t tid, char *buf) {
    memcpy(buf, c->id, 36);
    buf[36] = ':';
    return 37 + rlock__fmt_u64(buf + 37, tid);
}

/* ---- open ------------------------------------------------------------------ */

static int copy_settings(const rlock_config *cfg, rlock__settings *s) {
    rlock_config defaults;
    rlock_config_init(&defaults);
    if (cfg == NULL)
        cfg = &defaults;
    /* A struct not made by rlock_config_init, or by a header older than the first. */
    if (cfg->struct_size < offsetof(rlock_config, callback_arg) + sizeof(void *))
        return RLOCK_EINVAL;
    if (cfg->watchdog_timeout_ms < 30 || cfg->watchdog_timeout_ms > RLOCK_MAX_LEASE_MS ||
        cfg->connect_timeout_ms <= 0 || cfg->command_timeout_ms <= 0 || cfg->pool_size < 1 ||
        cfg->pool_size > 1024 || cfg->retry_attempts < 0 || cfg->retry_attempts > 100 ||
        cfg->retry_interval_ms < 0 || cfg->retry_interval_ms > 3600000)
        return RLOCK_EINVAL;
    /* Fields appended after the first release: absent from an older caller's struct. */
    int local_handoffs = defaults.local_handoffs;
    if (cfg->struct_size >= offsetof(rlock_config, local_handoffs) + sizeof(int))
        local_handoffs = cfg->local_handoffs;
    if (local_handoffs < 0 || local_handoffs > 1000)
        return RLOCK_EINVAL;
    s->local_handoffs = local_handoffs;
    s->watchdog_timeout_ms = cfg->watchdog_timeout_ms;
    s->connect_timeout_ms = cfg->connect_timeout_ms;
    s->command_timeout_ms = cfg->command_timeout_ms;
    s->pool_size = cfg->pool_size;
    s->retry_attempts = cfg->retry_attempts;
    s->retry_interval_ms = cfg->retry_interval_ms;
    s->on_lock_lost = cfg->on_lock_lost;
    s->callback_arg = cfg->callback_arg;
    return rlock__parse_url(cfg->url, &s->endpoint);
}

/* Frees whatever part of a client has been built; the struct too. */
static void client_release(rlock_client *c) {
    rlock__pubsub_destroy(c);
    rlock__pool_destroy(&c->pool);
    rlock__holds_destroy(&c->holds);
    rlock__endpoint_clear(&c->settings.endpoint);
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->mutex);
    c->magic = 0;
    rlock__free(c);
}

/* The first pool connection: proves the url works and loads the scripts. */
static int first_connection(rlock_client *c) {
    redisContext *ctx = NULL;
    int status = rlock__connect(&c->settings, c->settings.connect_timeout_ms, &ctx);
    if (status != RLOCK_OK)
        return status;
    status = rlock__scripts_load(ctx, &c->scripts);
    if (status != RLOCK_OK) {
        redisFree(ctx);
        return status;
    }
    c->pool.slots[0].ctx = ctx;
    return RLOCK_OK;
}

static int client_build(rlock_client *c, const rlock_config *cfg) {
    uuid_t uuid;
    int status = copy_settings(cfg, &c->settings);
    if (status != RLOCK_OK)
        return status;
    uuid_generate(uuid);
    uuid_unparse_lower(uuid, c->id);
    if ((status = rlock__pool_init(&c->pool, c->settings.pool_size)) != RLOCK_OK)
        return status;
    if ((status = rlock__holds_init(&c->holds)) != RLOCK_OK)
        return status;
    if ((status = first_connection(c)) != RLOCK_OK)
        return status;
    if ((status = rlock__pubsub_start(c)) != RLOCK_OK)
        return status;
    return rlock__watchdog_start(c);
}

int rlock_client_open(const rlock_config *cfg, rlock_client **out) {
    if (out == NULL)
        return RLOCK_EINVAL;
    *out = NULL;
    rlock__fork_init();
    rlock_client *c = rlock__calloc(1, sizeof(*c));
    if (c == NULL)
        return RLOCK_ENOMEM;
    if (pthread_mutex_init(&c->mutex, NULL) != 0 || rlock__cond_init(&c->idle) != 0) {
        rlock__free(c); /* glibc's init cannot fail; nothing to destroy */
        return RLOCK_ENOMEM;
    }
    c->magic = RLOCK__CLIENT_MAGIC;
    c->fork_generation = rlock__fork_generation();
    atomic_store(&c->state, RLOCK__OPEN);
    int status = client_build(c, cfg);
    if (status != RLOCK_OK) {
        atomic_store(&c->state, RLOCK__CLOSING);
        rlock__pubsub_stop(c);
        rlock__pool_abort(&c->pool);
        client_release(c);
        return status;
    }
    registry_add(c);
    *out = c;
    return RLOCK_OK;
}

/* ---- close ----------------------------------------------------------------- */

void rlock_client_close(rlock_client *c) {
    if (c == NULL || c->magic != RLOCK__CLIENT_MAGIC || inherited(c))
        return;
    pthread_mutex_lock(&c->mutex);
    int was_open = atomic_load(&c->state) == RLOCK__OPEN;
    atomic_store(&c->state, RLOCK__CLOSING);
    pthread_mutex_unlock(&c->mutex);
    if (!was_open)
        return;
    registry_remove(c);
    rlock__pubsub_stop(c);      /* waiters return RLOCK_ECLOSED */
    rlock__pool_abort(&c->pool); /* commands in flight fail now */
    rlock__watchdog_stop(c);
    pthread_mutex_lock(&c->mutex);
    while (atomic_load(&c->calls) > 0)
        pthread_cond_wait(&c->idle, &c->mutex);
    pthread_mutex_unlock(&c->mutex);

    /* Still CLOSING: rlock_free leaves the struct to us until we say CLOSED. */
    rlock__pubsub_destroy(c);
    rlock__pool_destroy(&c->pool);
    rlock__holds_destroy(&c->holds);
    rlock__endpoint_clear(&c->settings.endpoint);

    pthread_mutex_lock(&c->mutex);
    atomic_store(&c->state, RLOCK__CLOSED);
    int last = c->handles == 0;
    pthread_mutex_unlock(&c->mutex);
    if (last)
        client_release(c);
}

const char *rlock_client_id(const rlock_client *client) {
    if (client == NULL || client->magic != RLOCK__CLIENT_MAGIC)
        return NULL;
    return client->id;
}

/* ---- lock handles ------------------------------------------------------------ */

#define CHANNEL_PREFIX "redisson_lock__channel:"

/* Redisson's rule: names with '{' carry their own hash tag; others get one. */
static char *channel_name(const char *name, size_t len, size_t *out_len) {
    size_t prefix = sizeof(CHANNEL_PREFIX) - 1;
    int tagged = memchr(name, '{', len) != NULL;
    size_t total = prefix + len + (tagged ? 0 : 2);
    char *channel = rlock__malloc(total + 1);
    if (channel == NULL)
        return NULL;
    char *p = channel;
    memcpy(p, CHANNEL_PREFIX, prefix);
    p += prefix;
    if (!tagged)
        *p++ = '{';
    memcpy(p, name, len);
    p += len;
    if (!tagged)
        *p++ = '}';
    *p = '\0';
    *out_len = total;
    return channel;
}

static void free_handle(rlock *lock) {
    lock->magic = 0;
    rlock__free(lock->name);
    rlock__free(lock->channel);
    rlock__free(lock);
}

int rlock_get(rlock_client *client, const char *name, rlock **out) {
    rlock__guard g;
    if (out == NULL)
        return RLOCK_EINVAL;
    *out = NULL;
    int status = rlock__enter(&g, client);
    if (status != RLOCK_OK)
        return status;
    size_t len = name != NULL ? strnlen(name, RLOCK_MAX_NAME_LEN + 1) : 0;
    rlock *lock = NULL;
    if (len == 0 || len > RLOCK_MAX_NAME_LEN) {
        status = RLOCK_EINVAL;
        goto out;
    }
    lock = rlock__calloc(1, sizeof(*lock));
    if (lock == NULL || (lock->name = rlock__memdup0(name, len)) == NULL ||
        (lock->channel = channel_name(name, len, &lock->channel_len)) == NULL) {
        status = RLOCK_ENOMEM;
        goto out;
    }
    lock->magic = RLOCK__LOCK_MAGIC;
    lock->client = client;
    lock->name_len = len;
    pthread_mutex_lock(&client->mutex);
    client->handles++;
    pthread_mutex_unlock(&client->mutex);
    *out = lock;
    lock = NULL;
out:
    if (lock != NULL)
        free_handle(lock);
    rlock__leave(&g);
    return status;
}

void rlock_free(rlock *lock) {
    if (lock == NULL || lock->magic != RLOCK__LOCK_MAGIC)
        return;
    rlock_client *c = lock->client;
    int last = 0;
    free_handle(lock);
    if (inherited(c))
        return; /* the parent's client is not ours to touch */
    pthread_mutex_lock(&c->mutex);
    c->handles--;
    last = c->handles == 0 && atomic_load(&c->state) == RLOCK__CLOSED;
    pthread_mutex_unlock(&c->mutex);
    if (last)
        client_release(c);
}

const char *rlock_name(const rlock *lock) {
    if (lock == NULL || lock->magic != RLOCK__LOCK_MAGIC)
        return NULL;
    return lock->name;
}
