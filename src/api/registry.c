/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * registry.c - the list of open clients, so that a thread's exit can drop
 * its holds from each of them, and so that fork() leaves a defined state.
 *
 * Thread exit: core/thread.c calls the hook set here with the exiting
 * thread's id; its holds stop being renewed and expire (docs/design.md §5).
 *
 * Fork: a pthread_atfork child handler bumps a generation counter and
 * forgets every client; clients remember the generation they were opened
 * in, and calls on an inherited one return RLOCK_ECLOSED (client.c).
 *
 * Threads: any application thread (open, close); exiting threads; the
 * forking thread (atfork handlers). Locking: registry_mutex guards the list;
 * it may be held while taking a client's holds mutex, never the reverse.
 */
#include "api.h"

static pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static rlock_client *registry; /* guarded by registry_mutex */
static atomic_uint fork_generation;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

void rlock__registry_add(rlock_client *c) {
    pthread_mutex_lock(&registry_mutex);
    c->registry_next = registry;
    registry = c;
    pthread_mutex_unlock(&registry_mutex);
}

void rlock__registry_remove(rlock_client *c) {
    pthread_mutex_lock(&registry_mutex);
    for (rlock_client **p = &registry; *p != NULL; p = &(*p)->registry_next) {
        if (*p == c) {
            *p = c->registry_next;
            break;
        }
    }
    pthread_mutex_unlock(&registry_mutex);
}

static void thread_exited(uint64_t thread_id) {
    pthread_mutex_lock(&registry_mutex);
    for (rlock_client *c = registry; c != NULL; c = c->registry_next)
        rlock__holds_owner_gone(&c->engine.holds, thread_id);
    pthread_mutex_unlock(&registry_mutex);
}

static void fork_prepare(void) {
    pthread_mutex_lock(&registry_mutex);
}

static void fork_parent(void) {
    pthread_mutex_unlock(&registry_mutex);
}

/* The child inherits clients whose threads it does not have: forget them all. */
static void fork_child(void) {
    atomic_fetch_add(&fork_generation, 1);
    registry = NULL;
    pthread_mutex_unlock(&registry_mutex);
}

unsigned rlock__fork_generation(void) {
    return atomic_load_explicit(&fork_generation, memory_order_relaxed);
}

static void init(void) {
    rlock__thread_set_exit_hook(thread_exited);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void rlock__registry_init(void) {
    pthread_once(&init_once, init);
}
