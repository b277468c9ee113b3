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
        return rlock__fail(RLOCK_EINVAL, 0, "NULL or invalid client");
    if (inherited(c))
        return rlock__fail(RLOCK_ECLOSED, 0, "client inherited across fork(): open a new one");
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &g->cancel_state);
    g->client = c;
    g->error_mark = rlock__error_mark();
    atomic_fetch_add(&c->calls, 1);
    if (atomic_load(&c->state) != RLOCK__OPEN) {
        rlock__leave(g);
        return rlock__fail(RLOCK_ECLOSED, 0, "client closed");
    }
    return RLOCK_OK;
}

int rlock__leave_status(rlock__guard *g, int status) {
    unsigned mark = g->error_mark;
    rlock__leave(g);
    return rlock__fail_default(status, mark);
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
        return rlock__fail(RLOCK_EINVAL, 0, "NULL or freed lock handle");
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

#define HOUR_MS 3600000

/* 1 if lo <= v <= hi; else records which field is out of range. */
static int in_range(long long v, long long lo, long long hi, const char *field) {
    if (v >= lo && v <= hi)
        return 1;
    rlock__fail(RLOCK_EINVAL, 0, "%s %lld: must be %lld..%lld", field, v, lo, hi);
    return 0;
}

/* Whether the caller's struct (of its struct_size) has the field at offset. */
static int has_field(const rlock_config *cfg, size_t offset, size_t size) {
    return cfg->struct_size >= offset + size;
}

static int copy_settings(const rlock_config *cfg, rlock__settings *s) {
    rlock_config defaults;
    rlock_config_init(&defaults);
    if (cfg == NULL)
        cfg = &defaults;
    /* A struct not made by rlock_config_init, or by a header older than the first. */
    if (!has_field(cfg, offsetof(rlock_config, callback_arg), sizeof(void *)))
        return rlock__fail(RLOCK_EINVAL, 0, "config not initialised by rlock_config_init()");
    if (cfg->watchdog_timeout_ms < 30 || cfg->watchdog_timeout_ms > RLOCK_MAX_LEASE_MS)
        return rlock__fail(RLOCK_EINVAL, 0, "watchdog_timeout_ms %lld: must be 30..%lld",
                           cfg->watchdog_timeout_ms, (long long)RLOCK_MAX_LEASE_MS);
    if (!in_range(cfg->connect_timeout_ms, 1, HOUR_MS, "connect_timeout_ms") ||
        !in_range(cfg->command_timeout_ms, 1, HOUR_MS, "command_timeout_ms") ||
        !in_range(cfg->pool_size, 1, 1024, "pool_size") ||
        !in_range(cfg->retry_attempts, 0, 100, "retry_attempts") ||
        !in_range(cfg->retry_interval_ms, 0, HOUR_MS, "retry_interval_ms"))
        return RLOCK_EINVAL;
    /* Fields appended after the first release: absent from an older caller's struct. */
    s->local_handoffs = defaults.local_handoffs;
    if (has_field(cfg, offsetof(rlock_config, local_handoffs), sizeof(int)))
        s->local_handoffs = cfg->local_handoffs;
    if (!in_range(s->local_handoffs, 0, 1000, "local_handoffs"))
        return RLOCK_EINVAL;
    s->on_event = NULL;
    if (has_field(cfg, offsetof(rlock_config, on_event), sizeof(cfg->on_event)))
        s->on_event = cfg->on_event;
    s->watchdog_timeout_ms = cfg->watchdog_timeout_ms;
    s->connect_timeout_ms = cfg->connect_timeout_ms;
    s->command_timeout_ms = cfg->command_timeout_ms;
    s->pool_size = cfg->pool_size;
    s->retry_attempts = cfg->retry_attempts;
    s->retry_interval_ms = cfg->retry_interval_ms;
    s->on_lock_lost = cfg->on_lock_lost;
    s->callback_arg = cfg->callback_arg;
    int status = rlock__parse_url(cfg->url, &s->endpoint);
    if (status == RLOCK_EINVAL)
        return rlock__fail(status, 0, "malformed url (expected redis://[[user]:password@]host"
                                      "[:port][/db] or unix:///path[?db=N])");
    return status;
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
    int64_t deadline_ms = rlock__deadline_after(c->settings.connect_timeout_ms);
    int status = rlock__connect(&c->settings, deadline_ms, &ctx);
    if (status != RLOCK_OK)
        return status;
    status = rlock__scripts_load(ctx, rlock__deadline_after(c->settings.command_timeout_ms),
                                 &c->scripts);
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
    if ((status = rlock__events_start(c)) != RLOCK_OK)
        return status;
    if ((status = rlock__pubsub_start(c)) != RLOCK_OK)
        return status;
    return rlock__watchdog_start(c);
}

int rlock_client_open(const rlock_config *cfg, rlock_client **out) {
    unsigned mark = rlock__error_mark();
    if (out == NULL)
        return rlock__fail(RLOCK_EINVAL, 0, "rlock_client_open: NULL out");
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
        rlock__events_stop(c);
        client_release(c);
        return rlock__fail_default(status, mark);
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
    rlock__events_stop(c);      /* what was found lost is still told */

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
        status = rlock__fail(RLOCK_EINVAL, 0, "lock name: NULL, empty or longer than %d bytes",
                             RLOCK_MAX_NAME_LEN);
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
    return rlock__leave_status(&g, status);
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
