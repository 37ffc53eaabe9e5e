-- Publish a rebuild whose epoch Postgres committed (docs/ARCHITECTURE.md, "Rebuild and
-- fencing"): the staged `claimed` hash replaces the old one, then epoch and stock are set.
-- O(1) in the number of shoppers: the old hashes are freed in the background (UNLINK).
-- Any server may publish a committed rebuild its rebuilder did not get to.
-- KEYS: 1 stock, 2 claimed, 3 pending, 4 epoch, 5 applied, 6 staging, 7 rebuilding,
--       8 outcomes (`outcomes.lua`)
-- ARGV: 1 epoch
-- Returns 1 published | 0 not this epoch's rebuild (superseded or done) | -1 not sealed
if redis.call('GET', KEYS[7]) ~= ARGV[1] then
  return 0
end
local stock = tonumber(redis.call('HGET', KEYS[6], '') or '-1')
if stock < 0 then
  return -1
end
redis.call('UNLINK', KEYS[2], KEYS[3], KEYS[5])
-- The empty field (never a user id) marks the hash as built: an evicted or lost `claimed`
-- hash would otherwise read as "nobody holds anything" and let users past their limit.
redis.call('HSET', KEYS[6], '', 0)
redis.call('RENAME', KEYS[6], KEYS[2])
redis.call('PERSIST', KEYS[2])
-- Every key a claim names must exist before it runs (`outcomes.lua` says why): the pending
-- hash keeps an empty field (never a request id), and the outcomes (kept across a rebuild:
-- the claim compares their epochs) are started with their sweep's cursor if missing.
redis.call('HSET', KEYS[3], '', 0)
redis.call('HSETNX', KEYS[8], '', 0)
redis.call('DEL', KEYS[7])
redis.call('SET', KEYS[4], ARGV[1])
-- Stock last: its presence is what tells claims the template is initialised.
redis.call('SET', KEYS[1], stock)
return 1
