-- prelude/fair_queue.lua - the prelude of the fair lock's scripts: lock.lua,
-- and the queue's dead heads: waiters at the head whose deadline has
-- passed, as Redisson purges them (a head without a deadline stops the
-- purge, as in Redisson). stale_heads only reads: it returns how many there
-- are and the first live waiter (false: none); drop_heads pops them.

-- #include lock
local function stale_heads(now)
  local queue = redis.call('lrange', KEYS[2], 0, -1)
  local seen = {}
  for i, id in ipairs(queue) do
    local deadline = redis.call('zscore', KEYS[3], id)
    if seen[id] or deadline == false or tonumber(deadline) > now then
      return i - 1, id
    end
    seen[id] = true
  end
  return #queue, false
end
local function drop_heads(n)
  for i = 1, n do
    redis.call('zrem', KEYS[3], redis.call('lpop', KEYS[2]))
  end
end
