-- prelude/reenter.lua - the re-entry the acquires with a count in hand share
-- (inside "if count > 0 then"; "-- #include reenter field=NAME"): Redis has
-- `count` holds of the owner field in the local NAME and the caller
-- believes `expected`: equal -> one more (HINCRBY); one more already -> an
-- earlier send of this call applied; else the caller's belief is stale:
-- {2, count}, nothing changed. `count` is the owner's count after it.

  if count == expected then
    count = redis.call('hincrby', KEYS[1], @field@, 1)
  elseif count ~= expected + 1 then
    return {2, count}
  end
