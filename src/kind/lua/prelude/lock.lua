-- prelude/lock.lua - what every script that writes a lock starts with: its
-- keys put back (keys_as_args), the test that a hash is a lock (not_a_lock,
-- not_a_lock_error), and the ACL questions asked before the first write
-- (refused, later_refused).
--
-- Every mutating script keeps one rule: an error return means Redis is
-- unchanged. Redis does not roll a script back, so a script checks, before
-- its first write, everything that could make a later step fail: that the
-- key is a lock (not_a_lock), and that the ACL lets the caller run each
-- later write (redis.acl_check_cmd, Redis >= 7.0; older servers have no
-- per-command channel or key rules that could refuse half a script). A
-- PUBLISH goes before the DEL it announces: a refused PUBLISH (no channel
-- permission) then fails the unlock before anything changed, and the
-- message still reaches subscribers after the script, when the key is gone.
--
-- A lock, ours or Redisson's, is a hash with a TTL whose fields are all
-- "<id>:<thread>". A hash without a TTL, or with another field, is somebody's
-- data under the same name: NOTALOCK, untouched. (rw_lock.lua shadows
-- not_a_lock with the read-write lock's.)

-- #include keys_as_args
local function not_a_lock(key)
  if redis.call('pttl', key) == -1 then return true end
  for _, field in ipairs(redis.call('hkeys', key)) do
    if not string.find(field, '^.+:%d+$') then return true end
  end
  return false
end
local function not_a_lock_error(key)
  return redis.error_reply('NOTALOCK the hash ' .. key .. ' has no TTL or a field that is ' .. 'not <id>:<thread>: not a lock, left untouched')
end
-- #include refused
-- #include later_refused
