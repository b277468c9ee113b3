-- prelude/keys_as_args.lua - keys passed as arguments (net/net.h,
-- RLOCK__KEYS_AS_ARGS: a script of several keys sent to a slot's importing
-- node declares KEYS[1] alone) are put back where the script reads them.
-- First in every script of several keys.

if ARGV[1] == 'rlock:keys-as-args' then
  local n = tonumber(ARGV[2])
  for i = 1, n do KEYS[1 + i] = ARGV[2 + i] end
  for _ = 1, n + 2 do table.remove(ARGV, 1) end
end
