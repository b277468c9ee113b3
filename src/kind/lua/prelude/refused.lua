-- prelude/refused.lua - refused(command, args...): nil if the ACL lets the
-- caller run it, else the NOPERM error to return before the script's first
-- write. Also for scripts that write no lock (fenced_set.lua).

local function refused(...)
  if redis.acl_check_cmd == nil or redis.acl_check_cmd(...) then return nil end
  return redis.error_reply('NOPERM this user has no permissions to run ' .. select(1, ...)
    .. ' on ' .. select(2, ...) .. ' (rlock checked before changing anything)')
end
