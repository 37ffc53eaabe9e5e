-- Begin a rebuild of a template's claim state (docs/ARCHITECTURE.md, "Rebuild and fencing").
-- A rebuild writes the `claimed` hash in slices, so that Redis is never blocked for long
-- whatever the number of shoppers; until its last slice lands and Postgres committed its
-- epoch, nothing may be admitted: the stock key goes (claims answer `not_initialised`).
-- The staging hash is named by the rebuild's epoch, so a slice of a rebuild that died late
-- cannot land in another's; the TTLs clear what a dead rebuild left.
-- KEYS: 1 stock, 2 staging (the `claimed` hash being built), 3 rebuilding (the marker)
-- ARGV: 1 epoch, 2 ttl of the staging hash and the marker (s)
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[3], ARGV[1], 'EX', ARGV[2])
redis.call('UNLINK', KEYS[2])
-- The built mark holds -1 until the rebuild seals the staging hash with its stock.
redis.call('HSET', KEYS[2], '', -1)
redis.call('EXPIRE', KEYS[2], ARGV[2])
return 1
