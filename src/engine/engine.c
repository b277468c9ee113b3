/*
 * engine.c - the engine's lifetime: the holds table, then the subscriber
 * and watchdog threads; stopped in the order close needs (waiters first,
 * so blocked lock calls return; the watchdog after commands in flight were
 * aborted) and freed once no thread or call is left.
 *
 * Threads: client open and close only.
 */
#include "channels.h"

int rlock__engine_start(rlock__engine *e, const rlock__renewer *renewer) {
    int status = rlock__holds_init(&e->holds);
    if (status == RLOCK_OK)
        status = rlock__waiters_start(e);
    if (status == RLOCK_OK)
        status = rlock__watchdog_start(e, renewer);
    return status;
}

void rlock__engine_destroy(rlock__engine *e) {
    rlock__waiters_destroy(e);
    rlock__holds_destroy(&e->holds);
}
