-- RW_WRITE_LEAVE  KEYS[1] = name, KEYS[2] = the waiting writers' set
--   ARGV[1] = writer field, ARGV[2] = channel, ARGV[3] = publish verb
-- A waiting writer that gives up (timed out, cancelled, failed) leaves the
-- set. If it was the last and no writer holds the lock, "1" wakes every
-- waiter: readers held back by the set may go now.
-- -> 1 left, 0 was not in the set.

-- #include rw_lock
local no = not_a_set(KEYS[2]) or refused('srem', KEYS[2], ARGV[1])
  or refused(ARGV[3], ARGV[2], '1')
if no then return no end
local mode = redis.pcall('hget', KEYS[1], 'mode')
if redis.call('srem', KEYS[2], ARGV[1]) == 0 then return 0 end
if redis.call('exists', KEYS[2]) == 0 and mode ~= 'write' then
  redis.call(ARGV[3], ARGV[2], '1')
end
return 1
