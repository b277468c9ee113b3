/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fair_lua.c - the fair lock's Lua scripts (Redisson's RedissonFairLock
 * layout; our own scripts, written from its semantics: see
 * docs/design.md section 9 and docs/redisson.md).
 *
 * Data layout, shared with Java RedissonFairLock clients:
 *   key   <name>                          HASH  "<uuid>:<thread>" -> hold count; PEXPIRE = lease
 *   key   redisson_lock_queue:{<name>}    LIST  waiting owner fields, oldest first
 *   key   redisson_lock_timeout:{<name>}  ZSET  owner field -> wall-clock ms after which a
 *                                               waiter still at the head counts as dead
 *   chan  redisson_lock__channel:{<name>}:<uuid>:<thread>  "0" published to the head only
 * ('{<name>}' is '<name>' for a name with '{', Redisson's prefixName rule.)
 *
 * Every script names all three keys (KEYS[1] = name, KEYS[2] = queue,
 * KEYS[3] = timeouts), so in a Cluster they must share a slot; the handle
 * refuses names whose keys would not (api/handle.c). The channel prefix and
 * the publish command are arguments, as in reentrant_lua.c. "now" is the
 * caller's wall clock in ms, as Redisson passes System.currentTimeMillis():
 * deadlines written by Java and C clients compare only if their clocks agree.
 *
 * Idempotence and "an error means Redis is unchanged" are the reentrant
 * scripts' rules (reentrant_lua.c): a mutating script carries the hold count
 * its caller believes it has, and checks the lock and the ACL before its
 * first write. Purging dead heads (what every Redisson script does first)
 * is read first and written after those checks.
 *
 * Threads: any; constant data.
 */
#include "kind.h"
#include "lua_prelude.h"

/*
 * The queue's dead heads: waiters at the head whose deadline has passed,
 * as Redisson purges them (a head without a deadline stops the purge, as in
 * Redisson). stale_heads only reads: it returns how many there are and the
 * first live waiter (false: none); drop_heads pops them.
 */
#define FAIR_PRELUDE_LUA                                                                          \
    PRELUDE_LUA                                                                                   \
    "local function stale_heads(now)\n"                                                           \
    "  local queue = redis.call('lrange', KEYS[2], 0, -1)\n"                                      \
    "  local seen = {}\n"                                                                         \
    "  for i, id in ipairs(queue) do\n"                                                           \
    "    local deadline = redis.call('zscore', KEYS[3], id)\n"                                    \
    "    if seen[id] or deadline == false or tonumber(deadline) > now then\n"                     \
    "      return i - 1, id\n"                                                                    \
    "    end\n"                                                                                   \
    "    seen[id] = true\n"                                                                       \
    "  end\n"                                                                                     \
    "  return #queue, false\n"                                                                    \
    "end\n"                                                                                       \
    "local function drop_heads(n)\n"                                                              \
    "  for i = 1, n do\n"                                                                         \
    "    redis.call('zrem', KEYS[3], redis.call('lpop', KEYS[2]))\n"                              \
    "  end\n"                                                                                     \
    "end\n"

/*
 * FAIR_ACQUIRE  KEYS = name, queue, timeouts
 *   ARGV[1] = lease ms, ARGV[2] = owner field, ARGV[3] = expected count,
 *   ARGV[4] = the waiter's wait ms (Redisson's threadWaitTime), ARGV[5] = now
 *   (wall-clock ms), ARGV[6] = '1' to join the queue when busy, '0' not to
 *   (Redisson's no-wait tryLock() never queues), ARGV[7] = the channel
 *   prefix, ARGV[8] = the publish verb (FAIR_RELEASE's: later_refused asks
 *   them, with the caller's own channel, before anything is written)
 * -> {1, count}  held: acquired (the lock was free and the queue empty or
 *                headed by the caller; the caller leaves the queue and, as in
 *                Redisson, every deadline left moves ARGV[4] earlier),
 *                re-entered, or an earlier send of this call already applied.
 *    {0, ms}     busy: the caller is queued (once: a re-send or a later
 *                attempt keeps its place and deadline) unless ARGV[6] is '0';
 *                ms is how long to sleep at most before trying again: the
 *                lock's PTTL, but no longer than until the deadline of
 *                another waiter heading the queue (a dead head gets the
 *                unlock message, nobody else: the caller must come back when
 *                the head can be dropped). When the lock is free and another
 *                waiter heads the queue, at most 1 s: a live head takes the
 *                lock within a round trip, and a hold that later expires
 *                unannounced (its holder died) publishes nothing, so the
 *                caller must come back to learn its PTTL. Unlock messages
 *                (to the head only) cut the sleep short.
 *    {2, count}  the caller's expected count is stale: nothing changed.
 *    NOTALOCK, NOPERM, WRONGTYPE: nothing changed.
 * A new waiter's deadline is Redisson's: (the previous waiter's deadline, or
 * now + the lock's PTTL) + ARGV[4].
 */
const char rlock__fair_acquire_lua[] =
    FAIR_PRELUDE_LUA
    "local me, now, expected = ARGV[2], tonumber(ARGV[5]), tonumber(ARGV[3])\n"
    "local count = redis.call('hget', KEYS[1], me)\n"
    "local exists = redis.call('exists', KEYS[1]) == 1\n"
    "if count == false and exists and not_a_lock(KEYS[1]) then\n"
    "  return not_a_lock_error(KEYS[1])\n"
    "end\n"
    "if count ~= false then\n"
    NOT_RW_LUA
    "end\n"
    "local stale, head = stale_heads(now)\n"
    "local no = refused('hincrby', KEYS[1], me, '1') or refused('pexpire', KEYS[1], ARGV[1])\n"
    "  or refused('rpush', KEYS[2], me) or refused('zadd', KEYS[3], '0', me)\n"
    "  or (count == false and (later_refused(ARGV[8], ARGV[7] .. ':' .. me, '0')\n"
    "    or later_refused('del', KEYS[1]) or later_refused('lpop', KEYS[2])\n"
    "    or later_refused('zrem', KEYS[3], me) or later_refused('hset', KEYS[1], me, '1')\n"
    "    or later_refused('hexists', KEYS[1], me)))\n"
    "if no then return no end\n"
    "drop_heads(stale)\n"
    "count = tonumber(count or 0)\n"
    "if count > 0 then\n"
    REENTER_LUA("me")
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"
    "  return {1, count}\n"
    "end\n"
    "if expected > 0 then\n"
    "  return {2, 0}\n"
    "end\n"
    "if not exists and (head == false or head == me) then\n"
    "  if head == me then redis.call('lpop', KEYS[2]) end\n"
    "  redis.call('zrem', KEYS[3], me)\n"
    "  for _, id in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do\n"
    "    redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), id)\n"
    "  end\n"
    "  redis.call('hset', KEYS[1], me, 1)\n"
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"
    "  return {1, 1}\n"
    "end\n"
    "if ARGV[6] == '1' and redis.call('zscore', KEYS[3], me) == false then\n"
    "  local last = redis.call('lindex', KEYS[2], -1)\n"
    "  local last_deadline = last and last ~= me and redis.call('zscore', KEYS[3], last)\n"
    "  local base\n"
    "  if last_deadline then\n"
    "    base = tonumber(last_deadline) - now\n"
    "  else\n"
    "    base = redis.call('pttl', KEYS[1])\n"
    "  end\n"
    "  if redis.call('zadd', KEYS[3], base + tonumber(ARGV[4]) + now, me) == 1 then\n"
    "    redis.call('rpush', KEYS[2], me)\n"
    "  end\n"
    "  if head == false then head = me end\n"
    "end\n"
    "local ttl = redis.call('pttl', KEYS[1])\n"
    "local deadline = head and head ~= me and redis.call('zscore', KEYS[3], head)\n"
    "local to_head = deadline and math.max(1, tonumber(deadline) - now)\n"
    "if ttl > 0 then return {0, to_head and math.min(ttl, to_head) or ttl} end\n"
    "if to_head then return {0, math.min(to_head, 1000)} end\n"
    "return {0, 100}\n";

/*
 * FAIR_RELEASE  KEYS = name, queue, timeouts
 *   ARGV[1] = owner field, ARGV[2] = expected count, ARGV[3] = the lock's
 *   channel (the waiters' channels are "<ARGV[3]>:<owner field>"),
 *   ARGV[4] = 'publish' or 'spublish', ARGV[5] = now (wall-clock ms)
 * -> RELEASE's answers (reentrant_lua.c): nil, the remaining count, or
 *    {count} (stale). The last hold deletes the lock, purges dead heads and
 *    publishes "0" to the channel of the live head only (no head: nothing).
 */
const char rlock__fair_release_lua[] =
    FAIR_PRELUDE_LUA
    RELEASE_HEAD_LUA(NOT_RW_LUA)
    "local stale, head = stale_heads(tonumber(ARGV[5]))\n"
    "local no = refused('del', KEYS[1]) or refused('lpop', KEYS[2]) or refused('zrem', KEYS[3], 'x')\n"
    "if not no and head then no = refused(ARGV[4], ARGV[3] .. ':' .. head, '0') end\n"
    "if no then return no end\n"
    "drop_heads(stale)\n"
    "if head then redis.call(ARGV[4], ARGV[3] .. ':' .. head, '0') end\n"
    "redis.call('del', KEYS[1])\n"
    "return 0\n";

/*
 * FAIR_LEAVE  KEYS = name, queue, timeouts
 *   ARGV[1] = owner field, ARGV[2] = its wait ms (as sent with its
 *   attempts), ARGV[3] = the lock's channel, ARGV[4] = publish verb,
 *   ARGV[5] = now
 * A waiter that gives up (timed out, cancelled, closed) leaves the queue, and
 * the waiters behind it move ARGV[2] earlier (Redisson's acquireFailed). Not
 * in Redisson: if it was the head and the lock is free, the next live head is
 * told ("0" on its channel), else it would sleep until its own poll.
 * -> 1 left, 0 was not queued.
 */
const char rlock__fair_leave_lua[] =
    FAIR_PRELUDE_LUA
    "local queue = redis.call('lrange', KEYS[2], 0, -1)\n"
    "local at = nil\n"
    "for i, id in ipairs(queue) do\n"
    "  if id == ARGV[1] then at = i break end\n"
    "end\n"
    "redis.call('zrem', KEYS[3], ARGV[1])\n"
    "if at == nil then return 0 end\n"
    "for i = at + 1, #queue do\n"
    "  redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), queue[i])\n"
    "end\n"
    "redis.call('lrem', KEYS[2], 0, ARGV[1])\n"
    "if at == 1 and redis.call('exists', KEYS[1]) == 0 then\n"
    "  local stale, head = stale_heads(tonumber(ARGV[5]))\n"
    "  drop_heads(stale)\n"
    "  if head then redis.pcall(ARGV[4], ARGV[3] .. ':' .. head, '0') end\n"
    "end\n"
    "return 1\n";

/*
 * FAIR_FORCE_UNLOCK  KEYS = name, queue, timeouts
 *   ARGV[1] = the lock's channel, ARGV[2] = publish verb, ARGV[3] = now
 * -> 1 deleted (dead heads purged, "0" published to the live head's
 *    channel), 0 not locked; WRONGTYPE / NOTALOCK untouched. The queue
 *    stays: its waiters keep their places.
 */
const char rlock__fair_force_unlock_lua[] =
    FAIR_PRELUDE_LUA
    FORCE_HEAD_LUA
    "local stale, head = stale_heads(tonumber(ARGV[3]))\n"
    "local no = refused('del', KEYS[1]) or refused('lpop', KEYS[2]) or refused('zrem', KEYS[3], 'x')\n"
    "if not no and head then no = refused(ARGV[2], ARGV[1] .. ':' .. head, '0') end\n"
    "if no then return no end\n"
    "drop_heads(stale)\n"
    "if head then redis.call(ARGV[2], ARGV[1] .. ':' .. head, '0') end\n"
    "redis.call('del', KEYS[1])\n"
    "return 1\n";
