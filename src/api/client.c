/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c - client lifetime and the call guard.
 *
 * Lifetime: rlock_client_open builds the layers bottom up -- settings,
 * events, net (first connection, scripts), engine (holds, subscriber and
 * watchdog threads). rlock_client_close moves OPEN -> CLOSING (new calls
 * get RLOCK_ECLOSED), stops the threads, aborts commands in flight, waits
 * for calls in progress to return, releases everything, and moves to CLOSED
 * only after that teardown. The struct itself lives on while lock handles
 * exist: whichever of rlock_client_close (at CLOSED) and the last rlock_free
 * (seeing CLOSED) comes last frees it.
 *
 * Call guard: every public call counts itself in client->calls (atomic) and
 * checks the state after counting, so close never frees what a call uses.
 *
 * Threads: any application thread. Locking: client->mutex guards state
 * transitions and the handle count.
 */
#include <uuid/uuid.h>

#include "api.h"

/* ---- call guard ------------------------------------------------------------ */

int rlock__inherited(const rlock_client *c) {
    return c->fork_generation != rlock__fork_generation();
}

int rlock__enter(rlock__guard *g, rlock_client *c) {
    if (c == NULL || c->magic != RLOCK__CLIENT_MAGIC)
        return rlock__fail(RLOCK_EINVAL, 0, "NULL or invalid client");
    if (rlock__inherited(c))
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
    rlock__count_status(&g->client->events.stats, status);
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

/* Leaves the first n guards of gs, last first. */
static void leave_first(rlock__guards *gs, size_t n) {
    while (n-- > 0)
        rlock__leave(&gs->g[n]);
}

/* Ends an explicit owner's registrations (before the guards that keep their clients go). */
static void end_as(rlock__guards *gs) {
    for (size_t i = 0; gs->as != NULL && i < gs->n; i++)
        rlock__owner_call_end(&gs->as[i]);
    rlock__free(gs->as);
    gs->as = NULL;
}

int rlock__enter_all(rlock__guards *gs, rlock *const *locks, size_t n) {
    gs->n = n;
    gs->as = NULL;
    if ((gs->g = rlock__malloc(n * sizeof(*gs->g))) == NULL)
        return RLOCK_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        int status = rlock__enter_lock(&gs->g[i], locks[i]);
        if (status != RLOCK_OK) {
            leave_first(gs, i);
            rlock__free(gs->g);
            return status;
        }
    }
    return RLOCK_OK;
}

/*
 * A call over several handles (a multi-lock's, a Redlock's) counts its
 * outcome once on each client it entered, as rlock__leave_status does for
 * one: an error, and RLOCK_BUSY (which only their acquisitions return).
 */
static void count_all(const rlock__guards *gs, int status) {
    for (size_t i = 0; i < gs->n; i++) {
        rlock_client *c = gs->g[i].client;
        size_t first = 0;
        while (gs->g[first].client != c)
            first++;
        if (first < i)
            continue; /* counted at its first guard */
        rlock__count_status(&c->events.stats, status);
        rlock__count_busy(&c->events.stats, status);
    }
}

int rlock__leave_all(rlock__guards *gs, int status) {
    unsigned mark = gs->g[0].error_mark;
    count_all(gs, status);
    end_as(gs);
    leave_first(gs, gs->n);
    rlock__free(gs->g);
    return rlock__fail_default(status, mark);
}

void rlock__leave_all_on_cancel(void *guards) {
    rlock__guards *gs = guards;
    end_as(gs);
    leave_first(gs, gs->n);
    rlock__free(gs->g);
}

/* ---- open ------------------------------------------------------------------ */

/*
 * Stops what runs, in the order close needs: waiters return RLOCK_ECLOSED
 * and those in a kind's queue in Redis leave it (their attempt in flight,
 * then their leave: each within a command timeout), commands in flight
 * fail now, then the watchdog; calls in progress drain (close only);
 * events queued are still delivered.
 */
static void stop_threads(rlock_client *c, int drain_calls) {
    rlock__waiters_stop(&c->engine);
    rlock__waiters_drain_queues(&c->engine,
                                rlock__deadline_after(2LL * c->settings.command_timeout_ms));
    rlock__net_abort(&c->net);
    rlock__watchdog_stop(&c->engine);
    if (drain_calls) {
        pthread_mutex_lock(&c->mutex);
        while (atomic_load(&c->calls) > 0)
            pthread_cond_wait(&c->idle, &c->mutex);
        pthread_mutex_unlock(&c->mutex);
    }
    rlock__events_stop(&c->events);
}

/* Releases the layers (top down); the struct stays. */
static void release_layers(rlock_client *c) {
    rlock__engine_destroy(&c->engine);
    rlock__net_close(&c->net);
}

