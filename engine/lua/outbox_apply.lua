-- Apply one stock_outbox row (a return_to_stock refund) to Redis exactly once.
-- The applied set makes a replay harmless; the epoch fences a relay that read the row
-- before a rebuild (the rebuild already counted the revoked coupon).
-- KEYS: 1 stock, 2 claimed, 3 epoch, 4 applied (set of outbox ids)
-- ARGV: 1 outbox id, 2 user_id, 3 epoch
-- Returns 'applied' | 'duplicate' | 'fenced' | 'not_initialised'
if not redis.call('GET', KEYS[1]) then
  return 'not_initialised'
end
if redis.call('GET', KEYS[3]) ~= ARGV[3] then
  return 'fenced'
end
if redis.call('SADD', KEYS[4], ARGV[1]) == 0 then
  return 'duplicate'
end
redis.call('INCR', KEYS[1])
if redis.call('HINCRBY', KEYS[2], ARGV[2], -1) <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[2])
end
return 'applied'
