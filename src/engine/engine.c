/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * engine.c - the engine's lifetime: the holds table and the registration,
 * then the subscriber and watchdog threads; stopped in the order close needs (waiters first,
 * so blocked lock calls return; the watchdog after commands in flight were
 * aborted) and freed once no thread or call is left.
 *
 * Threads: client open and close only.
 */
#include "channels.h"

/*
 * A new master took over (the net's listener; net->mutex held): the
 * subscriber reconnects and subscribes every channel again there, waking
 * every waiter to retry at once; the watchdog renews there at once (a lock
 * the new master lacks is reported lost then).
 */
static void master_switched(void *arg) {
    rlock__engine *e = arg;
    atomic_store(&e->waiters.resubscribe, 1);
    rlock__wake_subscriber(&e->waiters);
    pthread_mutex_lock(&e->watchdog.worker.mutex);
    e->watchdog.renew_now = 1;
    pthread_cond_signal(&e->watchdog.worker.wake);
    pthread_mutex_unlock(&e->watchdog.worker.mutex);
}

int rlock__engine_start(rlock__engine *e, const void *owner_arg) {
    int status = rlock__holds_init(&e->holds);
    if (status == RLOCK_OK)
        status = rlock__registration_init(&e->registration);
    if (status == RLOCK_OK)
        status = rlock__waiters_start(e);
    if (status == RLOCK_OK)
        status = rlock__watchdog_start(e, owner_arg);
    if (status == RLOCK_OK)
        rlock__net_on_switch(e->net, master_switched, e);
    return status;
}

void rlock__engine_destroy(rlock__engine *e) {
    rlock__waiters_destroy(e);
    rlock__holds_destroy(&e->holds);
    rlock__registration_destroy(&e->registration);
}
