-- prelude/not_rw.lua - the guard of the plain, fenced and fair scripts for a
-- hash that has their owner field (KEYS[1] the lock): a read-write lock's
-- hash (a "mode" field) has the same "<id>:<thread>" field for a reader, so
-- finding one's own field does not make the hash one's own kind's.
-- NOTALOCK, untouched. Only on the paths that found the field: a hash
-- without it is checked by not_a_lock, whose pattern "mode" fails.

if redis.call('hexists', KEYS[1], 'mode') == 1 then return not_a_lock_error(KEYS[1]) end
