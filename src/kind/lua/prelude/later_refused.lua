-- prelude/later_refused.lua - later_refused(...): refused(...) for a command
-- that the hold's unlock or renewal will run, asked by an acquire before it
-- takes a first hold (a re-entry holds already: refusing it would give
-- nothing back): a user who may lock but not unlock (no PUBLISH on the
-- channel, no DEL on the key) is refused at once with nothing held, not
-- after its critical section with a lock it cannot give back. Each acquire
-- asks it for what its kind's release and renewal scripts run (one key's
-- and one channel's rules; the fair lock's next head's channel is asked as
-- the caller's own).

local function later_refused(...)
  if redis.acl_check_cmd == nil or redis.acl_check_cmd(...) then return nil end
  return redis.error_reply('NOPERM this user has no permissions to run ' .. select(1, ...)
    .. ' on ' .. select(2, ...) .. ', which the unlock or renewal would need: not taken')
end
