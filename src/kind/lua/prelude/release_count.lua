-- prelude/release_count.lua - after release_find (ARGV[2] the holds the
-- caller believes it has): already released (a re-send) -> the count;
-- fewer than expected -> {count} (stale); more than one -> one fewer. What
-- follows runs only for the last hold (count == expected == 1).

count = tonumber(count)
local expected = tonumber(ARGV[2])
if count == expected - 1 then
  return count
end
if count < expected then
  return {count}
end
if expected > 1 then
  redis.call('hset', KEYS[1], ARGV[1], expected - 1)
  return expected - 1
end
