-- RW_RENEW  KEYS = names (one lock's readers together), ARGV as RENEW's.
-- A hold key on another node (a migration moved it, or the name: its slot
-- is migrating) is TRYAGAIN for the whole script: the watchdog renews that
-- lock alone, and the net moves its keys together first (net/exec.c). The
-- holds renewed before are renewed again then, harmlessly.

-- #include rw_renew
for i = 1, #KEYS do
  renew(i, KEYS[i], ARGV[i + 1])
  if result[i] == -1 then
    return redis.error_reply('TRYAGAIN a key of ' .. KEYS[i] .. ' is on another node')
  end
end
return result
