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
-- time in us), the floor kept one ttl past the instant it stands for.
-- Returns the fence, or the error reply of a floor key of another type (the
-- caller undoes its grant, so an error reply still means "nothing changed").
local function issue_fence(floor_key, ttl)
  local previous = redis.pcall('SET', floor_key, now_text, 'PX', ttl, 'GET')
  if type(previous) == 'table' then
    return previous
  end
  previous = tonumber(previous or '0') or 0
  if previous < now_us then
    return now_us
  end
  local fence = previous + 1
  local lifetime = ttl + math.ceil((fence - now_us) / 1000)
  redis.call('SET', floor_key, string.format('%.0f', fence), 'PX', string.format('%.0f', lifetime))
  return fence
end
