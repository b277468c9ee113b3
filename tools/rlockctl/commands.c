/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * commands.c - list, show, unlock and clients: what each reads, prints and
 * answers with (the exit statuses of rlockctl.h, CTL_*).
 *
 * unlock is the one command that changes anything, and it does so only
 * through the public API: rlock_force_unlock() on a handle of the lock's
 * kind (rlock_get, rlock_get_fair), after showing who holds it and being
 * told yes (the terminal, or --yes).
 *
 * dequeue removes one entry from a fair lock's queue (a queue stuck behind a
 * stopped head has no other remedy: the lock is free, so unlock has nothing
 * to do, and the head's deadline may be minutes away), after the same
 * question, through the fair lock's own leave script (the seam's one write,
 * rlock__inspect_fair_dequeue), which wakes the next waiter.
 *
 * Threads: the main thread.
 */
#include <string.h>
#include <unistd.h>

#include "rlockctl.h"

int ctl_cmd_list(ctl *c) {
    const char *pattern = c->opt.argc > 1 ? c->opt.argv[1] : NULL;
    ctl_locks locks;
    int status = ctl_find_locks(c, pattern, &locks);
    if (status != RLOCK_OK) {
        ctl_locks_free(&locks);
        return ctl_redis_error("list", status);
    }
    if (c->opt.json)
        ctl_render_list_json(c, &locks);
    else if (locks.n > 0)
        ctl_render_list(c, &locks);
    else
        fprintf(stderr, "rlockctl: no lock matches %s\n", pattern != NULL ? pattern : "*");
    int found = locks.n > 0;
    ctl_locks_free(&locks);
    return found ? CTL_OK : CTL_NOTHING;
}

static void put_name(FILE *f, const char *name) {
    ctl_put_text(f, name, strlen(name));
}

/*
 * Looks NAME up; CTL_OK with the lock in *locks (v[0]), or the exit status
 * after saying on stderr why there is none (not locked, not a lock, an error).
 */
static int find_named(ctl *c, const char *name, ctl_locks *locks) {
    ctl_lookup lookup;
    int status = ctl_find_lock(c, name, strlen(name), &lookup, locks);
    if (status != RLOCK_OK)
        return ctl_redis_error(name, status);
    if (lookup.found == FOUND_LOCK)
        return CTL_OK;
    fputs("rlockctl: ", stderr);
    put_name(stderr, name);
    if (lookup.found == FOUND_OTHER) {
        fprintf(stderr, " holds %s, not a lock\n", lookup.what);
        return CTL_NOT_LOCK;
    }
    if (lookup.token >= 0)
        fprintf(stderr, ": not locked (fenced lock, last token %lld)\n", lookup.token);
    else
        fputs(": not locked\n", stderr);
    return CTL_NOTHING;
}

int ctl_cmd_show(ctl *c) {
    ctl_locks locks;
    int status = find_named(c, c->opt.argv[1], &locks);
    if (status == CTL_OK && c->opt.json) {
        ctl_render_lock_json(c->out, &locks.v[0]);
        fputc('\n', c->out);
    } else if (status == CTL_OK) {
        ctl_render_show(c, &locks.v[0]);
    }
    ctl_locks_free(&locks);
    return status;
}

/* ---- unlock ------------------------------------------------------------------------- */

/* "NAME held by 1a2b3c4d:17 x2 (host ... pid ...)[, ...]" */
static void describe_holders(FILE *f, const ctl_lock *l) {
    put_name(f, l->name);
    fputs(" held by ", f);
    for (int k = 0; k < l->nowners; k++) {
        fputs(k > 0 ? ", " : "", f);
        ctl_put_owner_short(f, &l->owners[k]);
        fputs(" (", f);
        ctl_put_party(f, &l->owners[k]);
        fputc(')', f);
    }
}

/* Asks on the terminal; CTL_OK if the answer is y or yes. */
static int confirm(ctl *c, const ctl_lock *l) {
    char answer[16] = "";
    if (c->opt.yes)
        return CTL_OK;
    if (!isatty(STDIN_FILENO)) {
        fputs("rlockctl: not force-unlocking ", stderr);
        put_name(stderr, l->name);
        fputs(": no terminal to confirm on (pass --yes)\n", stderr);
        return CTL_REFUSED;
    }
    fputs("force-unlock ", stderr);
    describe_holders(stderr, l);
    fputs("? [y/N] ", stderr);
    if (fgets(answer, sizeof(answer), stdin) == NULL ||
        (strcmp(answer, "y\n") != 0 && strcmp(answer, "yes\n") != 0)) {
        fputs("rlockctl: not unlocked\n", stderr);
        return CTL_REFUSED;
    }
    return CTL_OK;
}

static int has_owner(const ctl_lock *l, const ctl_owner *o) {
    for (int k = 0; k < l->nowners; k++)
        if (l->owners[k].field_len == o->field_len &&
            memcmp(l->owners[k].field, o->field, o->field_len) == 0)
            return 1;
    return 0;
}

