/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rw_lua.c - the read-write lock's Lua scripts (Redisson's
 * RedissonReadWriteLock layout; our own scripts, written from the semantics
 * of RedissonReadLock and RedissonWriteLock: see docs/design.md section 10
 * and docs/redisson.md).
 *
 * Data layout, shared with Java Redisson's getReadWriteLock():
 *   key   <name>   HASH  "mode" -> "read" | "write";
 *                        "<uuid>:<thread>" -> read hold count;
 *                        "<uuid>:<thread>:write" -> write hold count; PEXPIRE
 *   key   {<name>}:<uuid>:<thread>:rwlock_timeout:<k>   STRING "1", PEXPIRE = the
 *                        lease of that reader's k-th hold (k = 1..count)
 *   chan  redisson_rwlock:{<name>}   "0" when a read unlock frees the lock,
 *                        "1" when a write unlock does (Redisson: "1" wakes every
 *                        waiter, "0" one per client)
 * and one key of rlock's own, which Redisson neither reads nor writes:
 *   key   rlock_rwlock_writers:{<name>}  SET  the writer fields of rlock
 *                        threads waiting for the write lock; PEXPIRE refreshed
 *                        by their attempts. While it exists, rlock readers
 *                        that hold nothing yet do not start a read hold (no
 *                        writer starvation by churning readers).
 * ('{<name>}' is '<name>' for a name with '{', Redisson's prefix and suffix
 * rule, so every key hashes to the name's Cluster slot when the name has no
 * braces or a non-empty {tag}: api/handle.c refuses the others on a Cluster.)
 *
 * Each script names the lock (and the writers' set where it uses it); the
 * per-hold keys are derived inside the script, as Redisson derives them. The
 * channel and the publish command are arguments (reentrant_lua.c). The
 * rules of the other kinds hold: a mutating script carries the hold count
 * its caller believes it has (a re-send is a no-op), and checks the lock and
 * the ACL before its first write (an error means Redis is unchanged).
 *
 * Threads: any; constant data.
 */
#include "kind.h"
#include "lua_prelude.h"

/*
 * A read hold's key: Redisson's suffixName(name, field) + ":rwlock_timeout:"
 * + k; and the waiting writers' set of a name (Redisson's prefixName rule).
 * Numbers become strings as integers (int): Lua's own conversion, and Redis
 * 7.0's of a number passed to redis.call, print them as floating point,
 * which is costly on the read path. outlive(name, ms, ms_str) gives the hash
 * a TTL of at least ms (the string ms_str): the TTL rule every acquire and
 * renewal keeps, so that the hash lives as long as its longest hold.
 */
#define RW_KEYS_LUA                                                                               \
    "local function int(n)\n"                                                                     \
    "  if n == 1 then return '1' end\n"                                                           \
    "  return string.format('%d', n)\n"                                                           \
    "end\n"                                                                                       \
    "local function hold_key(name, field, k)\n"                                                   \
    "  if string.find(name, '{', 1, true) then\n"                                                 \
    "    return name .. ':' .. field .. ':rwlock_timeout:' .. int(k)\n"                          \
    "  end\n"                                                                                     \
    "  return '{' .. name .. '}:' .. field .. ':rwlock_timeout:' .. int(k)\n"                    \
    "end\n"                                                                                       \
    "local function writers_key(name)\n"                                                          \
    "  if string.find(name, '{', 1, true) then return 'rlock_rwlock_writers:' .. name end\n"     \
    "  return 'rlock_rwlock_writers:{' .. name .. '}'\n"                                          \
    "end\n"                                                                                       \
    "local function outlive(name, ms, ms_str)\n"                                                  \
    "  if redis.call('pttl', name) < ms then redis.call('pexpire', name, ms_str) end\n"           \
    "end\n"

/*
 * The prelude of the read-write scripts. not_a_lock is the read-write
 * lock's (it shadows the prelude's): a hash with a TTL whose fields are
 * "mode" ("read" or "write"), "<id>:<thread>" or "<id>:<thread>:write". A
 * hash without "mode" whose fields are owner fields is a lock of another
 * kind (getLock, getFairLock): busy for an acquire, not ours for a release.
 * The acquires trust a hash whose mode is "read" or "write" (as the other
 * kinds trust a hash with their own field), so that an acquire does not
 * read every reader's field.
 */
#define RW_PRELUDE_LUA                                                                            \
    PRELUDE_LUA                                                                                   \
    RW_KEYS_LUA                                                                                   \
    "local function not_a_lock(key)\n"                                                            \
    "  if redis.call('pttl', key) == -1 then return true end\n"                                   \
    "  local hash = redis.call('hgetall', key)\n"                                                 \
    "  for i = 1, #hash, 2 do\n"                                                                  \
    "    if hash[i] == 'mode' then\n"                                                             \
    "      if hash[i + 1] ~= 'read' and hash[i + 1] ~= 'write' then return true end\n"           \
    "    elseif not string.find(hash[i], '^.+:%d+$') and\n"                                      \
    "           not string.find(hash[i], '^.+:%d+:write$') then\n"                               \
    "      return true\n"                                                                         \
    "    end\n"                                                                                   \
    "  end\n"                                                                                     \
    "  return false\n"                                                                            \
    "end\n"                                                                                       \
    "local function not_a_set(key)\n"                                                             \
    "  local kind = redis.call('type', key)['ok']\n"                                              \
    "  if kind == 'none' or kind == 'set' then return nil end\n"                                  \
    "  return redis.error_reply('NOTALOCK the key ' .. key .. ' is not a set (rlock keeps the '\n" \
    "    .. 'waiting writers there): left untouched')\n"                                          \
    "end\n"

/*
 * RW_READ_ACQUIRE  KEYS[1] = name, KEYS[2] = the waiting writers' set
 *   ARGV[1] = lease ms, ARGV[2] = the reader field "<uuid>:<thread>",
 *   ARGV[3] = expected count, ARGV[4] and ARGV[5] unused (RW_WRITE_ACQUIRE's),
 *   ARGV[6] = channel, ARGV[7] = publish verb (the release's: later_refused)
 * -> {1, count}  held: a new read hold (the lock was free, in read mode, or
 *                in write mode held by this very thread: a downgrade), a
 *                re-entry (never held back), or an earlier send of this call
 *                already applied. The hold's key ":rwlock_timeout:<count>" is
 *                set to the lease, the hash's TTL to at least the lease.
 *    {0, ms}     busy: another thread writes (ms = the lock's PTTL), a lock
 *                of another kind has the name, or an rlock writer waits
 *                (ms = the writers' set's PTTL + 1: come back when it has
 *                gone; 100 for a set without a TTL); nothing changed.
 *    {2, count}  the caller's expected count is stale: nothing changed.
 *    NOTALOCK, NOPERM (also for what the release or renewal will run):
 *    nothing changed.
 */
const char rlock__rw_read_acquire_lua[] =
    RW_PRELUDE_LUA
    "local me, expected, lease = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[1])\n"
    "local mode = redis.call('hget', KEYS[1], 'mode')\n"
    "local count = mode and tonumber(redis.call('hget', KEYS[1], me)) or 0\n"
    "local writers_wait\n" /* the writers' set exists: nil = not asked yet */
    "if not mode then\n"
    "  local found = redis.call('exists', KEYS[1], KEYS[2])\n"
    "  if found > 0 and redis.call('exists', KEYS[1]) == 1 then\n"
    "    if not_a_lock(KEYS[1]) then return not_a_lock_error(KEYS[1]) end\n"
    "    return {0, redis.call('pttl', KEYS[1])}\n"
    "  end\n"
    "  writers_wait = found > 0\n"
    "elseif mode ~= 'read' and mode ~= 'write' then\n"
    "  return not_a_lock_error(KEYS[1])\n"
    "end\n"
    "local n = count + 1\n"
    "if count > 0 then\n"
    "  if count == expected + 1 then\n"
    "    n = count\n" /* an earlier send of this call applied */
    "  elseif count ~= expected then\n"
    "    return {2, count}\n"
    "  end\n"
    "else\n"
    "  if expected > 0 then return {2, 0} end\n"
    "  if mode == 'write' then\n"
    "    if redis.call('hexists', KEYS[1], me .. ':write') == 0 then\n"
    "      return {0, redis.call('pttl', KEYS[1])}\n"
    "    end\n"
    "  elseif writers_wait or (writers_wait == nil and redis.call('exists', KEYS[2]) == 1) then\n"
    "    local ttl = redis.call('pttl', KEYS[2])\n"
    "    return {0, ttl >= 0 and ttl + 1 or 100}\n"
    "  end\n"
    "end\n"
    "local key, held = hold_key(KEYS[1], me, n), int(n)\n"
    "local no = refused('hset', KEYS[1], 'mode', 'read', me, held)\n"
    "  or refused('set', key, '1', 'px', ARGV[1]) or refused('pexpire', KEYS[1], ARGV[1])\n"
    "  or (count == 0 and (later_refused(ARGV[7], ARGV[6], '0')\n"
    "    or later_refused('del', KEYS[1], key) or later_refused('hdel', KEYS[1], me)\n"
    "    or later_refused('pexpire', key, ARGV[1])))\n"
    "if no then return no end\n"
    "if not mode then\n"
    "  redis.call('hset', KEYS[1], 'mode', 'read', me, held)\n"
    "elseif n ~= count then\n"
    "  redis.call('hset', KEYS[1], me, held)\n"
    "end\n"
    "redis.call('set', key, '1', 'px', ARGV[1])\n"
    "if mode then\n"
    "  outlive(KEYS[1], lease, ARGV[1])\n"
    "else\n"
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"
    "end\n"
    "return {1, n}\n";

/*
 * RW_WRITE_ACQUIRE  KEYS[1] = name, KEYS[2] = the waiting writers' set
 *   ARGV[1] = lease ms, ARGV[2] = the caller's reader field (its writer
 *   field is that + ":write"), ARGV[3] = expected count, ARGV[4] = '1' if
 *   the caller waits (joins the writers' set when busy), ARGV[5] = the
 *   set's TTL ms, ARGV[6] = channel, ARGV[7] = publish verb (the release's:
 *   later_refused)
 * -> {1, count}  held: the lock was free (the caller leaves the set), a
 *                re-entry, or an earlier send of this call already applied;
 *                the TTL is set to at least the lease.
 *    {0, ms}     busy; a waiting caller is in the set, whose TTL is reset,
 *                and ms is at most a third of that TTL, so that its next
 *                attempt keeps it (else ms is the lock's PTTL).
 *    {2, count}  the caller's expected count is stale: nothing changed.
 *    {3, count}  the lock is in read mode and the caller holds count read
 *                holds: it would wait for itself (Redisson forbids the
 *                upgrade and would wait for ever). Nothing changed. A field
 *                whose holds' keys are all gone is no hold (their leases ran
 *                out; other readers keep the hash): busy, as for anyone.
 *    NOTALOCK, NOPERM: nothing changed.
 */
const char rlock__rw_write_acquire_lua[] =
    RW_PRELUDE_LUA
    "local me, expected, lease = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[1])\n"
    "local writer = me .. ':write'\n"
    "local mode = redis.call('hget', KEYS[1], 'mode')\n"
    "local exists = mode or redis.call('exists', KEYS[1]) == 1\n"
    "if exists and mode ~= 'read' and mode ~= 'write' and not_a_lock(KEYS[1]) then\n"
    "  return not_a_lock_error(KEYS[1])\n"
    "end\n"
    "local no = not_a_set(KEYS[2]) or refused('hset', KEYS[1], 'mode', 'write')\n"
    "  or refused('hincrby', KEYS[1], writer, '1') or refused('pexpire', KEYS[1], ARGV[1])\n"
    "  or refused('sadd', KEYS[2], writer) or refused('srem', KEYS[2], writer)\n"
    "  or refused('pexpire', KEYS[2], ARGV[5])\n"
    "  or ((mode ~= 'write' or redis.call('hexists', KEYS[1], writer) == 0)\n"
    "    and (later_refused(ARGV[7], ARGV[6], '1') or later_refused('del', KEYS[1], KEYS[2])\n"
    "    or later_refused('hdel', KEYS[1], writer)))\n"
    "if no then return no end\n"
    "local count = 0\n"
    "if mode == 'write' then count = tonumber(redis.call('hget', KEYS[1], writer) or 0) end\n"
    "if count > 0 then\n"
    REENTER_LUA("writer")
    "  outlive(KEYS[1], lease, ARGV[1])\n"
    "  return {1, count}\n"
    "end\n"
    "if expected > 0 then return {2, 0} end\n"
    "if not exists then\n"
    "  redis.call('hset', KEYS[1], 'mode', 'write')\n"
    "  redis.call('hset', KEYS[1], writer, 1)\n"
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"
    "  redis.call('srem', KEYS[2], writer)\n"
    "  return {1, 1}\n"
    "end\n"
    "local reads = mode == 'read' and tonumber(redis.call('hget', KEYS[1], me)) or 0\n"
    "for k = reads, 1, -1 do\n"
    "  if redis.call('exists', hold_key(KEYS[1], me, k)) == 1 then return {3, reads} end\n"
    "end\n"
    "local ttl = redis.call('pttl', KEYS[1])\n"
    "if ARGV[4] == '1' then\n"
    "  redis.call('sadd', KEYS[2], writer)\n"
    "  redis.call('pexpire', KEYS[2], ARGV[5])\n"
    "  local refresh = math.floor(tonumber(ARGV[5]) / 3)\n"
    "  if ttl < 0 or ttl > refresh then ttl = refresh end\n"
    "end\n"
    "return {0, ttl}\n";

/*
 * RW_READ_RELEASE  KEYS[1] = name
 *   ARGV[1] = reader field, ARGV[2] = expected count, ARGV[3] = channel,
 *   ARGV[4] = 'publish' or 'spublish'
 * -> RELEASE's answers (reentrant_lua.c): nil (not ours: nothing changed),
 *    the remaining count, or {count} (stale). The released holds' keys go.
 *    A field whose hold keys are all gone (their leases ran out while other
 *    readers kept the hash) is no hold: it is taken out of the hash (and
 *    the lock with it, as by a last read hold, when it was the only reader)
 *    and the answer is nil. Found from the DEL of the released keys'
 *    reply, with the keys left read only when that DEL deleted nothing: the
 *    common path reads no more keys than before.
 *    In write mode (the writer's own read holds) the lock and its TTL stay
 *    as they are (Redisson re-arms the TTL there too, which can cut the
 *    write hold's lease short). In read mode the last read hold deletes the
 *    lock and publishes "0" (to one waiter per client: a writer); otherwise
 *    the hash must keep living at least as long as the longest hold key left
 *    (else a live reader's hold would vanish with it), and should not live
 *    much longer (else readers that died hold writers back). Every acquire
 *    and renewal sets the hash's TTL to at least its key's (max(PTTL,
 *    lease), in the same script), so the hash lives as long as its longest
 *    key:
 *    - the TTL stays if another reader's key has two thirds of it left
 *      (the common case: readers with the same lease; a watchdog reader's
 *      key never has less than two thirds of its lease left): the keys of
 *      three fields drawn at random (HRANDFIELD, Redis >= 6.2), which
 *      include another reader whenever there is one, are looked at first;
 *    - a release whose keys all end more than 10 ms before the hash was
 *      not that longest one: the TTL stays, no other key is read;
 *    - else the others' keys are read until one has two thirds of the TTL;
 *    - else the TTL becomes the longest key left, all read (Redisson's rule,
 *      which Redisson applies at every release: O(readers)), and with none
 *      left the lock is deleted and "0" published (its readers died).
 *    So after the last live reader leaves, the lock outlives the longest
 *    key left by at most half that key's time (Redisson: not at all), or,
 *    when the release was not the longest, up to the hash's TTL.
 */
const char rlock__rw_read_release_lua[] =
    RW_PRELUDE_LUA
    /* The read holds of a field whose value is value: `mine` for me (those left after this
     * release), none for "mode" and a writer's field. */
    "local function reads_of(field, value, me, mine)\n"
    "  if string.sub(field, -6) == ':write' then return 0 end\n"
    "  if field == me then return mine end\n"
    "  return tonumber(value) or 0\n"
    "end\n"
    /* The PTTL of the latest read hold key of a field, -2 when it has none. */
    "local function latest_key(name, field, value, me, mine)\n"
    "  local count = reads_of(field, value, me, mine)\n"
    "  if count < 1 then return -2 end\n"
    "  return redis.call('pttl', hold_key(name, field, count))\n"
    "end\n"
    /* Whether one of three fields drawn at random has a key of `enough` or more. Three
     * distinct fields of a read lock's hash hold a reader other than me whenever one is
     * there: only "mode" and my own field are not. Before 6.2 (no HRANDFIELD): no. */
    "local function sampled_enough(name, me, mine, enough)\n"
    "  local sample = redis.pcall('hrandfield', name, '3', 'withvalues')\n"
    "  if type(sample) ~= 'table' or sample.err then return false end\n"
    "  for i = 1, #sample, 2 do\n"
    "    if latest_key(name, sample[i], sample[i + 1], me, mine) >= enough then return true end\n"
    "  end\n"
    "  return false\n"
    "end\n"
    /* The longest PTTL among the read holds' keys, stopping at one of `enough` or more; -2
     * when no key is left. */
    "local function longest_key(name, me, mine, enough)\n"
    "  local longest = -2\n"
    "  local hash = redis.call('hgetall', name)\n"
    "  for i = 1, #hash, 2 do\n"
    "    for k = reads_of(hash[i], hash[i + 1], me, mine), 1, -1 do\n"
    "      longest = math.max(longest, redis.call('pttl', hold_key(name, hash[i], k)))\n"
    "      if longest >= enough then return longest end\n"
    "    end\n"
    "  end\n"
    "  return longest\n"
    "end\n"
    /* Whether a key of my holds 1..left lives (checked only once the released keys were
     * found gone: never on the common path). */
    "local function live_key(name, me, left)\n"
    "  for k = left, 1, -1 do\n"
    "    if redis.call('exists', hold_key(name, me, k)) == 1 then return true end\n"
    "  end\n"
    "  return false\n"
    "end\n"
    "local me, expected = ARGV[1], tonumber(ARGV[2])\n"
    "local mode = redis.call('hget', KEYS[1], 'mode')\n"
    "local count = mode and tonumber(redis.call('hget', KEYS[1], me))\n"
    "if not mode or not count then\n"
    "  if redis.call('exists', KEYS[1]) == 1 and not_a_lock(KEYS[1]) then\n"
    "    return not_a_lock_error(KEYS[1])\n"
    "  end\n"
    "  return nil\n"
    "end\n"
    "if count == expected - 1 then return count end\n"
    "if count < expected then return {count} end\n"
    "local left, keys = math.max(expected - 1, 0), {}\n"
    "for k = count, left + 1, -1 do keys[#keys + 1] = hold_key(KEYS[1], me, k) end\n"
    /* What becomes of the hash: free (deleted), a new TTL, or as it is (nil). */
    "local free, ttl = false, nil\n"
    "if mode ~= 'write' then\n"
    "  free = left == 0 and redis.call('hlen', KEYS[1]) == 2\n"
    "end\n"
    "if mode ~= 'write' and not free then\n"
    "  local now = redis.call('pttl', KEYS[1])\n"
    "  local enough = math.floor(now * 2 / 3)\n"
    "  local gone = -2\n"
    "  if not sampled_enough(KEYS[1], me, left, enough) then\n"
    "    for i = 1, #keys do gone = math.max(gone, redis.call('pttl', keys[i])) end\n"
    "  end\n"
    /* Within 10 ms counts as the longest: Redis 7.0 reads its clock at each PTTL, so a key
     * that ends with the hash reads a millisecond or two short when the clock ticks between
     * the calls (here, or between the SET and PEXPIRE of its acquire). */
    "  if gone + 10 >= now then\n"
    "    local longest = longest_key(KEYS[1], me, left, enough)\n"
    "    if longest <= 0 then\n"
    "      free = true\n"
    "    elseif longest < enough then\n"
    "      ttl = longest\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local no\n"
    "if free then\n"
    "  no = refused(ARGV[4], ARGV[3], '0') or refused('del', KEYS[1], unpack(keys))\n"
    "else\n"
    "  no = refused('del', unpack(keys))\n"
    "    or (left > 0 and refused('hset', KEYS[1], me, int(left)))\n"
    "    or (left == 0 and refused('hdel', KEYS[1], me))\n"
    "    or (ttl and refused('pexpire', KEYS[1], int(ttl)))\n"
    "end\n"
    "if no then return no end\n"
    "if free then\n"
    "  redis.call(ARGV[4], ARGV[3], '0')\n"
    /* Only the hash deleted: no key of mine was left (free with left > 0 means the keys
     * left..1 are gone too): my field was no hold. */
    "  if redis.call('del', KEYS[1], unpack(keys)) == 1 then return nil end\n"
    "  return left\n"
    "end\n"
    "if redis.call('del', unpack(keys)) == 0 and not live_key(KEYS[1], me, left) then\n"
    /* My field is no hold (the DEL deleted nothing: Redis is unchanged so far). It goes,
     * and the TTL rule's answer stands; with left > 0 the field was not going, and if it
     * was the only reader, the lock goes as a last read hold's would. */
    "  if left > 0 and mode ~= 'write' and redis.call('hlen', KEYS[1]) == 2 then\n"
    "    no = refused(ARGV[4], ARGV[3], '0') or refused('del', KEYS[1])\n"
    "    if no then return no end\n"
    "    redis.call(ARGV[4], ARGV[3], '0')\n"
    "    redis.call('del', KEYS[1])\n"
    "    return nil\n"
    "  end\n"
    "  no = left > 0 and refused('hdel', KEYS[1], me)\n"
    "  if no then return no end\n"
    "  redis.call('hdel', KEYS[1], me)\n"
    "  if ttl then redis.call('pexpire', KEYS[1], int(ttl)) end\n"
    "  return nil\n"
    "end\n"
    "if left > 0 then\n"
    "  redis.call('hset', KEYS[1], me, int(left))\n"
    "else\n"
    "  redis.call('hdel', KEYS[1], me)\n"
    "end\n"
    "if ttl then redis.call('pexpire', KEYS[1], int(ttl)) end\n"
    "return left\n";

/*
 * RW_WRITE_RELEASE  KEYS[1] = name
 *   ARGV[1] = writer field, ARGV[2] = expected count, ARGV[3] = channel,
 *   ARGV[4] = 'publish' or 'spublish'
 * -> RELEASE's answers. The last write hold publishes "1" (every waiter of
 *    every client wakes: readers may all go) and deletes the lock, or, if
 *    the writer holds read holds too, leaves it to them in read mode. (Not
 *    in Redisson: it publishes nothing on that switch, and readers waiting
 *    elsewhere sleep until their poll.) It also deletes the waiting
 *    writers' set (rlock's, derived from the name): a write phase ends, and
 *    the readers and writers it wakes race again -- readers that get there
 *    before a waiting writer's next attempt (which puts it back) share the
 *    lock, so waiting writers cannot starve readers either. The TTL is left
 *    alone on a partial release.
 */
const char rlock__rw_write_release_lua[] =
    RW_PRELUDE_LUA
    RELEASE_HEAD_LUA("")
    "local writers = writers_key(KEYS[1])\n"
    "local no = refused('hdel', KEYS[1], ARGV[1]) or refused('hset', KEYS[1], 'mode', 'read')\n"
    "  or refused(ARGV[4], ARGV[3], '1') or refused('del', KEYS[1]) or refused('del', writers)\n"
    "if no then return no end\n"
    "redis.call(ARGV[4], ARGV[3], '1')\n"
    "if redis.call('type', writers)['ok'] == 'set' then redis.call('del', writers) end\n"
    "if redis.call('hlen', KEYS[1]) == 2 then\n"
    "  redis.call('del', KEYS[1])\n"
    "else\n"
    "  redis.call('hdel', KEYS[1], ARGV[1])\n"
    "  redis.call('hset', KEYS[1], 'mode', 'read')\n"
    "end\n"
    "return 0\n";

/*
 * RW_FORCE_UNLOCK  KEYS[1] = name
 *   ARGV[1] = the mode it deletes ('read' for the read lock's handle,
 *   'write' for the write lock's), ARGV[2] = channel, ARGV[3] = publish
 *   verb, ARGV[4] = the message ('0' for read, '1' for write: Redisson's)
 * -> 1 deleted (and the message published), 0 not locked in that mode;
 *    WRONGTYPE / NOTALOCK untouched. The read holds' keys expire by their
 *    own TTL, as in Redisson.
 */
const char rlock__rw_force_unlock_lua[] =
    RW_PRELUDE_LUA
    FORCE_HEAD_LUA
    "if redis.call('hget', KEYS[1], 'mode') ~= ARGV[1] then return 0 end\n"
    "local no = refused(ARGV[3], ARGV[2], ARGV[4]) or refused('del', KEYS[1])\n"
    "if no then return no end\n"
    "redis.call(ARGV[3], ARGV[2], ARGV[4])\n"
    "redis.call('del', KEYS[1])\n"
    "return 1\n";

/*
 * RW_LOCKED  KEYS[1] = name, ARGV[1] = 'read' or 'write'. Read-only.
 * -> 1/0, Redisson's isLocked() of each handle: the read lock is locked in
 *    read mode, and in write mode when the writer holds read holds too (the
 *    hash has more than mode and the writer's field); the write lock in
 *    write mode. WRONGTYPE for a key that is not a hash.
 */
const char rlock__rw_locked_lua[] =
    "local mode = redis.call('hget', KEYS[1], 'mode')\n"
    "if mode == 'write' and ARGV[1] == 'read' then\n"
    "  return redis.call('hlen', KEYS[1]) > 2 and 1 or 0\n"
    "end\n"
    "return mode == ARGV[1] and 1 or 0\n";

/*
 * RW_READ_HOLDS  KEYS[1] = name, ARGV[1] = reader field. Read-only.
 * -> the field's read hold count if a key of its holds lives (the latest is
 *    read first: one EXISTS for a live hold), else 0: a field whose keys are
 *    all gone (leases ran out while other readers kept the hash) is no
 *    hold. The read lock's hold count and "held" (rlock_hold_count,
 *    rlock_is_held_by_current_thread); WRONGTYPE for a key that is not a
 *    hash.
 */
const char rlock__rw_read_holds_lua[] =
    RW_KEYS_LUA
    "local count = tonumber(redis.call('hget', KEYS[1], ARGV[1])) or 0\n"
    "for k = count, 1, -1 do\n"
    "  if redis.call('exists', hold_key(KEYS[1], ARGV[1], k)) == 1 then return count end\n"
    "end\n"
    "return 0\n";

/*
 * The renewal of both kinds of hold (the read and write renewers of rw.c).
 * For readers, Redisson's ReadLockTask with a result per hold: if its field
 * is there, every key of its holds (count .. 1) gets the lease again; 1
 * renewed, 0 gone (its field, or a key of one of its holds: that hold's
 * lease ran out, and another reader's unlock may free the lock under it),
 * -1 not served here (a Cluster slot moved or moving). A writer field
 * ("...:write") has no keys: 1 if it is there. The hash gets TTL max(its
 * PTTL, lease) once for each run of one lock's holds (the watchdog sends
 * them together): readers of one lock in one client share that work.
 * Nothing is ever re-created. Unlike Redisson (which sets the hash's TTL to
 * the lease, for a reader as for a writer), a renewal never shortens it: a
 * reader with a longer lease keeps its lock -- also the read hold of a
 * writer that downgrades, after its write unlock.
 */
#define RW_RENEW_PRELUDE_LUA                                                                      \
    RW_KEYS_LUA                                                                                   \
    "local result, renewed = {}, nil\n"                                                           \
    "local function renew_reader(name, field)\n"                                                  \
    "  local count = redis.pcall('hget', name, field)\n"                                          \
    "  if type(count) == 'table' then\n"                                                          \
    "    return string.find(count['err'], 'WRONGTYPE', 1, true) and 0 or -1\n"                   \
    "  end\n"                                                                                     \
    "  count = tonumber(count)\n"                                                                 \
    "  if count == nil then return 0 end\n"                                                       \
    "  if string.sub(field, -6) == ':write' then return 1 end\n"                                  \
    "  for k = count, 1, -1 do\n"                                                                 \
    "    local armed = redis.pcall('pexpire', hold_key(name, field, k), ARGV[1])\n"              \
    "    if type(armed) == 'table' then return -1 end\n"                                          \
    "    if armed == 0 then return 0 end\n"                                                       \
    "  end\n"                                                                                     \
    "  return 1\n"                                                                                \
    "end\n"                                                                                       \
    "local function renew(i, name, field)\n"                                                      \
    "  result[i] = renew_reader(name, field)\n"                                                   \
    "  if result[i] == 1 and name ~= renewed then\n"                                              \
    "    outlive(name, tonumber(ARGV[1]), ARGV[1])\n"                                             \
    "    renewed = name\n"                                                                        \
    "  end\n"                                                                                     \
    "end\n"

/*
 * RW_RENEW  KEYS = names (one lock's readers together), ARGV as RENEW's.
 * A hold key on another node (a migration moved it, or the name: its slot
 * is migrating) is TRYAGAIN for the whole script: the watchdog renews that
 * lock alone, and the net moves its keys together first (net/exec.c). The
 * holds renewed before are renewed again then, harmlessly.
 */
const char rlock__rw_renew_lua[] =
    RW_RENEW_PRELUDE_LUA
    "for i = 1, #KEYS do\n"
    "  renew(i, KEYS[i], ARGV[i + 1])\n"
    "  if result[i] == -1 then\n"
    "    return redis.error_reply('TRYAGAIN a key of ' .. KEYS[i] .. ' is on another node')\n"
    "  end\n"
    "end\n"
    "return result\n";

/* RW_RENEW_NODE  RENEW_NODE's arguments (reentrant_lua.c), for a Cluster node. */
const char rlock__rw_renew_node_lua[] =
    RW_RENEW_PRELUDE_LUA
    RENEW_NODE_LOOP_LUA;

/*
 * RW_WRITE_LEAVE  KEYS[1] = name, KEYS[2] = the waiting writers' set
 *   ARGV[1] = writer field, ARGV[2] = channel, ARGV[3] = publish verb
 * A waiting writer that gives up (timed out, cancelled, failed) leaves the
 * set. If it was the last and no writer holds the lock, "1" wakes every
 * waiter: readers held back by the set may go now.
 * -> 1 left, 0 was not in the set.
 */
const char rlock__rw_write_leave_lua[] =
    RW_PRELUDE_LUA
    "local no = not_a_set(KEYS[2]) or refused('srem', KEYS[2], ARGV[1])\n"
    "  or refused(ARGV[3], ARGV[2], '1')\n"
    "if no then return no end\n"
    "local mode = redis.pcall('hget', KEYS[1], 'mode')\n"
    "if redis.call('srem', KEYS[2], ARGV[1]) == 0 then return 0 end\n"
    "if redis.call('exists', KEYS[2]) == 0 and mode ~= 'write' then\n"
    "  redis.call(ARGV[3], ARGV[2], '1')\n"
    "end\n"
    "return 1\n";
