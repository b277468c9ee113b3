-- FAIR_FORCE_UNLOCK  KEYS = name, queue, timeouts
--   ARGV[1] = the lock's channel, ARGV[2] = publish verb, ARGV[3] = now
-- -> 1 deleted (dead heads purged, "0" published to the live head's
--    channel), 0 not locked; WRONGTYPE / NOTALOCK untouched. The queue
--    stays: its waiters keep their places.

-- #include fair_queue
-- #include force_head
local stale, head = stale_heads(tonumber(ARGV[3]))
local no = refused('del', KEYS[1]) or refused('lpop', KEYS[2]) or refused('zrem', KEYS[3], 'x')
if not no and head then no = refused(ARGV[2], ARGV[1] .. ':' .. head, '0') end
if no then return no end
drop_heads(stale)
if head then redis.call(ARGV[2], ARGV[1] .. ':' .. head, '0') end
redis.call('del', KEYS[1])
return 1
