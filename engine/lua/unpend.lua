-- Remove persisted intents from the pending hash, each only if it is still the intent of
-- the given coupon: a newer grant under the same request id must not lose its intent.
-- KEYS: 1 pending. ARGV: pairs request_id, coupon_id. Returns how many were removed.
local removed = 0
for i = 1, #ARGV, 2 do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if v and string.sub(v, 1, #ARGV[i + 1] + 1) == ARGV[i + 1] .. '|' then
    removed = removed + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return removed
