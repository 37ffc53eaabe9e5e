-- The recorded outcomes of claim requests (docs/ARCHITECTURE.md, "Claim"), prepended to the
-- scripts that read or write them. Two hashes (request id -> outcome) take turns instead of
-- a key per request with a TTL: a fresh claim's own key would not exist yet, and while a
-- template's cluster slot migrates Redis answers every script naming a missing key TRYAGAIN,
-- so no claim would be served until the migration ended. Hash fields have no TTL before
-- Redis 7.4: the current hash takes the new outcomes; once it is `ttl` old, the other one is
-- emptied and takes over. An outcome is thus kept at least `ttl`, at most twice that.
-- The empty field (never a request id) holds each hash's start (ms); a missing hash counts
-- as started at 0, so the next writer starts it.
local function outcome_hashes(a, b, now, ttl)
  local at_a = tonumber(redis.call('HGET', a, '') or '0')
  local at_b = tonumber(redis.call('HGET', b, '') or '0')
  local current, other, at = a, b, at_a
  if at_b > at_a then
    current, other, at = b, a, at_b
  end
  if now - at >= ttl then
    redis.call('UNLINK', other)
    redis.call('HSET', other, '', now)
    current, other = other, current
  end
  return current, other
end

-- The outcome recorded for request `id`, and the hash that holds it.
local function outcome_of(a, b, id)
  local v = redis.call('HGET', a, id)
  if v then
    return v, a
  end
  v = redis.call('HGET', b, id)
  if v then
    return v, b
  end
  return nil, nil
end

