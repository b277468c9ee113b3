-- RW_FORCE_UNLOCK  KEYS[1] = name
--   ARGV[1] = the mode it deletes ('read' for the read lock's handle,
--   'write' for the write lock's), ARGV[2] = channel, ARGV[3] = publish
--   verb, ARGV[4] = the message ('0' for read, '1' for write: Redisson's)
-- -> 1 deleted (and the message published), 0 not locked in that mode;
--    WRONGTYPE / NOTALOCK untouched. The read holds' keys expire by their
--    own TTL, as in Redisson.

-- #include rw_lock
-- #include force_head
if redis.call('hget', KEYS[1], 'mode') ~= ARGV[1] then return 0 end
local no = refused(ARGV[3], ARGV[2], ARGV[4]) or refused('del', KEYS[1])
if no then return no end
redis.call(ARGV[3], ARGV[2], ARGV[4])
redis.call('del', KEYS[1])
return 1
