/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fence_lua.c - the resource helper's script (rlock_fenced_set): a write
 * to a Redis key that only a holder with a recent enough fencing token may
 * make. The fenced lock's own scripts are ACQUIRE and TRANSFER
 * (reentrant_lua.c), which INCR the counter.
 *
 * Layout:
 *   <key>                  STRING  the resource's value (plain GET reads it)
 *   rlock_fence:{<key>}    STRING  the highest token a write to key carried; no TTL
 *
 * Threads: any; constant data.
 */
#include "kind.h"
#include "lua_prelude.h"

/*
 * FENCED_SET  KEYS[1] = key, KEYS[2] = its fence key
 *             ARGV[1] = token (decimal, >= 1, no leading zero), ARGV[2] = value
 * -> {1, token}    written: SET key value, and the fence raised to token
 *                  (equal tokens are accepted: a holder may write again).
 *    {0, highest}  token < the highest seen: nothing written.
 *    NOTAFENCE     the fence key holds something that is not a token;
 *                  WRONGTYPE if it is not a string; NOPERM: both checked
 *                  before any write.
 * Tokens are compared as decimal strings (shorter is smaller, then byte
 * order), so every 64-bit token compares exactly: a Lua number would round
 * those above 2^53.
 */
const char rlock__fenced_set_lua[] =
    KEYS_AS_ARGS_LUA
    REFUSED_LUA
    "local function below(a, b)\n"
    "  if #a ~= #b then return #a < #b end\n"
    "  return a < b\n"
    "end\n"
    "local highest = redis.call('get', KEYS[2])\n"
    "if highest then\n"
    "  if not string.find(highest, '^[1-9]%d*$') or #highest > 19 then\n"
    "    return redis.error_reply('NOTAFENCE the key ' .. KEYS[2] .. ' holds no fencing token: '\n"
    "      .. 'nothing written')\n"
    "  end\n"
    "  if below(ARGV[1], highest) then return {0, highest} end\n"
    "end\n"
    "local no = refused('set', KEYS[1], ARGV[2]) or refused('set', KEYS[2], ARGV[1])\n"
    "if no then return no end\n"
    "redis.call('set', KEYS[1], ARGV[2])\n"
    "if highest ~= ARGV[1] then redis.call('set', KEYS[2], ARGV[1]) end\n"
    "return {1, ARGV[1]}\n";
