-- RW_READ_RELEASE  KEYS[1] = name
--   ARGV[1] = reader field, ARGV[2] = expected count, ARGV[3] = channel,
--   ARGV[4] = 'publish' or 'spublish'
-- -> RELEASE's answers (release.lua): nil (not ours: nothing changed),
--    the remaining count, or {count} (stale). The released holds' keys go.
--    A field whose hold keys are all gone (their leases ran out while other
--    readers kept the hash) is no hold: it is taken out of the hash (and
--    the lock with it, as by a last read hold, when it was the only reader)
--    and the answer is nil. Found from the DEL of the released keys'
--    reply, with the keys left read only when that DEL deleted nothing: the
--    common path reads no more keys than before.
--    In write mode (the writer's own read holds) the lock and its TTL stay
--    as they are (Redisson re-arms the TTL there too, which can cut the
--    write hold's lease short). In read mode the last read hold deletes the
--    lock and publishes "0" (to one waiter per client: a writer); otherwise
--    the hash must keep living at least as long as the longest hold key left
--    (else a live reader's hold would vanish with it), and should not live
--    much longer (else readers that died hold writers back). Every acquire
--    and renewal sets the hash's TTL to at least its key's (max(PTTL,
--    lease), in the same script), so the hash lives as long as its longest
--    key:
--    - the TTL stays if another reader's key has two thirds of it left
--      (the common case: readers with the same lease; a watchdog reader's
--      key never has less than two thirds of its lease left): the keys of
--      three fields drawn at random (HRANDFIELD, Redis >= 6.2), which
--      include another reader whenever there is one, are looked at first;
--    - a release whose keys all end more than 10 ms before the hash was
--      not that longest one: the TTL stays, no other key is read;
--    - else the others' keys are read until one has two thirds of the TTL;
--    - else the TTL becomes the longest key left, all read (Redisson's rule,
--      which Redisson applies at every release: O(readers)), and with none
--      left the lock is deleted and "0" published (its readers died).
--    So after the last live reader leaves, the lock outlives the longest
--    key left by at most half that key's time (Redisson: not at all), or,
--    when the release was not the longest, up to the hash's TTL.

-- #include rw_lock
-- The read holds of a field whose value is value: `mine` for me (those left after this
-- release), none for "mode" and a writer's field.
local function reads_of(field, value, me, mine)
  if string.sub(field, -6) == ':write' then return 0 end
  if field == me then return mine end
  return tonumber(value) or 0
end
-- The PTTL of the latest read hold key of a field, -2 when it has none.
local function latest_key(name, field, value, me, mine)
  local count = reads_of(field, value, me, mine)
  if count < 1 then return -2 end
  return redis.call('pttl', hold_key(name, field, count))
end
-- Whether one of three fields drawn at random has a key of `enough` or more. Three
-- distinct fields of a read lock's hash hold a reader other than me whenever one is
-- there: only "mode" and my own field are not. Before 6.2 (no HRANDFIELD): no.
local function sampled_enough(name, me, mine, enough)
  local sample = redis.pcall('hrandfield', name, '3', 'withvalues')
  if type(sample) ~= 'table' or sample.err then return false end
  for i = 1, #sample, 2 do
    if latest_key(name, sample[i], sample[i + 1], me, mine) >= enough then return true end
  end
  return false
end
-- The longest PTTL among the read holds' keys, stopping at one of `enough` or more; -2
-- when no key is left.
local function longest_key(name, me, mine, enough)
  local longest = -2
  local hash = redis.call('hgetall', name)
  for i = 1, #hash, 2 do
    for k = reads_of(hash[i], hash[i + 1], me, mine), 1, -1 do
      longest = math.max(longest, redis.call('pttl', hold_key(name, hash[i], k)))
      if longest >= enough then return longest end
    end
  end
  return longest
end
-- Whether a key of my holds 1..left lives (checked only once the released keys were
-- found gone: never on the common path).
local function live_key(name, me, left)
  for k = left, 1, -1 do
    if redis.call('exists', hold_key(name, me, k)) == 1 then return true end
  end
  return false
end
local me, expected = ARGV[1], tonumber(ARGV[2])
local mode = redis.call('hget', KEYS[1], 'mode')
local count = mode and tonumber(redis.call('hget', KEYS[1], me))
if not mode or not count then
  if redis.call('exists', KEYS[1]) == 1 and not_a_lock(KEYS[1]) then
    return not_a_lock_error(KEYS[1])
  end
  return nil
end
if count == expected - 1 then return count end
if count < expected then return {count} end
local left, keys = math.max(expected - 1, 0), {}
for k = count, left + 1, -1 do keys[#keys + 1] = hold_key(KEYS[1], me, k) end
-- What becomes of the hash: free (deleted), a new TTL, or as it is (nil).
local free, ttl = false, nil
if mode ~= 'write' then
  free = left == 0 and redis.call('hlen', KEYS[1]) == 2
end
if mode ~= 'write' and not free then
  local now = redis.call('pttl', KEYS[1])
  local enough = math.floor(now * 2 / 3)
  local gone = -2
  if not sampled_enough(KEYS[1], me, left, enough) then
    for i = 1, #keys do gone = math.max(gone, redis.call('pttl', keys[i])) end
  end
-- Within 10 ms counts as the longest: Redis 7.0 reads its clock at each PTTL, so a key
-- that ends with the hash reads a millisecond or two short when the clock ticks between
-- the calls (here, or between the SET and PEXPIRE of its acquire).
  if gone + 10 >= now then
    local longest = longest_key(KEYS[1], me, left, enough)
    if longest <= 0 then
      free = true
    elseif longest < enough then
      ttl = longest
    end
  end
end
local no
if free then
  no = refused(ARGV[4], ARGV[3], '0') or refused('del', KEYS[1], unpack(keys))
else
  no = refused('del', unpack(keys))
    or (left > 0 and refused('hset', KEYS[1], me, int(left)))
    or (left == 0 and refused('hdel', KEYS[1], me))
    or (ttl and refused('pexpire', KEYS[1], int(ttl)))
end
if no then return no end
if free then
  redis.call(ARGV[4], ARGV[3], '0')
-- Only the hash deleted: no key of mine was left (free with left > 0 means the keys
-- left..1 are gone too): my field was no hold.
  if redis.call('del', KEYS[1], unpack(keys)) == 1 then return nil end
  return left
end
if redis.call('del', unpack(keys)) == 0 and not live_key(KEYS[1], me, left) then
-- My field is no hold (the DEL deleted nothing: Redis is unchanged so far). It goes,
-- and the TTL rule's answer stands; with left > 0 the field was not going, and if it
-- was the only reader, the lock goes as a last read hold's would.
  if left > 0 and mode ~= 'write' and redis.call('hlen', KEYS[1]) == 2 then
    no = refused(ARGV[4], ARGV[3], '0') or refused('del', KEYS[1])
    if no then return no end
    redis.call(ARGV[4], ARGV[3], '0')
    redis.call('del', KEYS[1])
    return nil
  end
  no = left > 0 and refused('hdel', KEYS[1], me)
  if no then return no end
  redis.call('hdel', KEYS[1], me)
  if ttl then redis.call('pexpire', KEYS[1], int(ttl)) end
  return nil
end
if left > 0 then
  redis.call('hset', KEYS[1], me, int(left))
else
  redis.call('hdel', KEYS[1], me)
end
if ttl then redis.call('pexpire', KEYS[1], int(ttl)) end
return left
