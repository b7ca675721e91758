-- Every lock operation, one or many per call (group commit).
--
-- Operations follow one another in KEYS and ARGV, each taking its own
-- group of entries:
--
--   acquire  KEYS: lock, fence   ARGV: 'a', token, ttl_ms, mode
--   acquire  KEYS: lock, fence   ARGV: 'A', token, ttl_ms, mode   (servers before 7.0)
--   renew    KEYS: lock          ARGV: 'r', token, ttl_ms
--   release  KEYS: lock          ARGV: 'd', token
--
-- mode is 'none', 'counter' or 'time-mixed'. The fence key is the lock's
-- fence floor for 'time-mixed' (same hash slot, it expires) and its
-- namespace's counter for 'counter'; 'none' never touches it.
--
-- The reply has one entry per operation, in order:
--   acquire  {1, fence} when granted (fence a decimal string, '0' for
--            'none'); {0, pttl} when another owner holds the key
--   renew    1 when the ttl was reset, 0 when the key is not ours
--   release  1 when our key was deleted, 0 when it was not ours
--   any      an error reply when that operation failed; it changed nothing
--
-- Each operation runs under pcall, so one bad key (say WRONGTYPE) fails
-- only its own operation and the rest of the batch still runs.
--
-- Lua 5.1 numbers are doubles: every integer here stays below 2^53 (a
-- microsecond Unix timestamp is about 1.8e15), and fences travel as
-- integer strings formatted with %.0f, never through tostring (which
-- would print 1.8e+15).

local function fmt(number)
  return string.format('%.0f', number)
end

-- The server clock in microseconds, as a number and as its decimal
-- string, read at most once per call: Redis freezes time during a script,
-- so every grant of a batch sees the same instant and the floor below
-- orders them. The string is built by concatenation (cheaper than
-- string.format on this path).
local now_us, now_text = nil, nil
local function server_us()
  if not now_us then
    local time = redis.call('TIME')
    now_text = time[1] .. string.rep('0', 6 - #time[2]) .. time[2]
    now_us = tonumber(now_text)
  end
  return now_us, now_text
end

-- Issues the fence of a grant that just set `lock`. On error, undoes the
-- grant so that an error reply still means "nothing changed". `compat`:
-- the server is older than 6.2, whose SET knows no GET option.
local function fence_for(lock, fence_key, ttl, mode, compat)
  if mode == 'counter' then
    -- One counter per namespace that never expires: strictly increasing
    -- per key as long as the key survives. A plain counter lives in the
    -- replicated store, so a failover that loses the last INCR hands the
    -- same number out twice.
    local value = redis.pcall('INCR', fence_key)
    if type(value) == 'table' then
      redis.call('DEL', lock)
      return value
    end
    return {1, fmt(value)}
  elseif mode == 'time-mixed' then
    -- max(floor + 1, server time in us). The floor lives one ttl past the
    -- server instant its fence stands for, so the key space holds nothing
    -- of a lock one ttl after its last grant, and a grant after the floor
    -- expired reads a server time above every fence issued before.
    local now, now_text = server_us()
    local previous
    if compat then
      previous = redis.pcall('GET', fence_key)
    else
      previous = redis.pcall('SET', fence_key, now_text, 'PX', ttl, 'GET')
    end
    if type(previous) == 'table' then
      redis.call('DEL', lock)
      return previous
    end
    local floor = tonumber(previous or '0') or 0
    if floor < now then
      if compat then
        redis.call('SET', fence_key, now_text, 'PX', ttl)
      end
      return {1, now_text}
    end
    -- The server clock is behind the floor (it stepped back, or grants
    -- came faster than 1 per us): count on from the floor, and keep it
    -- until the server clock has passed it by one ttl.
    local fence = floor + 1
    local lifetime = tonumber(ttl) + math.ceil((fence - now) / 1000)
    redis.call('SET', fence_key, fmt(fence), 'PX', fmt(lifetime))
    return {1, fmt(fence)}
  end
  return {1, '0'}
end

local function acquire(lock, fence_key, token, ttl, mode)
  -- SET NX GET (Redis 7.0+) sets and reads the holder in one call.
  local current = redis.pcall('SET', lock, token, 'NX', 'PX', ttl, 'GET')
  if type(current) == 'table' then
    return current
  end
  if not current then
    return fence_for(lock, fence_key, ttl, mode, false)
  end
  if current == token then
    -- A retry after an outcome we never saw: the key is already ours.
    -- Refresh the ttl, since validity counts from this send (timing rule 1),
    -- and issue a fresh fence: the earlier one never reached the client,
    -- so nothing was written with it.
    redis.call('PEXPIRE', lock, ttl)
    return fence_for(lock, fence_key, ttl, mode, false)
  end
  return {0, redis.call('PTTL', lock)}
end

local function acquire_compat(lock, fence_key, token, ttl, mode)
  -- Before 7.0, SET cannot combine NX and GET: read first, then set.
  local current = redis.pcall('GET', lock)
  if type(current) == 'table' then
    return current
  end
  if current == token then
    redis.call('PEXPIRE', lock, ttl)
    return fence_for(lock, fence_key, ttl, mode, true)
  end
  if current then
    return {0, redis.call('PTTL', lock)}
  end
  -- Under pcall, like SET NX GET above: a full server refuses SET (OOM),
  -- and then this acquire fails alone while the renewals and releases
  -- batched with it still run; an error raised would fail them all.
  local set = redis.pcall('SET', lock, token, 'PX', ttl)
  if set.err then
    return set
  end
  return fence_for(lock, fence_key, ttl, mode, true)
end

local function renew(lock, token, ttl)
  local current = redis.pcall('GET', lock)
  if type(current) == 'table' then
    return current
  end
  if current == token then
    return redis.call('PEXPIRE', lock, ttl)
  end
  return 0
end

local function release(lock, token)
  local current = redis.pcall('GET', lock)
  if type(current) == 'table' then
    return current
  end
  if current == token then
    redis.call('DEL', lock)
    -- Wake the waiters (their channel is the lock key + ':released').
    redis.call('PUBLISH', lock .. ':released', 'released')
    return 1
  end
  return 0
end

local replies = {}
local k, a = 1, 1
while a <= #ARGV do
  local op = ARGV[a]
  local reply
  if op == 'a' or op == 'A' then
    local run = acquire
    if op == 'A' then
      run = acquire_compat
    end
    reply = run(KEYS[k], KEYS[k + 1], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
    k, a = k + 2, a + 4
  elseif op == 'r' then
    reply = renew(KEYS[k], ARGV[a + 1], ARGV[a + 2])
    k, a = k + 1, a + 3
  elseif op == 'd' then
    reply = release(KEYS[k], ARGV[a + 1])
    k, a = k + 1, a + 2
  else
    return redis.error_reply('ERR lock.lua: unknown operation ' .. tostring(op))
  end
  replies[#replies + 1] = reply
end
return replies
