-- RW_READ_HOLDS  KEYS[1] = name, ARGV[1] = reader field. Read-only.
-- -> the field's read hold count if a key of its holds lives (the latest is
--    read first: one EXISTS for a live hold), else 0: a field whose keys are
--    all gone (leases ran out while other readers kept the hash) is no
--    hold. The read lock's hold count and "held" (rlock_hold_count,
--    rlock_is_held_by_current_thread); WRONGTYPE for a key that is not a
--    hash.

-- #include rw_keys
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1])) or 0
for k = count, 1, -1 do
  if redis.call('exists', hold_key(KEYS[1], ARGV[1], k)) == 1 then return count end
end
return 0
