/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rlock_actor.c - the C side of the Redisson interop suite (test/redisson/).
 *
 * The Java tests start this program as a process and drive it with one line
 * per command on stdin. Lock ownership in rlock is per *thread*, so every
 * command names the worker thread that runs it:
 *
 *     <thread> <command> [<number>...] [<name>]
 *
 * <thread> is 0..MAX_WORKERS-1 (a worker is started on first use). The lock
 * name is the rest of the line, so names may hold spaces, braces and UTF-8.
 * Commands (numbers first, name last):
 *
 *     lock NAME                 rlock_lock (watchdog)
 *     trylock WAIT_MS NAME      rlock_try_lock(WAIT_MS, watchdog)
 *     unlock NAME               rlock_unlock
 *     force NAME                rlock_force_unlock       value: 1 deleted, 0 not
 *     held NAME                 rlock_is_held_by_current_thread  value: 1/0
 *     count NAME                rlock_hold_count         value: hold count
 *     locked NAME               rlock_is_locked          value: 1/0
 *     ttl NAME                  rlock_remain_ttl         value: ms, -2 unlocked
 *     lost                      value: on_lock_lost calls so far
 *     lostevents                value: RLOCK_EVENT_LOCK_LOST events so far
 *     stress MS COUNTER NAME    for MS ms: lock, GET COUNTER, SET COUNTER+1,
 *                               unlock (non-atomic on purpose: only the lock
 *                               makes it exact); value: iterations done
 *
 * Any command on a name may be prefixed with "fair": it then runs on the
 * worker's rlock_get_fair() handle of NAME (Redisson's getFairLock) instead
 * of its rlock_get() handle, e.g. "3 fair lock NAME". With "fenced" it runs
 * on an rlock_get_fenced() handle (Redisson's getFencedLock): lock and
 * trylock then use rlock_try_lock_fenced and answer the token as value, and
 *
 *     token NAME                rlock_fence_token        value: the counter
 *
 * After that prefix, "as OWNER" makes lock, trylock, unlock, held and count
 * act for the explicit owner OWNER (rlock_lock_as, ..., rlock_hold_count_as),
 * e.g. "2 fenced as 77 lock NAME".
 *
 * With MORE_URLS (comma-separated) the actor also opens a client on each,
 * and NAME may be a Redlock over URL and them (the masters in that order):
 *
 *     redlock LEASE_MS WAIT_MS NAME   rlock_redlock_try_lock  value: validity ms
 *     redunlock NAME                  rlock_redlock_unlock
 *
 * With "read" or "write" a command runs on the read or write handle of
 * rlock_get_rw() (Redisson's getReadWriteLock), e.g. "3 read lock NAME",
 * "3 write unlock NAME"; with "read", stress checks instead that the counter
 * does not change while it reads (GET, a 100 us pause, GET): status
 * VIOLATION if it does.
 *
 * Each command is answered by one line (in completion order, which is why it
 * repeats the thread):
 *
 *     <thread> <status> <value> <start_us> <end_us>
 *
 * status is rlock_status_name() without "RLOCK_" (OK, BUSY, ENOTOWNER, ...);
 * start_us/end_us are CLOCK_REALTIME microseconds around the rlock call, so the
 * Java side can time wake-ups against its own clock on the same machine.
 *
 * Usage: rlock_actor URL [WATCHDOG_MS [LOCAL_HANDOFFS [MORE_URLS]]]
 * Prints "ready <client uuid>" once the client is open; exits at EOF on stdin.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlock.h"

#define MAX_WORKERS 16
#define MAX_HANDLES 64

static rlock_client *client;
/* The Redlock's masters: client, then one per MORE_URLS entry. */
#define MAX_MASTERS 8
static rlock_client *masters[MAX_MASTERS];
static int nmasters;
static char redis_host[256] = "127.0.0.1";
static int redis_port = 6379;
static atomic_int lost_calls, lost_events;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

/* One queued command line; a worker runs its queue in order. */
struct cmd {
    struct cmd *next;
    char line[];
};

struct worker {
    int id;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct cmd *head, *tail;
    int quit;
    /* This worker's lock handles, by name (handles outlive their commands so
     * that a freed handle never races the lock it names). */
    rlock *handles[MAX_HANDLES];
    int kind[MAX_HANDLES];      /* handles[i] came from rlock_get (PLAIN), _fair, _fenced,
                                   or rlock_get_rw (READ, WRITE) */
    int nhandles;
    rlock_redlock *redlocks[MAX_HANDLES]; /* this worker's Redlocks, by name */
    char *redlock_names[MAX_HANDLES];
    int nredlocks;
};

static struct worker *workers[MAX_WORKERS];

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void reply_word(int t, const char *s, long long value, long long t0, long long t1) {
    pthread_mutex_lock(&out_mu);
    printf("%d %s %lld %lld %lld\n", t, s, value, t0, t1);
    fflush(stdout);
    pthread_mutex_unlock(&out_mu);
}

static void reply(int t, int status, long long value, long long t0, long long t1) {
    const char *s = rlock_status_name(status);
    reply_word(t, strncmp(s, "RLOCK_", 6) == 0 ? s + 6 : s, value, t0, t1);
}

static void on_lost(const char *name, void *arg) {
    (void)name;
    (void)arg;
    atomic_fetch_add(&lost_calls, 1);
}

static void on_event(const rlock_event *ev, void *arg) {
    (void)arg;
    if (ev->kind == RLOCK_EVENT_LOCK_LOST)
        atomic_fetch_add(&lost_events, 1);
}

/* A command's prefix: which handle of the name it runs on. */
enum { PLAIN, FAIR, FENCED, READ, WRITE };

static rlock *handle(struct worker *w, const char *name, int kind) {
    rlock *l, *rw[2];
    for (int i = 0; i < w->nhandles; i++)
        if (w->kind[i] == kind && strcmp(rlock_name(w->handles[i]), name) == 0)
            return w->handles[i];
    if (w->nhandles + 2 > MAX_HANDLES)
        return NULL;
    if (kind == READ || kind == WRITE) { /* both handles, kept for later commands */
        if (rlock_get_rw(client, name, &rw[0], &rw[1]) != RLOCK_OK)
            return NULL;
        w->kind[w->nhandles] = READ;
        w->handles[w->nhandles++] = rw[0];
        w->kind[w->nhandles] = WRITE;
        w->handles[w->nhandles++] = rw[1];
        return rw[kind == WRITE];
    }
    int rc = kind == FAIR     ? rlock_get_fair(client, name, &l)
             : kind == FENCED ? rlock_get_fenced(client, name, &l)
                              : rlock_get(client, name, &l);
    if (rc != RLOCK_OK)
        return NULL;
    w->kind[w->nhandles] = kind;
    w->handles[w->nhandles++] = l;
    return l;
}

/* Splits off the next space-separated word of *rest (NULL if none). */
static char *word(char **rest) {
    char *w = *rest, *sp;
    if (w == NULL || *w == '\0')
        return NULL;
    sp = strchr(w, ' ');
    if (sp) {
        *sp = '\0';
        *rest = sp + 1;
    } else {
        *rest = w + strlen(w);
    }
    return w;
}

static rlock_redlock *redlock(struct worker *w, const char *name) {
    for (int i = 0; i < w->nredlocks; i++)
        if (strcmp(w->redlock_names[i], name) == 0)
            return w->redlocks[i];
    if (w->nredlocks == MAX_HANDLES ||
        rlock_redlock_new(masters, (size_t)nmasters, name, &w->redlocks[w->nredlocks]) != RLOCK_OK)
        return NULL;
    if ((w->redlock_names[w->nredlocks] = strdup(name)) == NULL) {
        rlock_redlock_free(w->redlocks[w->nredlocks]);
        return NULL;
    }
    return w->redlocks[w->nredlocks++];
}

/* redlock LEASE_MS WAIT_MS NAME, redunlock NAME: rest is what follows the command word. */
static void run_redlock(struct worker *w, const char *op, char *rest) {
    long long t0, validity = 0;
    int acquire = strcmp(op, "redlock") == 0, rc = RLOCK_EINVAL;
    char *lease = acquire ? word(&rest) : NULL, *wait = acquire ? word(&rest) : NULL;
    rlock_redlock *rl = acquire && wait == NULL ? NULL : redlock(w, rest);
    t0 = now_us();
    if (rl != NULL && acquire)
        rc = rlock_redlock_try_lock(rl, strtoll(wait, NULL, 10), strtoll(lease, NULL, 10),
                                    &validity);
    else if (rl != NULL)
        rc = rlock_redlock_unlock(rl);
    reply(w->id, rc, rc == RLOCK_OK ? validity : 0, t0, now_us());
}

/* GET counter as a number (0 if unset); -1 on a Redis error. */
static long long get_counter(redisContext *r, const char *counter) {
    redisReply *get = redisCommand(r, "GET %s", counter);
    long long v = -1;
    if (get && get->type == REDIS_REPLY_STRING)
        v = atoll(get->str);
    else if (get && get->type == REDIS_REPLY_NIL)
        v = 0;
    freeReplyObject(get);
    return v;
}

/* One read of the read stress: the counter must not change while the read lock is held. */
static int read_once(rlock *l, redisContext *r, const char *counter, int *violation) {
    int rc = rlock_lock(l);
    if (rc != RLOCK_OK)
        return rc;
    long long before = get_counter(r, counter);
    struct timespec pause = {0, 100000};
    nanosleep(&pause, NULL);
    long long after = get_counter(r, counter);
    *violation = before != after;
    rc = rlock_unlock(l);
    return before < 0 || after < 0 ? RLOCK_EREDIS : rc;
}

/* The stress loop: its own hiredis connection for the counter (a context is
 * not thread-safe); stops at the first rlock or Redis error. */
static void stress(int t, rlock *l, long long ms, const char *counter, int reads) {
    long long t0 = now_us(), end = t0 + ms * 1000, n = 0;
    int rc = RLOCK_OK;
    redisContext *r = redisConnect(redis_host, redis_port);
    if (r == NULL || r->err) {
        reply(t, RLOCK_EIO, 0, t0, now_us());
        if (r)
            redisFree(r);
        return;
    }
    while (reads && now_us() < end) {
        int violation = 0;
        if ((rc = read_once(l, r, counter, &violation)) != RLOCK_OK)
            break;
        n++;
        if (violation) {
            redisFree(r);
            reply_word(t, "VIOLATION", n, t0, now_us());
            return;
        }
    }
    while (!reads && now_us() < end) {
        if ((rc = rlock_lock(l)) != RLOCK_OK)
            break;
        redisReply *get = redisCommand(r, "GET %s", counter);
        long long v = get && get->type == REDIS_REPLY_STRING ? atoll(get->str) : 0;
        int ok = get && (get->type == REDIS_REPLY_STRING || get->type == REDIS_REPLY_NIL);
        freeReplyObject(get);
        redisReply *set = ok ? redisCommand(r, "SET %s %lld", counter, v + 1) : NULL;
        ok = set && set->type == REDIS_REPLY_STATUS;
        freeReplyObject(set);
        if (!ok) {
            rc = RLOCK_EREDIS;
            rlock_unlock(l);
            break;
        }
        n++;
        if ((rc = rlock_unlock(l)) != RLOCK_OK)
            break;
    }
    redisFree(r);
    reply(t, rc, n, t0, now_us());
}

/* Runs one command line (without the thread number) on worker w. */
static void run(struct worker *w, char *rest) {
    char *op = word(&rest);
    long long t0 = now_us(), value = 0;
    int rc;
    rlock *l;

    int kind = op == NULL                    ? PLAIN
               : strcmp(op, "fair") == 0   ? FAIR
               : strcmp(op, "fenced") == 0 ? FENCED
               : strcmp(op, "read") == 0   ? READ
               : strcmp(op, "write") == 0  ? WRITE
                                           : PLAIN;
    uint64_t owner = 0; /* 0: the worker thread itself */
    if (kind != PLAIN)
        op = word(&rest);
    if (op != NULL && strcmp(op, "as") == 0) {
        char *id = word(&rest);
        owner = id != NULL ? strtoull(id, NULL, 10) : 0;
        op = id != NULL ? word(&rest) : NULL;
    }
    if (op == NULL) {
        reply(w->id, RLOCK_EINVAL, 0, t0, t0);
        return;
    }
    if (strcmp(op, "redlock") == 0 || strcmp(op, "redunlock") == 0) {
        run_redlock(w, op, rest);
        return;
    }
    if (strcmp(op, "lost") == 0 || strcmp(op, "lostevents") == 0) {
        value = atomic_load(strcmp(op, "lost") == 0 ? &lost_calls : &lost_events);
        reply(w->id, RLOCK_OK, value, t0, t0);
        return;
    }
    /* Numeric arguments (and stress's counter key) come first, the name last. */
    long long num = 0;
    char *counter = NULL;
    if (strcmp(op, "trylock") == 0 || strcmp(op, "stress") == 0) {
        char *a = word(&rest);
        if (strcmp(op, "stress") == 0)
            counter = word(&rest);
        if (a == NULL || (strcmp(op, "stress") == 0 && counter == NULL)) {
            reply(w->id, RLOCK_EINVAL, 0, t0, now_us());
            return;
        }
        num = strtoll(a, NULL, 10);
    }
    if ((l = handle(w, rest, kind)) == NULL) {
        reply(w->id, RLOCK_EINVAL, 0, t0, now_us());
        return;
    }
    t0 = now_us();
    if (strcmp(op, "lock") == 0 || strcmp(op, "trylock") == 0) {
        long long wait = strcmp(op, "lock") == 0 ? -1 : num;
        rc = kind == FENCED && owner ? rlock_try_lock_fenced_as(l, owner, wait, -1, &value)
             : kind == FENCED        ? rlock_try_lock_fenced(l, wait, -1, &value)
             : owner                 ? rlock_try_lock_as(l, owner, wait, -1)
                                     : rlock_try_lock(l, wait, -1);
    } else if (strcmp(op, "unlock") == 0) {
        rc = owner ? rlock_unlock_as(l, owner) : rlock_unlock(l);
    } else if (strcmp(op, "token") == 0) {
        rc = rlock_fence_token(l, &value);
    } else if (strcmp(op, "force") == 0 || strcmp(op, "held") == 0 ||
               strcmp(op, "count") == 0 || strcmp(op, "locked") == 0) {
        /* These return a count/boolean, or a negative status. */
        int v = op[0] == 'f' ? rlock_force_unlock(l)
              : op[0] == 'h' ? (owner ? rlock_is_held_by(l, owner) : rlock_is_held_by_current_thread(l))
              : op[0] == 'c' ? (owner ? rlock_hold_count_as(l, owner) : rlock_hold_count(l))
                             : rlock_is_locked(l);
        rc = v < 0 ? v : RLOCK_OK;
        value = v < 0 ? 0 : v;
    } else if (strcmp(op, "ttl") == 0) {
        rc = rlock_remain_ttl(l, &value);
    } else if (strcmp(op, "stress") == 0) {
        stress(w->id, l, num, counter, kind == READ);
        return;
    } else {
        rc = RLOCK_EINVAL;
    }
    reply(w->id, rc, value, t0, now_us());
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (w->head == NULL && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        struct cmd *c = w->head;
        if (c == NULL) { /* quit with an empty queue */
            pthread_mutex_unlock(&w->mu);
            break;
        }
        w->head = c->next;
        if (w->head == NULL)
            w->tail = NULL;
        pthread_mutex_unlock(&w->mu);
        run(w, c->line);
        free(c);
    }
    for (int i = 0; i < w->nhandles; i++)
        rlock_free(w->handles[i]);
    for (int i = 0; i < w->nredlocks; i++) {
        rlock_redlock_free(w->redlocks[i]);
        free(w->redlock_names[i]);
    }
    return NULL;
}

static struct worker *worker_get(int id) {
    if (workers[id] == NULL) {
        struct worker *w = calloc(1, sizeof *w);
        if (w == NULL)
            return NULL;
        w->id = id;
        pthread_mutex_init(&w->mu, NULL);
        pthread_cond_init(&w->cv, NULL);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            free(w);
            return NULL;
        }
        workers[id] = w;
    }
    return workers[id];
}

int main(int argc, char **argv) {
    rlock_config cfg;
    char line[70000];
    int rc;

    if (argc < 2 || argc > 5) {
        fprintf(stderr, "usage: %s URL [WATCHDOG_MS [LOCAL_HANDOFFS [MORE_URLS]]]\n", argv[0]);
        return 2;
    }
    rlock_config_init(&cfg);
    cfg.url = argv[1];
    if (argc > 2)
        cfg.watchdog_timeout_ms = atoll(argv[2]);
    if (argc > 3)
        cfg.local_handoffs = atoi(argv[3]);
    cfg.on_lock_lost = on_lost;
    cfg.on_event = on_event;
    /* The stress loop's own connection goes to the same server. */
    sscanf(argv[1], "redis://%255[^:]:%d", redis_host, &redis_port);
    if ((rc = rlock_client_open(&cfg, &client)) != RLOCK_OK) {
        fprintf(stderr, "rlock_actor: %s: %s\n", rlock_status_name(rc), rlock_last_error());
        return 1;
    }
    masters[nmasters++] = client;
    for (char *more = argc > 4 ? argv[4] : NULL, *url; more != NULL && nmasters < MAX_MASTERS;) {
        url = more;
        more = strchr(more, ',');
        if (more != NULL)
            *more++ = '\0';
        cfg.url = url;
        if ((rc = rlock_client_open(&cfg, &masters[nmasters++])) != RLOCK_OK) {
            fprintf(stderr, "rlock_actor: %s: %s: %s\n", url, rlock_status_name(rc),
                    rlock_last_error());
            return 1;
        }
    }
    pthread_mutex_lock(&out_mu);
    printf("ready %s\n", rlock_client_id(client));
    fflush(stdout);
    pthread_mutex_unlock(&out_mu);

    while (fgets(line, sizeof line, stdin)) {
        char *rest = line, *t;
        struct worker *w;
        struct cmd *c;
        line[strcspn(line, "\n")] = '\0';
        t = word(&rest);
        if (t == NULL || atoi(t) < 0 || atoi(t) >= MAX_WORKERS ||
            (w = worker_get(atoi(t))) == NULL ||
            (c = malloc(sizeof *c + strlen(rest) + 1)) == NULL) {
            reply(-1, RLOCK_EINVAL, 0, now_us(), now_us());
            continue;
        }
        strcpy(c->line, rest);
        c->next = NULL;
        pthread_mutex_lock(&w->mu);
        if (w->tail)
            w->tail->next = c;
        else
            w->head = c;
        w->tail = c;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    /* EOF: let every worker finish its queue (a blocked rlock_lock ends when
     * the client closes), then close. Locks still held expire by their lease. */
    for (int i = 0; i < MAX_WORKERS; i++) {
        if (workers[i]) {
            pthread_mutex_lock(&workers[i]->mu);
            workers[i]->quit = 1;
            pthread_cond_signal(&workers[i]->cv);
            pthread_mutex_unlock(&workers[i]->mu);
        }
    }
    for (int i = 0; i < nmasters; i++)
        rlock_client_close(masters[i]);
    for (int i = 0; i < MAX_WORKERS; i++)
        if (workers[i])
            pthread_join(workers[i]->thread, NULL);
    return 0;
}
