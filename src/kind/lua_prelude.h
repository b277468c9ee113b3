/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_prelude.h - the Lua functions every mutating script of every lock
 * kind starts with (reentrant_lua.c, fair_lua.c). PRIVATE.
 */
#ifndef RLOCK_LUA_PRELUDE_H
#define RLOCK_LUA_PRELUDE_H

/*
 * Every mutating script keeps one rule: an error return means Redis is
 * unchanged. Redis does not roll a script back, so a script checks, before
 * its first write, everything that could make a later step fail: that the
 * key is a lock (not_a_lock), and that the ACL lets the caller run each
 * later write (redis.acl_check_cmd, Redis >= 7.0; older servers have no
 * per-command channel or key rules that could refuse half a script). A
 * PUBLISH goes before the DEL it announces: a refused PUBLISH (no channel
 * permission) then fails the unlock before anything changed, and the
 * message still reaches subscribers after the script, when the key is gone.
 *
 * A lock, ours or Redisson's, is a hash with a TTL whose fields are all
 * "<id>:<thread>". A hash without a TTL, or with another field, is somebody's
 * data under the same name: NOTALOCK, untouched.
 */
/*
 * Keys passed as arguments (net.h, RLOCK__KEYS_AS_ARGS: a script of several
 * keys on a slot's importing node) are put back where the script reads them.
 * First in every script of several keys.
 */
#define KEYS_AS_ARGS_LUA                                                                          \
    "if ARGV[1] == 'rlock:keys-as-args' then\n"                                                   \
    "  local n = tonumber(ARGV[2])\n"                                                             \
    "  for i = 1, n do KEYS[1 + i] = ARGV[2 + i] end\n"                                           \
    "  for _ = 1, n + 2 do table.remove(ARGV, 1) end\n"                                           \
    "end\n"

#define PRELUDE_LUA                                                                               \
    KEYS_AS_ARGS_LUA                                                                              \
    "local function not_a_lock(key)\n"                                                            \
    "  if redis.call('pttl', key) == -1 then return true end\n"                                   \
    "  for _, field in ipairs(redis.call('hkeys', key)) do\n"                                     \
    "    if not string.find(field, '^.+:%d+$') then return true end\n"                       \
    "  end\n"                                                                                     \
    "  return false\n"                                                                            \
    "end\n"                                                                                       \
    "local function not_a_lock_error(key)\n"                                                      \
    "  return redis.error_reply('NOTALOCK the hash ' .. key .. ' has no TTL or a field that is '" \
    " .. 'not <id>:<thread>: not a lock, left untouched')\n"                                      \
    "end\n"                                                                                       \
    REFUSED_LUA                                                                                   \
    LATER_REFUSED_LUA

/*
 * refused(command, args...): nil if the ACL lets the caller run it, else the
 * NOPERM error to return before the script's first write. Also for scripts
 * that write no lock (fence_lua.c).
 */
#define REFUSED_LUA                                                                               \
    "local function refused(...)\n"                                                               \
    "  if redis.acl_check_cmd == nil or redis.acl_check_cmd(...) then return nil end\n"           \
    "  return redis.error_reply('NOPERM this user has no permissions to run ' .. select(1, ...)\n" \
    "    .. ' on ' .. select(2, ...) .. ' (rlock checked before changing anything)')\n"           \
    "end\n"

/*
 * later_refused(...): refused(...) for a command that the hold's unlock or
 * renewal will run, asked by an acquire before it takes a first hold (a
 * re-entry holds already: refusing it would give nothing back): a user who
 * may lock but not unlock (no PUBLISH on the channel, no DEL on the key) is
 * refused at once with nothing held, not after its critical section with a
 * lock it cannot give back. Each acquire asks it for what its kind's release
 * and renewal scripts run (one key's and one channel's rules; the fair
 * lock's next head's channel is asked as the caller's own).
 */
#define LATER_REFUSED_LUA                                                                         \
    "local function later_refused(...)\n"                                                         \
    "  if redis.acl_check_cmd == nil or redis.acl_check_cmd(...) then return nil end\n"           \
    "  return redis.error_reply('NOPERM this user has no permissions to run ' .. select(1, ...)\n" \
    "    .. ' on ' .. select(2, ...) .. ', which the unlock or renewal would need: not taken')\n"  \
    "end\n"

