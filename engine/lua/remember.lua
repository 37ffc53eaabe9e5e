-- Record the outcomes of claim requests outside the claim script: a rebuild restores the
-- persisted claims' outcomes under its epoch (and the unscripted mutants record theirs).
-- KEYS: 1 outcomes (`outcomes.lua`). ARGV: 1 now (ms), 2 how long an outcome is remembered
-- (ms), then pairs request_id, outcome. Returns how many were written.
local n = 0
for i = 3, #ARGV, 2 do
  -- One sweep per call, at its last write.
  remember_outcome(KEYS[1], ARGV[i], ARGV[i + 1], tonumber(ARGV[1]), tonumber(ARGV[2]),
    i + 1 == #ARGV)
  n = n + 1
end
return n
