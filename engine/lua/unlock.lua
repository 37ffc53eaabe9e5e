-- Release a lock only if we still hold it (compare-and-delete). A plain DEL would delete
-- the next holder's lock after ours expired (defect D2; docs/ARCHITECTURE.md, "Mutants").
-- KEYS: 1 lock key. ARGV: 1 token. Returns 1 if released, 0 if the lock was not ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
