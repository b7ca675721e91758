-- The lock family's shared prelude, put in front of fair.lua, rwlock.lua
-- and semaphore.lua (each is sent to Redis as one script: prelude + body).
--
-- The server clock, read once per call (Redis freezes time during a
-- script, so every step of the call sees the same instant), in us and in
-- ms.
local time = redis.call('TIME')
local now_us = tonumber(time[1] .. string.rep('0', 6 - #time[2]) .. time[2])
local now_ms = math.floor(now_us / 1000)

-- The time-mixed fence of a grant, as in lock.lua: max(floor + 1, server
-- time in us), where the floor is the namespace's (one key without a ttl,
-- one per slot in a cluster) and holds the last fence it issued.
-- Returns the fence, or the error reply of a floor key of another type (the
-- caller undoes its grant, so an error reply still means "nothing changed").
local function issue_fence(floor_key)
  local previous = redis.pcall('GET', floor_key)
  if type(previous) == 'table' then
    return previous
  end
  local fence = (tonumber(previous or '0') or 0) + 1
  if fence < now_us then
    fence = now_us
  end
  redis.call('SET', floor_key, string.format('%.0f', fence))
  return fence
end
