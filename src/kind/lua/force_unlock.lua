-- FORCE_UNLOCK  KEYS[1] = name, ARGV[1] = channel, ARGV[2] = 'publish' or 'spublish'
-- -> 1 deleted (and "0" published), 0 not locked; WRONGTYPE for a key that is
--    not a hash, NOTALOCK for a hash that is not a lock; both left untouched.

-- #include lock
-- #include force_head
local no = refused(ARGV[2], ARGV[1], '0') or refused('del', KEYS[1])
if no then return no end
redis.call(ARGV[2], ARGV[1], '0')
redis.call('del', KEYS[1])
return 1
