-- Every lock operation, one or many per call (group commit).
--
-- Operations follow one another in KEYS and ARGV, each taking its own
-- group of entries. The acquire's code names its fencing mode, so an
-- unfenced acquire sends no fence key:
--
--   acquire, no fence     KEYS: lock            ARGV: 'n', token, ttl_ms
--   acquire, time-mixed   KEYS: lock, floor     ARGV: 't', token, ttl_ms
--   acquire, counter      KEYS: lock, counter   ARGV: 'c', token, ttl_ms
--   renew                 KEYS: lock            ARGV: 'r', token, ttl_ms
--   release               KEYS: lock            ARGV: 'd', token
--   release, unannounced  KEYS: lock            ARGV: 'q', token
--
-- 'N', 'T' and 'C' are the acquires for servers before 7.0 (whose SET
-- cannot combine NX and GET). The floor (the time-mixed fence's) and the
-- counter are the namespace's, one key each without a ttl (per hash slot
-- in a cluster, in the lock's slot).
--
-- The reply has one integer per operation, in order (an array; a call of
-- a single operation answers that operation's reply alone, which costs
-- Redis less than a one-element array: the common call outside a batch):
--   acquire  the fence (>= 0; 0 without fencing) when granted; when
--            another owner holds the key, -2 - its PTTL (so -1: a key
--            without ttl, -2 - n: n ms left)
--   renew    1 when the ttl was reset, 0 when the key is not ours
--   release  1 when our key was deleted, 0 when it was not ours ('d'
--            also publishes on the key's channel; 'q' does not, for
--            Redlock, whose waiters never subscribe)
--   any      an error reply when that operation failed; it changed nothing
--
-- Each operation's first command runs under pcall, so one bad key (say
-- WRONGTYPE) fails only its own operation and the rest of the batch runs.
--
-- Lua 5.1 numbers are doubles: every integer here stays below 2^53 (a
-- microsecond Unix timestamp is about 1.8e15) and returns to Redis as an
-- exact integer reply; values stored in Redis are formatted with %.0f or
-- built by concatenation, never through tostring (which would print
-- 1.8e+15).

-- The acquire's helpers, built on the call's first acquire (below): a
-- closure costs every call that builds it, and a release or a renewal,
-- the commonest calls, needs none. The server time they read is shared by
-- every acquire of the call.
local server_us, fence_for, acquire
local now_us, now_text = nil, nil
-- The fence floors this call touched: key -> the highest fence issued from
-- it, key -> the value it holds on the server, and the keys in the order
-- first touched, to write back at the end where the two differ.
local floors, stored, touched