/* The same holders (owner fields, in any order; hold counts may differ). */
static int same_holders(const ctl_lock *a, const ctl_lock *b) {
    if (a->nowners != b->nowners)
        return 0;
    for (int k = 0; k < a->nowners; k++)
        if (!has_owner(b, &a->owners[k]))
            return 0;
    return 1;
}

/*
 * After the question: reads the lock again, for the yes was to the holders
 * shown. While the operator read, the lock may have been released and taken
 * by another, whom nobody asked about: refused (CTL_REFUSED), or CTL_NOTHING
 * if it is free. On CTL_OK *locks is the fresh read.
 */
static int still_as_confirmed(ctl *c, ctl_locks *locks) {
    ctl_locks now;
    int status = find_named(c, locks->v[0].name, &now);
    if (status == CTL_OK && !now.v[0].held) {
        fputs("rlockctl: ", stderr);
        put_name(stderr, now.v[0].name);
        fputs(": not locked any more (released or expired meanwhile)\n", stderr);
        status = CTL_NOTHING;
    } else if (status == CTL_OK && !same_holders(&locks->v[0], &now.v[0])) {
        fputs("rlockctl: not force-unlocking: the holders changed while you answered: ", stderr);
        describe_holders(stderr, &now.v[0]);
        fputs(" now; run it again\n", stderr);
        status = CTL_REFUSED;
    }
    if (status == CTL_OK) {
        ctl_locks_free(locks);
        *locks = now;
    } else {
        ctl_locks_free(&now);
    }
    return status;
}

/*
 * A handle of the lock's kind: rlock_get_fair for a fair lock, rlock_get for
 * plain and fenced ones (a fenced lock's hash and channel are the plain
 * lock's; its token stays), and for a read-write lock the handle of its mode
 * (rlock_get_rw: each handle force-unlocks its own mode only, as Redisson's).
 */
static int handle_for(ctl *c, const ctl_lock *l, rlock **out) {
    rlock *other = NULL;
    int status;
    if (l->kind == KIND_RW && l->mode != NULL && strcmp(l->mode, "write") == 0)
        status = rlock_get_rw(c->client, l->name, &other, out);
    else if (l->kind == KIND_RW)
        status = rlock_get_rw(c->client, l->name, out, &other);
    else
        status = l->kind == KIND_FAIR ? rlock_get_fair(c->client, l->name, out)
                                      : rlock_get(c->client, l->name, out);
    rlock_free(other);
    return status == RLOCK_OK ? CTL_OK : ctl_redis_error("unlock", status);
}

static int force_unlock(ctl *c, const ctl_lock *l) {
    rlock *handle = NULL;
    int status = handle_for(c, l, &handle);
    if (status != CTL_OK)
        return status;
    int rc = rlock_force_unlock(handle);
    rlock_free(handle);
    if (rc == 1) {
        fputs("force-unlocked ", c->out);
        describe_holders(c->out, l);
        fputc('\n', c->out);
        return CTL_OK;
    }
    if (rc == 0) {
        fputs("rlockctl: ", stderr);
        put_name(stderr, l->name);
        fputs(": not locked any more (released or expired meanwhile)\n", stderr);
        return CTL_NOTHING;
    }
    if (rc == RLOCK_ENOTLOCK) {
        fputs("rlockctl: ", stderr);
        ctl_put_str(stderr, rlock_last_error()); /* it quotes the name */
        fputc('\n', stderr);
        return CTL_NOT_LOCK;
    }
    return ctl_redis_error("force unlock", rc);
}

int ctl_cmd_unlock(ctl *c) {
    ctl_locks locks;
    int status = find_named(c, c->opt.argv[1], &locks);
    if (status == CTL_OK && !locks.v[0].held) {
        fputs("rlockctl: ", stderr);
        put_name(stderr, locks.v[0].name);
        fprintf(stderr, ": not locked (%lld waiters queued)\n", locks.v[0].queue_len);
        status = CTL_NOTHING;
    }
    if (status == CTL_OK)
        status = confirm(c, &locks.v[0]);
    if (status == CTL_OK && !c->opt.yes)
        status = still_as_confirmed(c, &locks);
    if (status == CTL_OK)
        status = force_unlock(c, &locks.v[0]);
    ctl_locks_free(&locks);
    return status;
}

/* ---- dequeue ------------------------------------------------------------------------ */

/* The position of entry in l's queue (0 = the head), or -1. */
static int queued_at(const ctl_lock *l, const char *entry) {
    for (int k = 0; k < l->nqueue; k++)
        if (l->queue[k].who.field_len == strlen(entry) &&
            memcmp(l->queue[k].who.field, entry, l->queue[k].who.field_len) == 0)
            return k;
    return -1;
}

