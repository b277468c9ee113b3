-- prelude/renew_node_loop.lua - the end of every RENEW_NODE-like script:
-- renew(i, name, field) for each lock of RENEW_NODE's arguments (KEYS[1]
-- with ARGV[2], then the pairs from ARGV[3] on), then the results.

renew(1, KEYS[1], ARGV[2])
for i = 2, #ARGV / 2 do
  renew(i, ARGV[2 * i - 1], ARGV[2 * i])
end
return result
