-- RENEW    KEYS = names, ARGV[1] = lease ms, ARGV[1 + i] = owner field of KEYS[i]
-- -> one 1/0 per key: 1 = our field is there and the TTL was reset; 0 = gone
--    (never re-created). A key of another type counts as gone without failing
--    the whole batch, and so does a read-write lock's hash (a "mode" field:
--    the field is a reader's, not our hold). One write per key: nothing to
--    check first.

-- #include renew_held
local result = {}
for i = 1, #KEYS do
  if held(KEYS[i], ARGV[i + 1]) == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
