-- Atomic claim (docs/ARCHITECTURE.md, "Claim"): idempotency check, stock check, per-user
-- limit, deduction, pending intent and recorded outcome, all in one step on one cluster slot.
-- Every key it names exists once the template is built, so it is served while the template's
-- cluster slot migrates, until the first of them moves (`outcomes.lua` says why).
-- KEYS: 1 stock, 2 claimed (hash user -> count), 3 outcomes (hash request id -> outcome,
--       `outcomes.lua`), 4 pending (hash), 5 epoch
-- ARGV: 1 request_id, 2 user_id, 3 per_user_limit, 4 new coupon_id, 5 now (ms),
--       6 how long an outcome is remembered (s)
-- Returns {'ok', coupon_id, remaining, epoch, claimed_at_ms, fresh, pending}
--      or {'stock_empty'} | {'user_limit'} | {'not_initialised'} | {'request_conflict'}
local stock = redis.call('GET', KEYS[1])
local epoch = redis.call('GET', KEYS[5])
if not stock or not epoch or redis.call('HEXISTS', KEYS[2], '') == 0 then
  -- Absent is NOT zero: the keys were lost (or evicted; the empty field marks a built
  -- `claimed` hash) and must be rebuilt from Postgres.
  return {'not_initialised'}
end
local prior = redis.call('HGET', KEYS[3], ARGV[1])
if prior then
  local coupon, user, remaining, prior_epoch, at =
    string.match(prior, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  if prior_epoch == epoch then
    if user ~= ARGV[2] then
      return {'request_conflict'}
    end
    local pending = redis.call('HEXISTS', KEYS[4], ARGV[1])
    return {'ok', coupon, tonumber(remaining), tonumber(prior_epoch), tonumber(at), 0, pending}
  end
  -- An outcome recorded before a rebuild: Postgres decides whether it still stands.
  redis.call('HDEL', KEYS[3], ARGV[1])
end
if tonumber(stock) <= 0 then
  return {'stock_empty'}
end
local held = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if held >= tonumber(ARGV[3]) then
  return {'user_limit'}
end
local remaining = redis.call('DECR', KEYS[1])
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
redis.call('HSET', KEYS[4], ARGV[1], ARGV[4] .. '|' .. ARGV[2] .. '|' .. epoch .. '|' .. ARGV[5])
remember_outcome(KEYS[3], ARGV[1],
  ARGV[4] .. '|' .. ARGV[2] .. '|' .. remaining .. '|' .. epoch .. '|' .. ARGV[5],
  tonumber(ARGV[5]), tonumber(ARGV[6]) * 1000, remaining % 16 == 0)
return {'ok', ARGV[4], remaining, tonumber(epoch), tonumber(ARGV[5]), 1, 1}
