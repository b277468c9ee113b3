-- RELEASE  KEYS[1] = name
--          ARGV[1] = owner field, ARGV[2] = expected count, ARGV[3] = channel,
--          ARGV[4] = 'publish' or 'spublish' (sharded pub/sub)
-- -> nil      the caller holds nothing: nothing changed, nothing published.
--    n >= 0   the remaining count (0 = "0" published and deleted), or, when
--             Redis has expected - 1, an earlier send of this same call
--             already applied and n is reported unchanged.
--    {count}  Redis has fewer holds than the caller believes (stale): nothing
--             changed; the caller re-bases on count and sends again.
--    NOTALOCK the key is a hash that is not a lock; NOPERM before any change.
--    More holds than expected can only come from an acquisition of ours
--    whose reply was lost (the call returned an error): the caller's view
--    wins, the count becomes expected - 1, so an error never leaves an extra
--    hold behind. The TTL is left alone on a partial release (the lease runs
--    from the last acquisition).

-- #include lock
-- #include release_find
-- #include not_rw
-- #include release_count
local no = refused(ARGV[4], ARGV[3], '0') or refused('del', KEYS[1])
if no then return no end
redis.call(ARGV[4], ARGV[3], '0')
redis.call('del', KEYS[1])
return 0
