/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * group.h - the group layer: calls on several locks at once for one owner,
 * a multi-lock (all or nothing) and a Redlock (a majority of independent
 * masters). Not lock kinds: each member is a lock of the reentrant kind, and
 * what the layer adds is how the members' attempts go out together and what
 * their answers add up to. It calls the kind layer as any caller does (the
 * steps of one attempt, rlock__try_*, and rlock__release); the API layer calls
 * it for rlock_multi_* and rlock_redlock_*.
 *
 * Threads: application threads, inside the API layer's call guards.
 */
#ifndef RLOCK_GROUP_H
#define RLOCK_GROUP_H

#include "../kind/kind.h"

/* ---- group.c: one attempt on several locks at once --------------------------------- */

/* One lock of a fan-out (a multi-lock's member, a Redlock's master): one call's state. */
typedef struct rlock__fanned {
    rlock *lock;                /* set by the caller: a handle of the reentrant kind */
    rlock__try t;
    rlock__attempt answer;
    int status;                 /* RLOCK_OK: held (answer.value its count); RLOCK_BUSY;
                                   RLOCK_EIO: unknown whether it took a hold; or an
                                   error (nothing taken) */
} rlock__fanned;

/* The smallest command_timeout_ms of the locks' clients (n >= 1): a fan-out's reply bound. */
long long rlock__fan_timeout(rlock *const *locks, size_t n);
/*
 * Whether a member's status is a refusal: Redis (or the replicas) said no
 * with an error of its own -- not held, busy, lost, unknown (RLOCK_EIO),
 * closed, or out of memory.
 */
int rlock__is_refusal(int status);
/*
 * One attempt on each m[i].lock for owner (lease_ms, or RLOCK_LEASE_WATCHDOG),
 * every ACQUIRE written before any reply is read; replies bounded by
 * deadline_ms, and awaited only until `need` members answered "held" (0:
 * all awaited): a member whose reply had not arrived then is RLOCK_EIO
 * (unknown whether it took a hold), as one whose reply was lost. Fills each
 * m[i] (nothing is booked yet); *first_refusal (if not NULL) receives the
 * error detail of the first member in m[] order that was refused (status
 * RLOCK_OK if none was). Then exactly one of rlock__fan_keep or
 * rlock__fan_undo. Returns RLOCK_OK or RLOCK_ENOMEM (nothing sent; every
 * m[i].status says so).
 */
int rlock__fan_acquire(rlock__fanned *m, size_t n, const rlock__owner *owner, long long lease_ms,
                       size_t need, int64_t deadline_ms, rlock__error_detail *first_refusal);
/*
 * Books the holds taken (and, unsure, those whose reply was lost); ends each
 * try. Each hold booked (taken, or unsure) is an acquisition in its
 * client's statistics, after a wait that began at wait_start_us (0: at
 * once).
 */
void rlock__fan_keep(rlock__fanned *m, size_t n, const rlock__owner *owner, long long lease_ms,
                     int64_t wait_start_us);
/*
 * Gives back what the attempt took -- the holds taken and those whose reply
 * was lost -- with one RELEASE each, at once; nothing is booked. Best effort
 * (a hold not given back ends with its lease); ends each try.
 */
void rlock__fan_undo(rlock__fanned *m, size_t n, const rlock__owner *owner, int64_t deadline_ms);
/*
 * Sets the TTL of each of locks[] (held by owner) to lease_ms at once, and
 * books it: no longer renewed by the watchdog. RLOCK_OK, RLOCK_ELOST (a hold
 * was gone), or the first error.
 */
int rlock__fan_relet(rlock *const *locks, size_t n, const rlock__owner *owner,
                     long long lease_ms, int64_t deadline_ms);

/* ---- multi.c: a multi-lock ---------------------------------------------------------- */

/*
 * Sorts locks[] into the order every process computes alike (name bytes,
 * then where the name is served, then client id). RLOCK_EINVAL when one
 * Redis key is given twice (the same client, or two clients on one server).
 */
int rlock__multi_order(rlock **locks, size_t n);
/*
 * Acquires every lock of locks[] (in rlock__multi_order's order) for owner,
 * all or nothing, waiting up to wait_ms in all (-1: no limit, 0: no waiting),
 * each with lease_ms (or RLOCK_LEASE_WATCHDOG). RLOCK_OK; RLOCK_BUSY (a
 * member stayed another owner's for the whole wait); RLOCK_ELOST (a member's
 * earlier hold was lost: told now); or a member's error. On any return but
 * RLOCK_OK the owner holds nothing it did not hold before.
 */
int rlock__multi_acquire(rlock *const *locks, size_t n, const rlock__owner *owner,
                         long long wait_ms, long long lease_ms, const rlock__call *call);
/* Releases one hold of owner on each lock, last first: the first failure, after all. */
int rlock__multi_release(rlock *const *locks, size_t n, const rlock__owner *owner);

/* ---- redlock.c: the Redlock algorithm ------------------------------------------------- */

/* The clock-drift allowance subtracted from a Redlock's validity: lease / 100 + 2 ms. */
long long rlock__redlock_drift(long long lease_ms);
/*
 * RLOCK_OK if masters[] reach n different servers (rlock__net_server: the
 * database does not count, the address is the one connected to);
 * RLOCK_EINVAL naming the server given twice; RLOCK_ENOMEM.
 */
int rlock__redlock_check(rlock *const *masters, size_t n);
/*
 * Acquires lock name -- masters[i], one handle per independent master, all
 * of the reentrant kind -- for owner on a majority of masters, with a fixed
 * lease, trying again after random pauses while wait_ms lasts (-1: no limit).
 * RLOCK_OK with *validity_ms (> 0); RLOCK_BUSY (no quorum for the whole
 * wait); RLOCK_EIO (no majority reachable); a refusal's status (more masters
 * refused than a quorum allows); RLOCK_ECLOSED; RLOCK_ENOMEM. Nothing is
 * left held on a return other than RLOCK_OK (best effort: a master that
 * cannot be told keeps the hold for its lease).
 */
int rlock__redlock_acquire(rlock *const *masters, size_t n, const rlock__owner *owner,
                           long long wait_ms, long long lease_ms, const rlock__call *call,
                           long long *validity_ms);
/*
 * Releases one hold of owner on every master that holds it, at once.
 * RLOCK_OK; RLOCK_ENOTOWNER (held on fewer than a quorum at unlock: what was
 * left is released); RLOCK_EIO or a refusal's status (so many masters
 * unknown or refusing that another owner could not take it yet: unlocking
 * again completes it); RLOCK_ENOMEM.
 */
int rlock__redlock_release(rlock *const *masters, size_t n, const rlock__owner *owner);

#endif /* RLOCK_GROUP_H */
