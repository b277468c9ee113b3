-- RENEW_NODE  KEYS[1] = a name, ARGV[1] = lease ms, ARGV[2] = its owner field,
--             ARGV[2i - 1], ARGV[2i] = name and owner field of lock i >= 2
-- -> one 1/0/-1 per lock: 1 and 0 as RENEW; -1 the key is not served here
--    (its slot moved, or is migrating and the key left): renewed alone after.
-- For a Cluster: the locks of many slots of one node in one script (RENEW
-- takes one slot's). Only KEYS[1] is declared, so the command passes the
-- one-slot check and is routed by it; a script without a shebang may touch
-- keys of other slots if this node serves them (Redis 6 and 7 alike), and a
-- key it does not serve is an error that pcall turns into -1.

-- #include renew_held
local result = {}
local function renew(i, name, field)
  local answer = held(name, field)
  if answer == 1 then
    redis.call('pexpire', name, ARGV[1])
    result[i] = 1
  elseif type(answer) == 'table' and not string.find(answer['err'], 'WRONGTYPE', 1, true) then
    result[i] = -1
  else
    result[i] = 0
  end
end
-- #include renew_node_loop