void rlock__client_free(rlock_client *c) {
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->mutex);
    c->magic = 0;
    rlock__free(c);
}

/* The INFO line of an open client: who it is, where it went. */
static void log_open(rlock_client *c, const char *url) {
    char shown[512];
    if (!rlock__log_wanted(&c->settings, RLOCK_LOG_INFO))
        return;
    rlock__log(&c->events, RLOCK_LOG_INFO, "CLIENT_OPEN",
               " id=%s name=%s url=%s version=%s register_client=%d", c->id,
               c->settings.conn_name, rlock__url_redacted(url, shown, sizeof(shown)),
               rlock_version(), c->settings.register_client);
}

/*
 * shared_reads_ms no longer does anything (shared read holds left the
 * library; examples/shared_read.c builds them on explicit owners): one
 * line says so, that a program which sets it is not left believing it.
 */
static void log_ignored(rlock_client *c) {
    if (c->settings.shared_reads_ms == 0 || !rlock__log_wanted(&c->settings, RLOCK_LOG_WARN))
        return;
    rlock__log(&c->events, RLOCK_LOG_WARN, "CONFIG_IGNORED",
               " shared_reads_ms=%d: ignored (shared read holds left the library; see "
               "examples/shared_read.c): every reader takes a hold of its own",
               c->settings.shared_reads_ms);
}

static int client_build(rlock_client *c, const rlock_config *cfg) {
    uuid_t uuid;
    rlock_config defaults;
    int status = rlock__settings_from(cfg, &c->settings);
    if (status != RLOCK_OK)
        return status;
    rlock_config_init(&defaults);
    uuid_generate(uuid);
    uuid_unparse_lower(uuid, c->id);
    rlock__name_client(&c->settings, c->id);
    c->engine.settings = &c->settings;
    c->engine.net = &c->net;
    c->engine.events = &c->events;
    const char *url = cfg != NULL ? cfg->url : defaults.url;
    /* TLS is every connection's business: the url's options join the config's first. */
    if ((status = rlock__url_tls(url, &c->settings.tls)) != RLOCK_OK)
        return status;
    if ((status = rlock__events_start(&c->events, &c->settings)) != RLOCK_OK)
        return status;
    status = rlock__net_open(&c->net, url, &c->settings, &c->events, rlock__scripts,
                             RLOCK__SCRIPT_COUNT);
    if (status == RLOCK_OK)
        status = rlock__engine_start(&c->engine, c->id);
    if (status == RLOCK_OK && c->settings.register_client)
        status = rlock__register_client(c, url);
    if (status == RLOCK_OK) {
        log_open(c, url);
        log_ignored(c);
    }
    return status;
}

int rlock_client_open(const rlock_config *cfg, rlock_client **out) {
    unsigned mark = rlock__error_mark();
    if (out == NULL)
        return rlock__fail(RLOCK_EINVAL, 0, "rlock_client_open: NULL out");
    *out = NULL;
    rlock__registry_init();
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
        stop_threads(c, 0);
        release_layers(c);
        rlock__client_free(c);
        return rlock__fail_default(status, mark);
    }
    rlock__registry_add(c);
    *out = c;
    return RLOCK_OK;
}

/* ---- close ----------------------------------------------------------------- */

/* Close itself is no cancellation point: cancelled in one of its waits, the closing thread
 * would leave a mutex of the client locked and the client half closed. */
static void close_client(rlock_client *c);

void rlock_client_close(rlock_client *c) {
    int was;
    if (c == NULL || c->magic != RLOCK__CLIENT_MAGIC || rlock__inherited(c))
        return;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &was);
    close_client(c);
    pthread_setcancelstate(was, NULL);
}

static void close_client(rlock_client *c) {
    pthread_mutex_lock(&c->mutex);
    int was_open = atomic_load(&c->state) == RLOCK__OPEN;
    atomic_store(&c->state, RLOCK__CLOSING);
    pthread_mutex_unlock(&c->mutex);
    if (!was_open)
        return;
    rlock__registry_remove(c);
    rlock__registration_stop(&c->engine);
    rlock__log(&c->events, RLOCK_LOG_INFO, "CLIENT_CLOSE", " id=%s", c->id);
    stop_threads(c, 1);
    /* Still CLOSING: rlock_free leaves the struct to us until we say CLOSED. */
    release_layers(c);
    pthread_mutex_lock(&c->mutex);
    atomic_store(&c->state, RLOCK__CLOSED);
    int last = c->handles == 0;
    pthread_mutex_unlock(&c->mutex);
    if (last)
        rlock__client_free(c);
}

const char *rlock_client_id(const rlock_client *client) {
    if (client == NULL || client->magic != RLOCK__CLIENT_MAGIC)
        return NULL;
    return client->id;
}
