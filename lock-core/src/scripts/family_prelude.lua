-- The lock family's shared prelude, put in front of fair.lua, rwlock.lua
-- and semaphore.lua (each is sent to Redis as one script: prelude + body).
--
-- The server clock, read once per call (Redis freezes time during a
-- script, so every step of the call sees the same instant), in us as a
-- number and as its decimal string, and in ms.
local time = redis.call('TIME')
local now_text = time[1] .. string.rep('0', 6 - #time[2]) .. time[2]
local now_us = tonumber(now_text)
local now_ms = math.floor(now_us / 1000)

-- The time-mixed fence of a grant, as in lock.lua: max(floor + 1, server
-- time in us), where the floor is the namespace's (one key without a ttl,
-- one per slot in a cluster) and holds the last fence it issued.
-- Returns the fence, or the error reply of a floor key of another type (the
-- caller undoes its grant, so an error reply still means "nothing changed").
-- As lock.lua's first grant on a floor, it swaps the server time in (one
-- command) and writes the fence over it only when the clock is behind.
local function issue_fence(floor_key)
  local previous = redis.pcall('SET', floor_key, now_text, 'GET')
  if type(previous) == 'table' then
    return previous
  end
  local fence = (tonumber(previous or '0') or 0) + 1
  if fence < now_us then
    return now_us
  end
  redis.call('SET', floor_key, string.format('%.0f', fence))
  return fence
end
