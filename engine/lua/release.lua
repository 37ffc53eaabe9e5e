-- Compensate a claim that will never be persisted (a duplicate found by the unique
-- constraint once the idempotency window has passed). Exactly once: only the caller that
-- removes the pending intent gives the stock and the quota back, and only within the epoch
-- the claim was made in (after a rebuild, the rebuild's count already excludes it).
-- KEYS: 1 stock, 2 claimed, 3 pending, 4 epoch, 5 outcomes (`outcomes.lua`)
-- ARGV: 1 request_id, 2 user_id, 3 epoch, 4 coupon_id
-- Returns 1 when stock and quota were returned, 0 otherwise.
if not redis.call('GET', KEYS[1]) then
  return 0
end
if redis.call('GET', KEYS[4]) ~= ARGV[3] then
  return 0
end
local intent = redis.call('HGET', KEYS[3], ARGV[1])
if not intent or string.sub(intent, 1, #ARGV[4] + 1) ~= ARGV[4] .. '|' then
  -- Not this coupon's intent (already settled, or a newer grant under the same id).
  return 0
end
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('INCR', KEYS[1])
if redis.call('HINCRBY', KEYS[2], ARGV[2], -1) <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[2])
end
local outcome = redis.call('HGET', KEYS[5], ARGV[1])
if outcome and string.sub(outcome, 1, #ARGV[4] + 1) == ARGV[4] .. '|' then
  redis.call('HDEL', KEYS[5], ARGV[1])
end
return 1