/* "ENTRY (1 of 2 in NAME's queue; <its process>)" */
static void describe_entry(FILE *f, const ctl_lock *l, int at) {
    const ctl_owner *o = &l->queue[at].who;
    ctl_put_text(f, o->field, o->field_len);
    fprintf(f, " (%d of %lld in the queue of ", at + 1, l->queue_len);
    put_name(f, l->name);
    fputs(", ", f);
    fputs(l->held ? "held; " : "free; ", f);
    ctl_put_party(f, o);
    fputc(')', f);
}

/*
 * How much earlier the waiters behind entry at may take over: its share of
 * the deadlines (each waiter's is the one before it plus its own wait,
 * Redisson's layout), what its leaving gives back. For the head, the time
 * left to its deadline.
 */
static long long wait_given_back(const ctl_lock *l, int at) {
    long long deadline = l->queue[at].deadline_ms;
    long long before = at > 0 ? l->queue[at - 1].deadline_ms : ctl_wall_ms();
    if (deadline < 0 || before < 0 || deadline < before)
        return 0;
    return deadline - before;
}

/* Asks on the terminal whether to remove the entry at; CTL_OK if yes. */
static int confirm_dequeue(ctl *c, const ctl_lock *l, int at) {
    char answer[16] = "";
    if (c->opt.yes)
        return CTL_OK;
    if (!isatty(STDIN_FILENO)) {
        fputs("rlockctl: not removing ", stderr);
        ctl_put_text(stderr, l->queue[at].who.field, l->queue[at].who.field_len);
        fputs(": no terminal to confirm on (pass --yes)\n", stderr);
        return CTL_REFUSED;
    }
    fputs("remove ", stderr);
    describe_entry(stderr, l, at);
    if (ctl_stuck(&l->queue[at].who) == NULL)
        fputs("\n  its process looks alive: it queues again at its next attempt", stderr);
    fputs("? [y/N] ", stderr);
    if (fgets(answer, sizeof(answer), stdin) == NULL ||
        (strcmp(answer, "y\n") != 0 && strcmp(answer, "yes\n") != 0)) {
        fputs("rlockctl: not removed\n", stderr);
        return CTL_REFUSED;
    }
    return CTL_OK;
}

/* Removes the entry at through the fair lock's own leave script; CTL_OK if it was there. */
static int dequeue(ctl *c, const ctl_lock *l, int at) {
    rlock *fair = NULL;
    const ctl_owner *o = &l->queue[at].who;
    int status = rlock_get_fair(c->client, l->name, &fair);
    if (status != RLOCK_OK)
        return ctl_redis_error("dequeue", status);
    int rc = rlock__inspect_fair_dequeue(fair, o->field, o->field_len, wait_given_back(l, at));
    rlock_free(fair);
    if (rc < 0)
        return ctl_redis_error("dequeue", rc);
    if (rc == 0) {
        fputs("rlockctl: ", stderr);
        ctl_put_text(stderr, o->field, o->field_len);
        fputs(": not queued any more (it took the lock or left meanwhile)\n", stderr);
        return CTL_NOTHING;
    }
    fputs("removed ", c->out);
    describe_entry(c->out, l, at);
    if (at == 0 && !l->held && l->nqueue > 1)
        fputs("; the next waiter was woken", c->out);
    fputc('\n', c->out);
    return CTL_OK;
}

int ctl_cmd_dequeue(ctl *c) {
    const char *entry = c->opt.argv[2];
    ctl_locks locks;
    int status = find_named(c, c->opt.argv[1], &locks);
    int at = status == CTL_OK ? queued_at(&locks.v[0], entry) : -1;
    if (status == CTL_OK && at < 0) {
        fputs("rlockctl: ", stderr);
        ctl_put_text(stderr, entry, strlen(entry));
        fputs(" is not in the queue of ", stderr);
        put_name(stderr, locks.v[0].name);
        fputs(locks.v[0].kind == KIND_FAIR ? " (rlockctl show lists it)\n"
                                           : " (not a fair lock: no queue)\n", stderr);
        status = CTL_NOTHING;
    }
    if (status == CTL_OK)
        status = confirm_dequeue(c, &locks.v[0], at);
    if (status == CTL_OK)
        status = dequeue(c, &locks.v[0], at);
    ctl_locks_free(&locks);
    return status;
}

/* ---- clients ------------------------------------------------------------------------ */

int ctl_cmd_clients(ctl *c) {
    ctl_clients clients;
    int status = ctl_find_clients(c, &clients);
    if (status != RLOCK_OK) {
        ctl_clients_free(&clients);
        return ctl_redis_error("clients", status);
    }
    int found = clients.n > 0 || clients.nconns > 0;
    if (c->opt.json)
        ctl_render_clients_json(c, &clients);
    else if (found || clients.nothers > 0)
        ctl_render_clients(c, &clients);
    if (!found && !c->opt.json) /* others (Java, tools) are shown, but are no rlock client */
        fputs("rlockctl: no rlock client registered, no connection named rlock:*\n", stderr);
    ctl_clients_free(&clients);
    return found ? CTL_OK : CTL_NOTHING;
}
