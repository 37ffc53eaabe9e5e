-- The recorded outcomes of claim requests (docs/ARCHITECTURE.md, "Claim"), prepended to the
-- scripts that write them. One hash (request id -> outcome) instead of a key per request
-- with a TTL: a fresh claim's own key would not exist yet, and while a template's cluster
-- slot migrates Redis answers every script naming a missing key TRYAGAIN, so no claim would
-- be served until the migration ended. Hash fields have no TTL before Redis 7.4, so each
-- writer asked to (the claim script: every 16th grant) sweeps some fields: the empty field
-- (never a request id) holds where the sweep stands (an HSCAN cursor), and a field whose
-- outcome is `ttl` old goes. 32 fields every 16 grants outpace the one each adds; sweeping
-- at every grant cost a third of the script's rate. The hash itself is never deleted: a
-- script cannot write a missing key of a migrating slot. An outcome is kept at least `ttl`.
local function remember_outcome(outcomes, id, outcome, now, ttl, sweep)
  redis.call('HSET', outcomes, id, outcome)
  if not sweep then
    return
  end
  local page = redis.call('HSCAN', outcomes, redis.call('HGET', outcomes, '') or '0',
    'COUNT', 32)
  local fields = page[2]
  for i = 1, #fields, 2 do
    -- Every outcome ends with the time it was recorded (ms).
    local at = tonumber(string.match(fields[i + 1], '|(%d+)$'))
    if fields[i] ~= '' and at and now - at >= ttl then
      redis.call('HDEL', outcomes, fields[i])
    end
  end
  redis.call('HSET', outcomes, '', page[1])
end

