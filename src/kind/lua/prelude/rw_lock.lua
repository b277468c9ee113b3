-- prelude/rw_lock.lua - the prelude of the read-write scripts that write:
-- lock.lua, rw_keys.lua, and the read-write lock's not_a_lock (it shadows
-- lock.lua's): a hash with a TTL whose fields are "mode" ("read" or
-- "write"), "<id>:<thread>" or "<id>:<thread>:write". A hash without "mode"
-- whose fields are owner fields is a lock of another kind (getLock,
-- getFairLock): busy for an acquire, not ours for a release. The acquires
-- trust a hash whose mode is "read" or "write" (as the other kinds trust a
-- hash with their own field), so that an acquire does not read every
-- reader's field. not_a_set(key): the waiting writers' set's guard.

-- #include lock
-- #include rw_keys
local function not_a_lock(key)
  if redis.call('pttl', key) == -1 then return true end
  local hash = redis.call('hgetall', key)
  for i = 1, #hash, 2 do
    if hash[i] == 'mode' then
      if hash[i + 1] ~= 'read' and hash[i + 1] ~= 'write' then return true end
    elseif not string.find(hash[i], '^.+:%d+$') and
           not string.find(hash[i], '^.+:%d+:write$') then
      return true
    end
  end
  return false
end
local function not_a_set(key)
  local kind = redis.call('type', key)['ok']
  if kind == 'none' or kind == 'set' then return nil end
  return redis.error_reply('NOTALOCK the key ' .. key .. ' is not a set (rlock keeps the '
    .. 'waiting writers there): left untouched')
end
