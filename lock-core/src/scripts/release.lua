-- Release a lock, but only for its owner, and wake the waiters.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token
-- ARGV[2]  the channel waiters subscribe to
--
-- Returns 1 when the key was deleted, 0 when it was missing or belonged to
-- another owner, whose key is left untouched.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
return 0
