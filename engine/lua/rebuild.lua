-- Replace a template's claim state with counts taken from Postgres (docs/ARCHITECTURE.md,
-- "Rebuild and fencing").
-- Called while the rebuilder holds the template's exclusive advisory lock in Postgres, so
-- no claim of an older epoch can be persisted between the count and this write.
-- KEYS: 1 stock, 2 claimed, 3 pending, 4 epoch, 5 applied
-- ARGV: 1 stock, 2 epoch, then pairs user_id, count
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5])
-- The empty field (never a user id) marks the hash as built: an evicted or lost `claimed`
-- hash would otherwise read as "nobody holds anything" and let users past their limit.
redis.call('HSET', KEYS[2], '', 0)
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('SET', KEYS[4], ARGV[2])
-- Stock last: its presence is what tells claims the template is initialised.
redis.call('SET', KEYS[1], ARGV[1])
return 1
