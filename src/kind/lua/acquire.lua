-- ACQUIRE  KEYS[1] = name, fenced lock: KEYS[2] = its token counter
--          ARGV[1] = lease ms, ARGV[2] = owner field, ARGV[3] = expected count,
--          ARGV[4] = channel, ARGV[5] = publish verb (RELEASE's: see later_refused)
-- -> {1, count}  the caller holds it: acquired or re-entered (Redis had the
--                expected count), or an earlier send of this same call already
--                applied (Redis has expected + 1); the TTL is set to the lease.
--                Fenced: {1, count, token}, the counter INCRed by this
--                send, whichever of the two it found: "expected + 1" is
--                also what an owner meets that acquires again while Redis
--                still keeps its previous hold, ended by the client's clock
--                (send time + lease) but not yet by Redis's TTL (which runs
--                from when the script ran) -- and that hold's token was
--                already returned. A re-send after a lost reply skips the
--                number the lost reply carried, which nobody saw. INCR is
--                the first write, so a counter that is not an integer fails
--                with nothing changed.
--    {0, pttl}   another owner holds it.
--    {2, count}  the caller's expected count is stale (its hold was lost, or
--                an earlier call's outcome is unknown): nothing changed; the
--                caller decides (a loss, or a re-base and a new send).
--    NOPERM      the ACL refuses a write of this script or a command its
--                RELEASE or RENEW will run (checked before any write, so a
--                user who could not unlock never holds).
--    NOTALOCK    the key is a hash that is not a lock: also a read-write
--                lock's hash that has the caller's field (its reader
--                field is the same string), checked only when the field
--                is there (prelude/not_rw.lua), off the fresh acquire's path.

-- #include lock
local count = redis.call('hget', KEYS[1], ARGV[2])
if count == false then
  if redis.call('exists', KEYS[1]) == 1 then
    if not_a_lock(KEYS[1]) then return not_a_lock_error(KEYS[1]) end
    return {0, redis.call('pttl', KEYS[1])}
  end
  count = 0
else
-- #include not_rw
  count = tonumber(count)
end
local expected = tonumber(ARGV[3])
if count ~= expected and count ~= expected + 1 then
  return {2, count}
end
local no = refused('pexpire', KEYS[1], ARGV[1])
  or (KEYS[2] and count == expected and refused('hincrby', KEYS[1], ARGV[2], '1'))
  or (count == 0 and (later_refused(ARGV[5], ARGV[4], '0') or later_refused('del', KEYS[1])
    or later_refused('hset', KEYS[1], ARGV[2], '1')
    or later_refused('hexists', KEYS[1], ARGV[2])))
if no then return no end
if KEYS[2] then redis.call('incr', KEYS[2]) end
if count == expected then
  count = redis.call('hincrby', KEYS[1], ARGV[2], 1)
end
redis.call('pexpire', KEYS[1], ARGV[1])
if KEYS[2] then return {1, count, redis.call('get', KEYS[2])} end
return {1, count}
