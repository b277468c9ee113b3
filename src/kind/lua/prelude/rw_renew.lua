-- prelude/rw_renew.lua - the renewal of both kinds of read-write hold (the
-- read and write renewers of rw.c; rw_renew.lua, rw_renew_node.lua). For
-- readers, Redisson's ReadLockTask with a result per hold: if its field is
-- there, every key of its holds (count .. 1) gets the lease again; 1
-- renewed, 0 gone (its field, or a key of one of its holds: that hold's
-- lease ran out, and another reader's unlock may free the lock under it),
-- -1 not served here (a Cluster slot moved or moving). A writer field
-- ("...:write") has no keys: 1 if it is there. The hash gets TTL max(its
-- PTTL, lease) once for each run of one lock's holds (the watchdog sends
-- them together): readers of one lock in one client share that work.
-- Nothing is ever re-created. Unlike Redisson (which sets the hash's TTL to
-- the lease, for a reader as for a writer), a renewal never shortens it: a
-- reader with a longer lease keeps its lock -- also the read hold of a
-- writer that downgrades, after its write unlock.

-- #include rw_keys
local result, renewed = {}, nil
local function renew_reader(name, field)
  local count = redis.pcall('hget', name, field)
  if type(count) == 'table' then
    return string.find(count['err'], 'WRONGTYPE', 1, true) and 0 or -1
  end
  count = tonumber(count)
  if count == nil then return 0 end
  if string.sub(field, -6) == ':write' then return 1 end
  for k = count, 1, -1 do
    local armed = redis.pcall('pexpire', hold_key(name, field, k), ARGV[1])
    if type(armed) == 'table' then return -1 end
    if armed == 0 then return 0 end
  end
  return 1
end
local function renew(i, name, field)
  result[i] = renew_reader(name, field)
  if result[i] == 1 and name ~= renewed then
    outlive(name, tonumber(ARGV[1]), ARGV[1])
    renewed = name
  end
end
