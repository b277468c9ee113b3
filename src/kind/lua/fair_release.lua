-- FAIR_RELEASE  KEYS = name, queue, timeouts
--   ARGV[1] = owner field, ARGV[2] = expected count, ARGV[3] = the lock's
--   channel (the waiters' channels are "<ARGV[3]>:<owner field>"),
--   ARGV[4] = 'publish' or 'spublish', ARGV[5] = now (wall-clock ms)
-- -> RELEASE's answers (release.lua): nil, the remaining count, or
--    {count} (stale). The last hold deletes the lock, purges dead heads and
--    publishes "0" to the channel of the live head only (no head: nothing).

-- #include fair_queue
-- #include release_find
-- #include not_rw
-- #include release_count
local stale, head = stale_heads(tonumber(ARGV[5]))
local no = refused('del', KEYS[1]) or refused('lpop', KEYS[2]) or refused('zrem', KEYS[3], 'x')
if not no and head then no = refused(ARGV[4], ARGV[3] .. ':' .. head, '0') end
if no then return no end
drop_heads(stale)
if head then redis.call(ARGV[4], ARGV[3] .. ':' .. head, '0') end
redis.call('del', KEYS[1])
return 0
