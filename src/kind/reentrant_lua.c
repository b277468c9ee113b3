/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reentrant_lua.c - the reentrant lock's Lua scripts, the only writers of a
 * lock's hash (net/script.c sends them: EVALSHA, EVAL on NOSCRIPT).
 *
 * Every script names one key, the lock: the channel it publishes on is an
 * argument, not a key, so an ACL user needs key access to its lock names only
 * (and channel access to the channel), and the script stays in one Cluster
 * slot whatever the name: no CROSSSLOT for names like "a{b" (whose channel
 * hashes elsewhere), no TRYAGAIN while the slot migrates (a channel never
 * exists as a key, so a two-key script sees "some keys missing"). The
 * publish command is an argument too: PUBLISH, or SPUBLISH for sharded
 * pub/sub when the channel is in the lock's slot (Lua refuses SPUBLISH to a
 * channel of a slot the node does not serve).
 *
 * Data layout (Redisson's, so Java Redisson clients can share our locks):
 *   key   <name>            HASH  "<client uuid>:<thread id>" -> hold count; PEXPIRE = lease
 *   chan  redisson_lock__channel:{<name>}   "0" published when a lock is freed
 *   token redisson_lock_token:{<name>}      a fenced lock's counter (RedissonFencedLock):
 *                                           INCRed by every acquisition, no TTL
 *
 * The fenced lock shares ACQUIRE and TRANSFER: given the counter as KEYS[2]
 * they INCR it with every acquisition they answer -- ACQUIRE also when it
 * finds its acquisition already done (see ACQUIRE) -- and answer the counter
 * too, as a string (a Lua number would round tokens above 2^53).
 *
 * Idempotence: a reply can be lost after the script ran (timeout, dropped
 * connection), and rlock then re-sends it. So each mutating script carries
 * the hold count the caller believes it has ("expected") and applies only if
 * Redis shows exactly that count. Redis showing the count one step further
 * means an earlier send of the same call already applied: report, change
 * nothing (but a fenced lock's counter, see ACQUIRE). Any other count means the caller's belief is stale: report the
 * truth, change nothing, and the caller re-bases and sends again. Since only
 * the owning thread writes its field, the hold count is never inflated nor
 * decremented twice by a re-send.
 *
 * Threads: any; constant data.
 */
#include "kind.h"
#include "lua_prelude.h"

/*
 * ACQUIRE  KEYS[1] = name, fenced lock: KEYS[2] = its token counter
 *          ARGV[1] = lease ms, ARGV[2] = owner field, ARGV[3] = expected count,
 *          ARGV[4] = channel, ARGV[5] = publish verb (RELEASE's: see later_refused)
 * -> {1, count}  the caller holds it: acquired or re-entered (Redis had the
 *                expected count), or an earlier send of this same call already
 *                applied (Redis has expected + 1); the TTL is set to the lease.
 *                Fenced: {1, count, token}, the counter INCRed by this
 *                send, whichever of the two it found: "expected + 1" is
 *                also what an owner meets that acquires again while Redis
 *                still keeps its previous hold, ended by the client's clock
 *                (send time + lease) but not yet by Redis's TTL (which runs
 *                from when the script ran) -- and that hold's token was
 *                already returned. A re-send after a lost reply skips the
 *                number the lost reply carried, which nobody saw. INCR is
 *                the first write, so a counter that is not an integer fails
 *                with nothing changed.
 *    {0, pttl}   another owner holds it.
 *    {2, count}  the caller's expected count is stale (its hold was lost, or
 *                an earlier call's outcome is unknown): nothing changed; the
 *                caller decides (a loss, or a re-base and a new send).
 *    NOPERM      the ACL refuses a write of this script or a command its
 *                RELEASE or RENEW will run (checked before any write, so a
 *                user who could not unlock never holds).
 *    NOTALOCK    the key is a hash that is not a lock: also a read-write
 *                lock's hash that has the caller's field (its reader
 *                field is the same string), checked only when the field
 *                is there (NOT_RW_LUA), off the fresh acquire's path.
 */
static const char acquire_lua[] =
    PRELUDE_LUA
    "local count = redis.call('hget', KEYS[1], ARGV[2])\n"
    "if count == false then\n"
    "  if redis.call('exists', KEYS[1]) == 1 then\n"
    "    if not_a_lock(KEYS[1]) then return not_a_lock_error(KEYS[1]) end\n"
    "    return {0, redis.call('pttl', KEYS[1])}\n"
    "  end\n"
    "  count = 0\n"
    "else\n"
    NOT_RW_LUA
    "  count = tonumber(count)\n"
    "end\n"
    "local expected = tonumber(ARGV[3])\n"
    "if count ~= expected and count ~= expected + 1 then\n"
    "  return {2, count}\n"
    "end\n"
    "local no = refused('pexpire', KEYS[1], ARGV[1])\n"
    "  or (KEYS[2] and count == expected and refused('hincrby', KEYS[1], ARGV[2], '1'))\n"
    "  or (count == 0 and (later_refused(ARGV[5], ARGV[4], '0') or later_refused('del', KEYS[1])\n"
    "    or later_refused('hset', KEYS[1], ARGV[2], '1')\n"
    "    or later_refused('hexists', KEYS[1], ARGV[2])))\n"
    "if no then return no end\n"
    "if KEYS[2] then redis.call('incr', KEYS[2]) end\n"
    "if count == expected then\n"
    "  count = redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
    "end\n"
    "redis.call('pexpire', KEYS[1], ARGV[1])\n"
    "if KEYS[2] then return {1, count, redis.call('get', KEYS[2])} end\n"
    "return {1, count}\n";

/*
 * RELEASE  KEYS[1] = name
 *          ARGV[1] = owner field, ARGV[2] = expected count, ARGV[3] = channel,
 *          ARGV[4] = 'publish' or 'spublish' (sharded pub/sub)
 * -> nil      the caller holds nothing: nothing changed, nothing published.
 *    n >= 0   the remaining count (0 = "0" published and deleted), or, when
 *             Redis has expected - 1, an earlier send of this same call
 *             already applied and n is reported unchanged.
 *    {count}  Redis has fewer holds than the caller believes (stale): nothing
 *             changed; the caller re-bases on count and sends again.
 *    NOTALOCK the key is a hash that is not a lock; NOPERM before any change.
 *    More holds than expected can only come from an acquisition of ours
 *    whose reply was lost (the call returned an error): the caller's view
 *    wins, the count becomes expected - 1, so an error never leaves an extra
 *    hold behind. The TTL is left alone on a partial release (the lease runs
 *    from the last acquisition).
 */
static const char release_lua[] =
    PRELUDE_LUA
    RELEASE_HEAD_LUA(NOT_RW_LUA)
    "local no = refused(ARGV[4], ARGV[3], '0') or refused('del', KEYS[1])\n"
    "if no then return no end\n"
    "redis.call(ARGV[4], ARGV[3], '0')\n"
    "redis.call('del', KEYS[1])\n"
    "return 0\n";

/*
 * TRANSFER KEYS[1] = name, fenced lock: KEYS[2] = its token counter
 *          ARGV[1] = releasing owner field, ARGV[2] = receiving owner field,
 *          ARGV[3] = the receiver's lease ms
 * The in-process hand-off: the releasing owner's last hold becomes the
 * receiver's first, in one step, with nothing published (the receiver is a
 * thread of the same client, told directly).
 * -> 1  moved (the TTL is set to the receiver's lease), or an earlier send of
 *       this same call already moved it (the receiver has exactly 1 hold and
 *       the releaser none: the receiver cannot have acted on it yet, it is
 *       still waiting for this reply).
 *    0  the releasing owner holds nothing: nothing changed.
 *    Fenced: {1, token} instead of 1 -- the receiver's acquisition INCRs the
 *    counter (first write), a re-send answers it as it is.
 *    As for RELEASE, more holds than the caller believes (a lost acquisition
 *    of its own) are given up with the rest.
 *    NOTALOCK: the hash is a read-write lock's (a "mode" field), untouched.
 * The receiver's field is written before the releaser's goes, so the key
 * never stops existing: on a Cluster node whose slot is migrating, a script
 * that touches a key it just deleted is refused ("non local key").
 */
static const char transfer_lua[] =
    PRELUDE_LUA
    "local function moved()\n"
    "  if KEYS[2] then return {1, redis.call('get', KEYS[2])} end\n"
    "  return 1\n"
    "end\n"
    NOT_RW_LUA
    "if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then\n"
    "  if redis.call('hget', KEYS[1], ARGV[2]) == '1' then\n"
    "    return moved()\n"
    "  end\n"
    "  return 0\n"
    "end\n"
    "local no = refused('hset', KEYS[1], ARGV[2], '1') or refused('pexpire', KEYS[1], ARGV[3])\n"
    "if no then return no end\n"
    "if KEYS[2] then redis.call('incr', KEYS[2]) end\n"
    "redis.call('hset', KEYS[1], ARGV[2], 1)\n"
    "redis.call('hdel', KEYS[1], ARGV[1])\n"
    "redis.call('pexpire', KEYS[1], ARGV[3])\n"
    "return moved()\n";

/*
 * RENEW    KEYS = names, ARGV[1] = lease ms, ARGV[1 + i] = owner field of KEYS[i]
 * -> one 1/0 per key: 1 = our field is there and the TTL was reset; 0 = gone
 *    (never re-created). A key of another type counts as gone without failing
 *    the whole batch, and so does a read-write lock's hash (a "mode" field:
 *    the field is a reader's, not our hold). One write per key: nothing to
 *    check first. held(name, field): 1 for our hold (HEXISTS of the field, then of
 *    "mode": commands the least-privilege ACL of docs/failure-modes.md has).
 */
#define RENEW_HELD_LUA                                                                            \
    "local function held(name, field)\n"                                                          \
    "  local got = redis.pcall('hexists', name, field)\n"                                         \
    "  if type(got) == 'table' or got == 0 then return got end\n"                                 \
    "  return 1 - redis.call('hexists', name, 'mode')\n"                                          \
    "end\n"

static const char renew_lua[] =
    RENEW_HELD_LUA
    "local result = {}\n"
    "for i = 1, #KEYS do\n"
    "  if held(KEYS[i], ARGV[i + 1]) == 1 then\n"
    "    redis.call('pexpire', KEYS[i], ARGV[1])\n"
    "    result[i] = 1\n"
    "  else\n"
    "    result[i] = 0\n"
    "  end\n"
    "end\n"
    "return result\n";

/*
 * RENEW_NODE  KEYS[1] = a name, ARGV[1] = lease ms, ARGV[2] = its owner field,
 *             ARGV[2i - 1], ARGV[2i] = name and owner field of lock i >= 2
 * -> one 1/0/-1 per lock: 1 and 0 as RENEW; -1 the key is not served here
 *    (its slot moved, or is migrating and the key left): renewed alone after.
 * For a Cluster: the locks of many slots of one node in one script (RENEW
 * takes one slot's). Only KEYS[1] is declared, so the command passes the
 * one-slot check and is routed by it; a script without a shebang may touch
 * keys of other slots if this node serves them (Redis 6 and 7 alike), and a
 * key it does not serve is an error that pcall turns into -1.
 */
static const char renew_node_lua[] =
    RENEW_HELD_LUA
    "local result = {}\n"
    "local function renew(i, name, field)\n"
    "  local answer = held(name, field)\n"
    "  if answer == 1 then\n"
    "    redis.call('pexpire', name, ARGV[1])\n"
    "    result[i] = 1\n"
    "  elseif type(answer) == 'table' and not string.find(answer['err'], 'WRONGTYPE', 1, true) then\n"
    "    result[i] = -1\n"
    "  else\n"
    "    result[i] = 0\n"
    "  end\n"
    "end\n"
    RENEW_NODE_LOOP_LUA;

/*
 * FORCE_UNLOCK  KEYS[1] = name, ARGV[1] = channel, ARGV[2] = 'publish' or 'spublish'
 * -> 1 deleted (and "0" published), 0 not locked; WRONGTYPE for a key that is
 *    not a hash, NOTALOCK for a hash that is not a lock; both left untouched.
 */
static const char force_unlock_lua[] =
    PRELUDE_LUA
    FORCE_HEAD_LUA
    "local no = refused(ARGV[2], ARGV[1], '0') or refused('del', KEYS[1])\n"
    "if no then return no end\n"
    "redis.call(ARGV[2], ARGV[1], '0')\n"
    "redis.call('del', KEYS[1])\n"
    "return 1\n";

_Static_assert(RLOCK__SCRIPT_COUNT <= RLOCK__MAX_SCRIPTS, "the net keeps RLOCK__MAX_SCRIPTS SHA1s");

const rlock__script rlock__scripts[RLOCK__SCRIPT_COUNT] = {
    [RLOCK__SCRIPT_ACQUIRE] = {"ACQUIRE", acquire_lua},
    [RLOCK__SCRIPT_RELEASE] = {"RELEASE", release_lua},
    [RLOCK__SCRIPT_TRANSFER] = {"TRANSFER", transfer_lua},
    [RLOCK__SCRIPT_RENEW] = {"RENEW", renew_lua},
    [RLOCK__SCRIPT_RENEW_NODE] = {"RENEW_NODE", renew_node_lua},
    [RLOCK__SCRIPT_FORCE_UNLOCK] = {"FORCE_UNLOCK", force_unlock_lua},
    [RLOCK__SCRIPT_FAIR_ACQUIRE] = {"FAIR_ACQUIRE", rlock__fair_acquire_lua},
    [RLOCK__SCRIPT_FAIR_RELEASE] = {"FAIR_RELEASE", rlock__fair_release_lua},
    [RLOCK__SCRIPT_FAIR_LEAVE] = {"FAIR_LEAVE", rlock__fair_leave_lua},
    [RLOCK__SCRIPT_FAIR_FORCE_UNLOCK] = {"FAIR_FORCE_UNLOCK", rlock__fair_force_unlock_lua},
    [RLOCK__SCRIPT_FENCED_SET] = {"FENCED_SET", rlock__fenced_set_lua},
    [RLOCK__SCRIPT_RW_READ_ACQUIRE] = {"RW_READ_ACQUIRE", rlock__rw_read_acquire_lua},
    [RLOCK__SCRIPT_RW_WRITE_ACQUIRE] = {"RW_WRITE_ACQUIRE", rlock__rw_write_acquire_lua},
    [RLOCK__SCRIPT_RW_READ_RELEASE] = {"RW_READ_RELEASE", rlock__rw_read_release_lua},
    [RLOCK__SCRIPT_RW_WRITE_RELEASE] = {"RW_WRITE_RELEASE", rlock__rw_write_release_lua},
    [RLOCK__SCRIPT_RW_FORCE_UNLOCK] = {"RW_FORCE_UNLOCK", rlock__rw_force_unlock_lua},
    [RLOCK__SCRIPT_RW_LOCKED] = {"RW_LOCKED", rlock__rw_locked_lua},
    [RLOCK__SCRIPT_RW_RENEW] = {"RW_RENEW", rlock__rw_renew_lua},
    [RLOCK__SCRIPT_RW_RENEW_NODE] = {"RW_RENEW_NODE", rlock__rw_renew_node_lua},
    [RLOCK__SCRIPT_RW_WRITE_LEAVE] = {"RW_WRITE_LEAVE", rlock__rw_write_leave_lua},
    [RLOCK__SCRIPT_RW_READ_HOLDS] = {"RW_READ_HOLDS", rlock__rw_read_holds_lua},
};

const char *rlock__script_body(int script) {
    return script >= 0 && script < RLOCK__SCRIPT_COUNT ? rlock__scripts[script].body : NULL;
}
