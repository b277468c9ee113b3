-- prelude/renew_held.lua - held(name, field) of the renewals (renew.lua,
-- renew_node.lua): 1 for our hold (HEXISTS of the field, then of "mode":
-- commands the least-privilege ACL of docs/failure-modes.md has); 0 when the
-- field is gone or the hash is a read-write lock's (the field is a reader's,
-- not our hold); an error table for a key the server refuses (WRONGTYPE, or
-- not served here).

local function held(name, field)
  local got = redis.pcall('hexists', name, field)
  if type(got) == 'table' or got == 0 then return got end
  return 1 - redis.call('hexists', name, 'mode')
end
