-- RW_WRITE_ACQUIRE  KEYS[1] = name, KEYS[2] = the waiting writers' set
--   ARGV[1] = lease ms, ARGV[2] = the caller's reader field (its writer
--   field is that + ":write"), ARGV[3] = expected count, ARGV[4] = '1' if
--   the caller waits (joins the writers' set when busy), ARGV[5] = the
--   set's TTL ms, ARGV[6] = channel, ARGV[7] = publish verb (the release's:
--   later_refused)
-- -> {1, count}  held: the lock was free (the caller leaves the set), a
--                re-entry, or an earlier send of this call already applied;
--                the TTL is set to at least the lease.
--    {0, ms}     busy; a waiting caller is in the set, whose TTL is reset,
--                and ms is at most a third of that TTL, so that its next
--                attempt keeps it (else ms is the lock's PTTL).
--    {2, count}  the caller's expected count is stale: nothing changed.
--    {3, count}  the lock is in read mode and the caller holds count read
--                holds: it would wait for itself (Redisson forbids the
--                upgrade and would wait for ever). Nothing changed. A field
--                whose holds' keys are all gone is no hold (their leases ran
--                out; other readers keep the hash): busy, as for anyone.
--    NOTALOCK, NOPERM: nothing changed.

-- #include rw_lock
local me, expected, lease = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[1])
local writer = me .. ':write'
local mode = redis.call('hget', KEYS[1], 'mode')
local exists = mode or redis.call('exists', KEYS[1]) == 1
if exists and mode ~= 'read' and mode ~= 'write' and not_a_lock(KEYS[1]) then
  return not_a_lock_error(KEYS[1])
end
local no = not_a_set(KEYS[2]) or refused('hset', KEYS[1], 'mode', 'write')
  or refused('hincrby', KEYS[1], writer, '1') or refused('pexpire', KEYS[1], ARGV[1])
  or refused('sadd', KEYS[2], writer) or refused('srem', KEYS[2], writer)
  or refused('pexpire', KEYS[2], ARGV[5])
  or ((mode ~= 'write' or redis.call('hexists', KEYS[1], writer) == 0)
    and (later_refused(ARGV[7], ARGV[6], '1') or later_refused('del', KEYS[1], KEYS[2])
    or later_refused('hdel', KEYS[1], writer)))
if no then return no end
local count = 0
if mode == 'write' then count = tonumber(redis.call('hget', KEYS[1], writer) or 0) end
if count > 0 then
-- #include reenter field=writer
  outlive(KEYS[1], lease, ARGV[1])
  return {1, count}
end
if expected > 0 then return {2, 0} end
if not exists then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], writer, 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('srem', KEYS[2], writer)
  return {1, 1}
end
local reads = mode == 'read' and tonumber(redis.call('hget', KEYS[1], me)) or 0
for k = reads, 1, -1 do
  if redis.call('exists', hold_key(KEYS[1], me, k)) == 1 then return {3, reads} end
end
local ttl = redis.call('pttl', KEYS[1])
if ARGV[4] == '1' then
  redis.call('sadd', KEYS[2], writer)
  redis.call('pexpire', KEYS[2], ARGV[5])
  local refresh = math.floor(tonumber(ARGV[5]) / 3)
  if ttl < 0 or ttl > refresh then ttl = refresh end
end
return {0, ttl}
