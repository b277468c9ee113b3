-- FENCED_SET  KEYS[1] = key, KEYS[2] = its fence key
--             ARGV[1] = token (decimal, >= 1, no leading zero), ARGV[2] = value
-- -> {1, token}    written: SET key value, and the fence raised to token
--                  (equal tokens are accepted: a holder may write again).
--    {0, highest}  token < the highest seen: nothing written.
--    NOTAFENCE     the fence key holds something that is not a token;
--                  WRONGTYPE if it is not a string; NOPERM: both checked
--                  before any write.
-- Tokens are compared as decimal strings (shorter is smaller, then byte
-- order), so every 64-bit token compares exactly: a Lua number would round
-- those above 2^53.

-- #include keys_as_args
-- #include refused
local function below(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local highest = redis.call('get', KEYS[2])
if highest then
  if not string.find(highest, '^[1-9]%d*$') or #highest > 19 then
    return redis.error_reply('NOTAFENCE the key ' .. KEYS[2] .. ' holds no fencing token: '
      .. 'nothing written')
  end
  if below(ARGV[1], highest) then return {0, highest} end
end
local no = refused('set', KEYS[1], ARGV[2]) or refused('set', KEYS[2], ARGV[1])
if no then return no end
redis.call('set', KEYS[1], ARGV[2])
if highest ~= ARGV[1] then redis.call('set', KEYS[2], ARGV[1]) end
return {1, ARGV[1]}