/*
 * The guard of the plain, fenced and fair scripts for a hash that has their
 * owner field (KEYS[1] the lock): a read-write lock's hash (a "mode" field)
 * has the same "<id>:<thread>" field for a reader, so finding one's own
 * field does not make the hash one's own kind's. NOTALOCK, untouched. Only
 * on the paths that found the field: a hash without it is checked by
 * not_a_lock, whose pattern "mode" fails.
 */
#define NOT_RW_LUA                                                                                \
    "if redis.call('hexists', KEYS[1], 'mode') == 1 then return not_a_lock_error(KEYS[1]) end\n"

/*
 * The start of every release (KEYS[1] the lock, ARGV[1] the owner field,
 * ARGV[2] the holds the caller believes it has): not ours -> nil (NOTALOCK
 * for a hash that is not a lock); already released (a re-send) -> the count;
 * fewer than expected -> {count} (stale); more than one -> one fewer. What
 * follows runs only for the last hold (count == expected == 1). `found` is
 * Lua run when the owner field is there, before anything else: NOT_RW_LUA
 * for the plain and fair kinds, "" for the read-write kind (whose hashes
 * have "mode", and whose writer field ends in ":write").
 */
#define RELEASE_HEAD_LUA(found)                                                                   \
    "local count = redis.call('hget', KEYS[1], ARGV[1])\n"                                        \
    "if count == false then\n"                                                                    \
    "  if redis.call('exists', KEYS[1]) == 1 and not_a_lock(KEYS[1]) then\n"                      \
    "    return not_a_lock_error(KEYS[1])\n"                                                      \
    "  end\n"                                                                                     \
    "  return nil\n"                                                                              \
    "end\n"                                                                                       \
    found                                                                                         \
    "count = tonumber(count)\n"                                                                   \
    "local expected = tonumber(ARGV[2])\n"                                                        \
    "if count == expected - 1 then\n"                                                             \
    "  return count\n"                                                                            \
    "end\n"                                                                                       \
    "if count < expected then\n"                                                                  \
    "  return {count}\n"                                                                          \
    "end\n"                                                                                       \
    "if expected > 1 then\n"                                                                      \
    "  redis.call('hset', KEYS[1], ARGV[1], expected - 1)\n"                                      \
    "  return expected - 1\n"                                                                     \
    "end\n"

/*
 * The start every forced unlock shares (KEYS[1] the lock): nothing there ->
 * 0; a key of another type -> WRONGTYPE, a hash that is not a lock ->
 * NOTALOCK, both untouched. What follows runs for a lock.
 */
#define FORCE_HEAD_LUA                                                                            \
    "local kind = redis.call('type', KEYS[1])['ok']\n"                                             \
    "if kind == 'none' then\n"                                                                     \
    "  return 0\n"                                                                                 \
    "end\n"                                                                                        \
    "if kind ~= 'hash' then\n"                                                                     \
    "  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')\n" \
    "end\n"                                                                                        \
    "if not_a_lock(KEYS[1]) then return not_a_lock_error(KEYS[1]) end\n"

/*
 * The end of every RENEW_NODE-like script: renew(i, name, field) for each
 * lock of RENEW_NODE's arguments (KEYS[1] with ARGV[2], then the pairs from
 * ARGV[3] on), then the results.
 */
#define RENEW_NODE_LOOP_LUA                                                                       \
    "renew(1, KEYS[1], ARGV[2])\n"                                                                 \
    "for i = 2, #ARGV / 2 do\n"                                                                    \
    "  renew(i, ARGV[2 * i - 1], ARGV[2 * i])\n"                                                   \
    "end\n"                                                                                        \
    "return result\n"

/*
 * The re-entry the acquires with a count in hand share (inside "if count >
 * 0 then"): Redis has `count` holds of the owner field `field` (a Lua
 * expression, as a C string) and the caller believes `expected`: equal ->
 * one more (HINCRBY); one more already -> an earlier send of this call
 * applied; else the caller's belief is stale: {2, count}, nothing changed.
 * `count` is the owner's count after it.
 */
#define REENTER_LUA(field)                                                                        \
    "  if count == expected then\n"                                                                \
    "    count = redis.call('hincrby', KEYS[1], " field ", 1)\n"                                   \
    "  elseif count ~= expected + 1 then\n"                                                        \
    "    return {2, count}\n"                                                                      \
    "  end\n"

#endif /* RLOCK_LUA_PRELUDE_H */
