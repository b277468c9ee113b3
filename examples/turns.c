/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * turns.c - the C half of a C and Java program taking turns on one lock.
 *
 *   turns [URL [ROUNDS]]   holds "example:turns" (plain) ROUNDS times, then
 *                          "example:turns-fair" (fair) ROUNDS times (default 3),
 *                          200 ms each; after each hold but the last it waits
 *                          until somebody else holds the lock before asking again
 *
 * Its Java half is examples/java/ (Redisson's getLock and getFairLock on the
 * same names); docs/redisson.md, "A C and a Java program" shows how to run the
 * two. Run alone, it stops after its first hold with "nobody took a turn".
 */
#define _POSIX_C_SOURCE 200809L
#include <rlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define HOLD_MS 200
#define TURN_WAIT_MS 30000 /* how long each side waits for the other */

static long long now_ms(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "c: %s: %s: %s\n", what, rlock_status_name(rc), rlock_last_error());
    return rc < 0 ? rc : RLOCK_EIO;
}

/* After our unlock, the other program's waiter takes the lock: wait for that,
 * so that the next try_lock queues behind it instead of taking the lock back. */
static int wait_for_other(rlock *lock, const char *name) {
    long long end = now_ms() + TURN_WAIT_MS;
    int rc;

    while ((rc = rlock_is_locked(lock)) == 0) {
        if (now_ms() >= end) {
            fprintf(stderr, "c: nobody took a turn on %s in %d ms (is the Java half running?)\n",
                    name, TURN_WAIT_MS);
            return RLOCK_BUSY;
        }
        sleep_ms(10);
    }
    return rc < 0 ? fail("is_locked", rc) : RLOCK_OK;
}

static int take_turns(rlock *lock, const char *name, int rounds) {
    for (int i = 1; i <= rounds; i++) {
        long long start = now_ms();
        int rc = rlock_try_lock(lock, TURN_WAIT_MS, RLOCK_LEASE_WATCHDOG);

        if (rc != RLOCK_OK)
            return fail(name, rc);
        printf("c: holds %s (turn %d of %d, waited %lld ms)\n", name, i, rounds,
               now_ms() - start);
        fflush(stdout);
        sleep_ms(HOLD_MS);
        if ((rc = rlock_unlock(lock)) != RLOCK_OK)
            return fail(name, rc);
        if (i < rounds && (rc = wait_for_other(lock, name)) != RLOCK_OK)
            return rc;
    }
    return RLOCK_OK;
}

int main(int argc, char **argv) {
    rlock_config cfg;
    rlock_client *client;
    rlock *plain, *fair;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    int rc;

    rlock_config_init(&cfg);
    cfg.url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    if ((rc = rlock_client_open(&cfg, &client)) != RLOCK_OK) {
        fail("open", rc);
        return 1;
    }
    if ((rc = rlock_get(client, "example:turns", &plain)) != RLOCK_OK) {
        rc = fail("get", rc);
    } else {
        rc = take_turns(plain, "example:turns", rounds);
        rlock_free(plain);
    }
    if (rc == RLOCK_OK) {
        if ((rc = rlock_get_fair(client, "example:turns-fair", &fair)) != RLOCK_OK) {
            rc = fail("get_fair", rc);
        } else {
            rc = take_turns(fair, "example:turns-fair", rounds);
            rlock_free(fair);
        }
    }
    rlock_client_close(client);
    return rc == RLOCK_OK ? 0 : 1;
}
