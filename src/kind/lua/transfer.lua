-- TRANSFER KEYS[1] = name, fenced lock: KEYS[2] = its token counter
--          ARGV[1] = releasing owner field, ARGV[2] = receiving owner field,
--          ARGV[3] = the receiver's lease ms
-- The in-process hand-off: the releasing owner's last hold becomes the
-- receiver's first, in one step, with nothing published (the receiver is a
-- thread of the same client, told directly).
-- -> 1  moved (the TTL is set to the receiver's lease), or an earlier send of
--       this same call already moved it (the receiver has exactly 1 hold and
--       the releaser none: the receiver cannot have acted on it yet, it is
--       still waiting for this reply).
--    0  the releasing owner holds nothing: nothing changed.
--    Fenced: {1, token} instead of 1 -- the receiver's acquisition INCRs the
--    counter (first write), a re-send answers it as it is.
--    As for RELEASE, more holds than the caller believes (a lost acquisition
--    of its own) are given up with the rest.
--    NOTALOCK: the hash is a read-write lock's (a "mode" field), untouched.
-- The receiver's field is written before the releaser's goes, so the key
-- never stops existing: on a Cluster node whose slot is migrating, a script
-- that touches a key it just deleted is refused ("non local key").

-- #include lock
local function moved()
  if KEYS[2] then return {1, redis.call('get', KEYS[2])} end
  return 1
end
-- #include not_rw
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  if redis.call('hget', KEYS[1], ARGV[2]) == '1' then
    return moved()
  end
  return 0
end
local no = refused('hset', KEYS[1], ARGV[2], '1') or refused('pexpire', KEYS[1], ARGV[3])
if no then return no end
if KEYS[2] then redis.call('incr', KEYS[2]) end
redis.call('hset', KEYS[1], ARGV[2], 1)
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[3])
return moved()
