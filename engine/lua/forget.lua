-- Forget the recorded outcome of a claim request only if it is still this coupon's
-- (compare-and-delete): a newer grant under the same request id keeps its record.
-- KEYS: 1 req:<request_id>. ARGV: 1 coupon_id. Returns 1 if deleted.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '|' then
  return redis.call('DEL', KEYS[1])
end
return 0