local replies = {}
local k, a, n = 1, 1, #ARGV
while a <= n do
  local op, lock, token = ARGV[a], KEYS[k], ARGV[a + 1]
  if not acquire and op ~= 'd' and op ~= 'q' and op ~= 'r' then
    floors, stored, touched = {}, {}, {}
    -- The server clock in microseconds, as a number and as its decimal
    -- string, read at most once per call: Redis freezes time during a
    -- script, so every grant of a batch sees the same instant and the floor
    -- below orders them.
    server_us = function()
      if not now_us then
        local time = redis.call('TIME')
        now_text = time[1] .. string.rep('0', 6 - #time[2]) .. time[2]
        now_us = tonumber(now_text)
      end
      return now_us, now_text
    end

    -- The fence of a grant that just set `lock`, in mode 't' or 'c'. On error,
    -- undoes the grant so that an error reply still means "nothing changed".
    fence_for = function(lock, fence_key, mode, compat)
      if mode == 'c' then
        -- One counter per namespace that never expires: strictly increasing
        -- per key as long as the key survives. A plain counter lives in the
        -- replicated store, so a failover that loses the last INCR hands the
        -- same number out twice.
        local value = redis.pcall('INCR', fence_key)
        if type(value) == 'table' then
          redis.call('DEL', lock)
        end
        return value
      end
      -- max(floor + 1, server time in us), the floor being the namespace's
      -- (one key per namespace, per slot in a cluster, without a ttl): the
      -- last fence it issued.
      local now, text = server_us()
      local floor = floors[fence_key]
      if floor then
        -- A later grant of this call: one above the call's last, written
        -- back at the end (below). A call's fences reach clients only when
        -- it completes, and then the floor holds the highest of them.
        floors[fence_key] = floor + 1
        return floor + 1
      end
      -- The call's first grant on this floor swaps the server time in (one
      -- command: the common single grant needs no other).
      local previous
      if compat then
        previous = redis.pcall('GET', fence_key)
      else
        previous = redis.pcall('SET', fence_key, text, 'GET')
      end
      if type(previous) == 'table' then
        redis.call('DEL', lock)
        return previous
      end
      touched[#touched + 1] = fence_key
      local fence = (tonumber(previous or '0') or 0) + 1
      if fence < now then
        fence = now
      end
      if compat or fence ~= now then
        -- The server clock is behind the floor (it stepped back, or grants
        -- came faster than 1 per us), or the swap was not made: write the
        -- fence now, so the floor never holds less than it did, whatever
        -- happens later in the call.
        redis.call('SET', fence_key, string.format('%.0f', fence))
      end
      floors[fence_key], stored[fence_key] = fence, fence
      return fence
    end

    acquire = function(lock, fence_key, token, ttl, mode, compat)
      local current
      if compat then
        current = redis.pcall('GET', lock)
      else
        -- SET NX GET (Redis 7.0+) sets and reads the holder in one call.
        current = redis.pcall('SET', lock, token, 'NX', 'PX', ttl, 'GET')
      end
      if current == token then
        -- A retry after an outcome we never saw: the key is already ours.
        -- Refresh the ttl, since validity counts from this send (timing rule
        -- 1), and issue a fresh fence: the earlier one never reached the
        -- client, so nothing was written with it.
        redis.call('PEXPIRE', lock, ttl)
      elseif current then
        if type(current) == 'table' then
          return current
        end
        return -2 - redis.call('PTTL', lock)
      elseif compat then
        -- Under pcall: a full server refuses SET (OOM), and then this acquire
        -- fails alone while the operations batched with it still run.
        local set = redis.pcall('SET', lock, token, 'PX', ttl)
        if type(set) == 'table' and set.err then
          return set
        end
      end
      if mode == 'n' then
        return 0
      end
      return fence_for(lock, fence_key, mode, compat)
    end
  end
  local reply
  if op == 'd' or op == 'q' then
    reply = redis.pcall('GET', lock)
    if reply == token then
      redis.call('DEL', lock)
      if op == 'd' then
        -- Wake the waiters (their channel is the lock key + ':released').
        redis.call('PUBLISH', lock .. ':released', 'released')
      end
      reply = 1
    elseif type(reply) ~= 'table' then
      reply = 0
    end
    k, a = k + 1, a + 2
  elseif op == 'r' then
    reply = redis.pcall('GET', lock)
    if reply == token then
      reply = redis.call('PEXPIRE', lock, ARGV[a + 2])
    elseif type(reply) ~= 'table' then
      reply = 0
    end
    k, a = k + 1, a + 3
  elseif op == 'n' or op == 'N' then
    reply = acquire(lock, nil, token, ARGV[a + 2], 'n', op == 'N')
    k, a = k + 1, a + 3
  elseif op == 't' or op == 'T' then
    reply = acquire(lock, KEYS[k + 1], token, ARGV[a + 2], 't', op == 'T')
    k, a = k + 2, a + 3
  elseif op == 'c' or op == 'C' then
    reply = acquire(lock, KEYS[k + 1], token, ARGV[a + 2], 'c', op == 'C')
    k, a = k + 2, a + 3
  else
    return redis.error_reply('ERR lock.lua: unknown operation ' .. tostring(op))
  end
  replies[#replies + 1] = reply
end
if touched then
  for i = 1, #touched do
    local key = touched[i]
    if floors[key] ~= stored[key] then
      redis.call('SET', key, string.format('%.0f', floors[key]))
    end
  end
end
if #replies == 1 then
  -- An error table becomes the call's error reply.
  return replies[1]
end
return replies
