-- FAIR_ACQUIRE  KEYS = name, queue, timeouts
--   ARGV[1] = lease ms, ARGV[2] = owner field, ARGV[3] = expected count,
--   ARGV[4] = the waiter's wait ms (Redisson's threadWaitTime), ARGV[5] = now
--   (wall-clock ms), ARGV[6] = '1' to join the queue when busy, '0' not to
--   (Redisson's no-wait tryLock() never queues), ARGV[7] = the channel
--   prefix, ARGV[8] = the publish verb (FAIR_RELEASE's: later_refused asks
--   them, with the caller's own channel, before anything is written)
-- -> {1, count}  held: acquired (the lock was free and the queue empty or
--                headed by the caller; the caller leaves the queue and, as in
--                Redisson, every deadline left moves ARGV[4] earlier),
--                re-entered, or an earlier send of this call already applied.
--    {0, ms}     busy: the caller is queued (once: a re-send or a later
--                attempt keeps its place and deadline) unless ARGV[6] is '0';
--                ms is how long to sleep at most before trying again: the
--                lock's PTTL, but no longer than until the deadline of
--                another waiter heading the queue (a dead head gets the
--                unlock message, nobody else: the caller must come back when
--                the head can be dropped). When the lock is free and another
--                waiter heads the queue, at most 1 s: a live head takes the
--                lock within a round trip, and a hold that later expires
--                unannounced (its holder died) publishes nothing, so the
--                caller must come back to learn its PTTL. Unlock messages
--                (to the head only) cut the sleep short.
--    {2, count}  the caller's expected count is stale: nothing changed.
--    NOTALOCK, NOPERM, WRONGTYPE: nothing changed.
-- A new waiter's deadline is Redisson's: (the previous waiter's deadline, or
-- now + the lock's PTTL) + ARGV[4].

-- #include fair_queue
local me, now, expected = ARGV[2], tonumber(ARGV[5]), tonumber(ARGV[3])
local count = redis.call('hget', KEYS[1], me)
local exists = redis.call('exists', KEYS[1]) == 1
if count == false and exists and not_a_lock(KEYS[1]) then
  return not_a_lock_error(KEYS[1])
end
if count ~= false then
-- #include not_rw
end
local stale, head = stale_heads(now)
local no = refused('hincrby', KEYS[1], me, '1') or refused('pexpire', KEYS[1], ARGV[1])
  or refused('rpush', KEYS[2], me) or refused('zadd', KEYS[3], '0', me)
  or (count == false and (later_refused(ARGV[8], ARGV[7] .. ':' .. me, '0')
    or later_refused('del', KEYS[1]) or later_refused('lpop', KEYS[2])
    or later_refused('zrem', KEYS[3], me) or later_refused('hset', KEYS[1], me, '1')
    or later_refused('hexists', KEYS[1], me)))
if no then return no end
drop_heads(stale)
count = tonumber(count or 0)
if count > 0 then
-- #include reenter field=me
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, count}
end
if expected > 0 then
  return {2, 0}
end
if not exists and (head == false or head == me) then
  if head == me then redis.call('lpop', KEYS[2]) end
  redis.call('zrem', KEYS[3], me)
  for _, id in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), id)
  end
  redis.call('hset', KEYS[1], me, 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, 1}
end
if ARGV[6] == '1' and redis.call('zscore', KEYS[3], me) == false then
  local last = redis.call('lindex', KEYS[2], -1)
  local last_deadline = last and last ~= me and redis.call('zscore', KEYS[3], last)
  local base
  if last_deadline then
    base = tonumber(last_deadline) - now
  else
    base = redis.call('pttl', KEYS[1])
  end
  if redis.call('zadd', KEYS[3], base + tonumber(ARGV[4]) + now, me) == 1 then
    redis.call('rpush', KEYS[2], me)
  end
  if head == false then head = me end
end
local ttl = redis.call('pttl', KEYS[1])
local deadline = head and head ~= me and redis.call('zscore', KEYS[3], head)
local to_head = deadline and math.max(1, tonumber(deadline) - now)
if ttl > 0 then return {0, to_head and math.min(ttl, to_head) or ttl} end
if to_head then return {0, math.min(to_head, 1000)} end
return {0, 100}
