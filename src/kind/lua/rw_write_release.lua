-- RW_WRITE_RELEASE  KEYS[1] = name
--   ARGV[1] = writer field, ARGV[2] = expected count, ARGV[3] = channel,
--   ARGV[4] = 'publish' or 'spublish'
-- -> RELEASE's answers. The last write hold publishes "1" (every waiter of
--    every client wakes: readers may all go) and deletes the lock, or, if
--    the writer holds read holds too, leaves it to them in read mode. (Not
--    in Redisson: it publishes nothing on that switch, and readers waiting
--    elsewhere sleep until their poll.) It also deletes the waiting
--    writers' set (rlock's, derived from the name): a write phase ends, and
--    the readers and writers it wakes race again -- readers that get there
--    before a waiting writer's next attempt (which puts it back) share the
--    lock, so waiting writers cannot starve readers either. The TTL is left
--    alone on a partial release.

-- #include rw_lock
-- #include release_find
-- #include release_count
local writers = writers_key(KEYS[1])
local no = refused('hdel', KEYS[1], ARGV[1]) or refused('hset', KEYS[1], 'mode', 'read')
  or refused(ARGV[4], ARGV[3], '1') or refused('del', KEYS[1]) or refused('del', writers)
if no then return no end
redis.call(ARGV[4], ARGV[3], '1')
if redis.call('type', writers)['ok'] == 'set' then redis.call('del', writers) end
if redis.call('hlen', KEYS[1]) == 2 then
  redis.call('del', KEYS[1])
else
  redis.call('hdel', KEYS[1], ARGV[1])
  redis.call('hset', KEYS[1], 'mode', 'read')
end
return 0
