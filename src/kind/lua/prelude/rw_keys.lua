-- prelude/rw_keys.lua - the read-write lock's key names and TTL rule. A read
-- hold's key: Redisson's suffixName(name, field) + ":rwlock_timeout:" + k;
-- and the waiting writers' set of a name (Redisson's prefixName rule).
-- Numbers become strings as integers (int): Lua's own conversion, and Redis
-- 7.0's of a number passed to redis.call, print them as floating point,
-- which is costly on the read path. outlive(name, ms, ms_str) gives the hash
-- a TTL of at least ms (the string ms_str): the TTL rule every acquire and
-- renewal keeps, so that the hash lives as long as its longest hold.

local function int(n)
  if n == 1 then return '1' end
  return string.format('%d', n)
end
local function hold_key(name, field, k)
  if string.find(name, '{', 1, true) then
    return name .. ':' .. field .. ':rwlock_timeout:' .. int(k)
  end
  return '{' .. name .. '}:' .. field .. ':rwlock_timeout:' .. int(k)
end
local function writers_key(name)
  if string.find(name, '{', 1, true) then return 'rlock_rwlock_writers:' .. name end
  return 'rlock_rwlock_writers:{' .. name .. '}'
end
local function outlive(name, ms, ms_str)
  if redis.call('pttl', name) < ms then redis.call('pexpire', name, ms_str) end
end
