-- prelude/force_head.lua - the start every forced unlock shares (KEYS[1] the
-- lock): nothing there -> 0; a key of another type -> WRONGTYPE, a hash that
-- is not a lock -> NOTALOCK, both untouched. What follows runs for a lock.

local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if not_a_lock(KEYS[1]) then return not_a_lock_error(KEYS[1]) end
