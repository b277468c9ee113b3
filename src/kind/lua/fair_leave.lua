-- FAIR_LEAVE  KEYS = name, queue, timeouts
--   ARGV[1] = owner field, ARGV[2] = its wait ms (as sent with its
--   attempts), ARGV[3] = the lock's channel, ARGV[4] = publish verb,
--   ARGV[5] = now
-- A waiter that gives up (timed out, cancelled, closed) leaves the queue, and
-- the waiters behind it move ARGV[2] earlier (Redisson's acquireFailed). Not
-- in Redisson: if it was the head and the lock is free, the next live head is
-- told ("0" on its channel), else it would sleep until its own poll.
-- -> 1 left, 0 was not queued.

-- #include fair_queue
local queue = redis.call('lrange', KEYS[2], 0, -1)
local at = nil
for i, id in ipairs(queue) do
  if id == ARGV[1] then at = i break end
end
redis.call('zrem', KEYS[3], ARGV[1])
if at == nil then return 0 end
for i = at + 1, #queue do
  redis.call('zincrby', KEYS[3], -tonumber(ARGV[2]), queue[i])
end
redis.call('lrem', KEYS[2], 0, ARGV[1])
if at == 1 and redis.call('exists', KEYS[1]) == 0 then
  local stale, head = stale_heads(tonumber(ARGV[5]))
  drop_heads(stale)
  if head then redis.pcall(ARGV[4], ARGV[3] .. ':' .. head, '0') end
end
return 1
