-- Acquire a lock and issue its fencing token.
--
-- KEYS[1]  the lock key, e.g. "{lock:orders:42}"
-- KEYS[2]  the fence key in the same hash slot, e.g. "{lock:orders:42}:fence"
-- ARGV[1]  the owner token (unique per acquisition)
-- ARGV[2]  the ttl in milliseconds
-- ARGV[3]  the fencing mode: "none", "counter" or "time-mixed"
--
-- Returns {1, fence} when granted, where fence is a decimal string, or
-- {0, pttl} when another owner holds the key (pttl in ms, -1 if it has none).
--
-- Lua 5.1 numbers are doubles: every integer here stays below 2^53
-- (a microsecond Unix timestamp is about 1.8e15), and fences travel as
-- integer strings formatted with %.0f, never through tostring (which
-- would print 1.8e+15).
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  -- A retry after an outcome we never saw: the key is already ours.
  -- Refresh the ttl; validity counts from this send (timing rule 1).
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, redis.call('GET', KEYS[2]) or '0'}
end
if current then
  return {0, redis.call('PTTL', KEYS[1])}
end

local fence = '0'
if ARGV[3] == 'counter' then
  -- A plain counter lives in the replicated store: a failover that loses
  -- the last INCR hands the same number out twice.
  fence = string.format('%.0f', redis.call('INCR', KEYS[2]))
elseif ARGV[3] == 'time-mixed' then
  -- max(stored + 1, server time in us): monotonic across a failover as
  -- long as the nodes' clocks disagree by less than the failover takes.
  local time = redis.call('TIME')
  local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
  local stored = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  local next_fence = stored + 1
  if now_us > next_fence then
    next_fence = now_us
  end
  fence = string.format('%.0f', next_fence)
  redis.call('SET', KEYS[2], fence)
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, fence}
