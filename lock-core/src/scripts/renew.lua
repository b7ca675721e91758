-- Extend a lock, but only for its owner.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token
-- ARGV[2]  the new ttl in milliseconds
--
-- Returns 1 when the ttl was reset, 0 when the key is missing or belongs
-- to another owner (the caller has lost the lock).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
