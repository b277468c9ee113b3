-- RW_READ_ACQUIRE  KEYS[1] = name, KEYS[2] = the waiting writers' set
--   ARGV[1] = lease ms, ARGV[2] = the reader field "<uuid>:<thread>",
--   ARGV[3] = expected count, ARGV[4] and ARGV[5] unused (RW_WRITE_ACQUIRE's),
--   ARGV[6] = channel, ARGV[7] = publish verb (the release's: later_refused)
-- -> {1, count}  held: a new read hold (the lock was free, in read mode, or
--                in write mode held by this very thread: a downgrade), a
--                re-entry (never held back), or an earlier send of this call
--                already applied. The hold's key ":rwlock_timeout:<count>" is
--                set to the lease, the hash's TTL to at least the lease.
--    {0, ms}     busy: another thread writes (ms = the lock's PTTL), a lock
--                of another kind has the name, or an rlock writer waits
--                (ms = the writers' set's PTTL + 1: come back when it has
--                gone; 100 for a set without a TTL); nothing changed.
--    {2, count}  the caller's expected count is stale: nothing changed.
--    NOTALOCK, NOPERM (also for what the release or renewal will run):
--    nothing changed.

-- #include rw_lock
local me, expected, lease = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[1])
local mode = redis.call('hget', KEYS[1], 'mode')
local count = mode and tonumber(redis.call('hget', KEYS[1], me)) or 0
-- writers_wait: the writers' set exists; nil = not asked yet
local writers_wait
if not mode then
  local found = redis.call('exists', KEYS[1], KEYS[2])
  if found > 0 and redis.call('exists', KEYS[1]) == 1 then
    if not_a_lock(KEYS[1]) then return not_a_lock_error(KEYS[1]) end
    return {0, redis.call('pttl', KEYS[1])}
  end
  writers_wait = found > 0
elseif mode ~= 'read' and mode ~= 'write' then
  return not_a_lock_error(KEYS[1])
end
local n = count + 1
if count > 0 then
  if count == expected + 1 then
    -- an earlier send of this call applied
    n = count
  elseif count ~= expected then
    return {2, count}
  end
else
  if expected > 0 then return {2, 0} end
  if mode == 'write' then
    if redis.call('hexists', KEYS[1], me .. ':write') == 0 then
      return {0, redis.call('pttl', KEYS[1])}
    end
  elseif writers_wait or (writers_wait == nil and redis.call('exists', KEYS[2]) == 1) then
    local ttl = redis.call('pttl', KEYS[2])
    return {0, ttl >= 0 and ttl + 1 or 100}
  end
end
local key, held = hold_key(KEYS[1], me, n), int(n)
local no = refused('hset', KEYS[1], 'mode', 'read', me, held)
  or refused('set', key, '1', 'px', ARGV[1]) or refused('pexpire', KEYS[1], ARGV[1])
  or (count == 0 and (later_refused(ARGV[7], ARGV[6], '0')
    or later_refused('del', KEYS[1], key) or later_refused('hdel', KEYS[1], me)
    or later_refused('pexpire', key, ARGV[1])))
if no then return no end
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'read', me, held)
elseif n ~= count then
  redis.call('hset', KEYS[1], me, held)
end
redis.call('set', key, '1', 'px', ARGV[1])
if mode then
  outlive(KEYS[1], lease, ARGV[1])
else
  redis.call('pexpire', KEYS[1], ARGV[1])
end
return {1, n}
