-- prelude/release_find.lua - the start of every release (KEYS[1] the lock,
-- ARGV[1] the owner field): `count` is the owner's hold count; not ours ->
-- nil (NOTALOCK for a hash that is not a lock). The plain and fair releases
-- include not_rw next (a read-write lock's reader has the same field); the
-- read-write releases do not (their hashes have "mode", and a writer's
-- field ends in ":write"). release_count follows.

local count = redis.call('hget', KEYS[1], ARGV[1])
if count == false then
  if redis.call('exists', KEYS[1]) == 1 and not_a_lock(KEYS[1]) then
    return not_a_lock_error(KEYS[1])
  end
  return nil
end
