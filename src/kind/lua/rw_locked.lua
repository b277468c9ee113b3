-- RW_LOCKED  KEYS[1] = name, ARGV[1] = 'read' or 'write'. Read-only.
-- -> 1/0, Redisson's isLocked() of each handle: the read lock is locked in
--    read mode, and in write mode when the writer holds read holds too (the
--    hash has more than mode and the writer's field); the write lock in
--    write mode. WRONGTYPE for a key that is not a hash.

local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'write' and ARGV[1] == 'read' then
  return redis.call('hlen', KEYS[1]) > 2 and 1 or 0
end
return mode == ARGV[1] and 1 or 0
