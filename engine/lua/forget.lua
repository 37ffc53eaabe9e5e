-- Forget the recorded outcome of a claim request only if it is still this coupon's
-- (compare-and-delete): a newer grant under the same request id keeps its record.
-- KEYS: 1 outcomes (hash request id -> outcome). ARGV: 1 request_id, 2 coupon_id.
-- Returns 1 if deleted.
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, 1, #ARGV[2] + 1) == ARGV[2] .. '|' then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
