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

-- The fence state, built on the call's first time-mixed grant: the server
-- time, as a number and as its decimal string (read at most once per call:
-- Redis freezes time during a script, so every grant of a batch sees the
-- same instant and the floor below orders them), and the fence floors this
-- call touched: key -> the highest fence issued from it, key -> the value
-- it holds on the server, and the keys in the order first touched, to
-- write back at the end where the two differ.
--
-- Everything runs inline in the one loop below, with no function built per
-- call: Redis runs the script's body afresh on every call, so a closure or
-- a table made here costs every call that makes it (a lone unfenced acquire
-- cost Redis about 15 % more instructions when its helpers were closures).
local now_us, now_text
local floors, stored, touched

local replies = {}
local k, a, n, count = 1, 1, #ARGV, 0
while a <= n do
  local op, lock, token = ARGV[a], KEYS[k], ARGV[a + 1]
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
  elseif op == 'n' or op == 't' or op == 'c' or op == 'N' or op == 'T' or op == 'C' then
    local ttl = ARGV[a + 2]
    local compat = op == 'N' or op == 'T' or op == 'C'
    local unfenced = op == 'n' or op == 'N'
    local fence_key = KEYS[k + 1]
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
        reply = current
      else
        reply = -2 - redis.call('PTTL', lock)
      end
    elseif compat then
      -- Under pcall: a full server refuses SET (OOM), and then this acquire
      -- fails alone while the operations batched with it still run.
      local set = redis.pcall('SET', lock, token, 'PX', ttl)
      if type(set) == 'table' and set.err then
        reply = set
      end
    end
    -- A refused or failed acquire (reply set) gets no fence.
    if reply == nil then
      if unfenced then
        reply = 0
      elseif op == 'c' or op == 'C' then
        -- One counter per namespace that never expires: strictly increasing
        -- per key as long as the key survives. A plain counter lives in the
        -- replicated store, so a failover that loses the last INCR hands the
        -- same number out twice. On error, undo the grant, so that an error
        -- reply still means "nothing changed".
        reply = redis.pcall('INCR', fence_key)
        if type(reply) == 'table' then
          redis.call('DEL', lock)
        end
      else
        -- max(floor + 1, server time in us), the floor being the namespace's
        -- (one key per namespace, per slot in a cluster, without a ttl): the
        -- last fence it issued.
        if not now_us then
          local time = redis.call('TIME')
          now_text = time[1] .. string.rep('0', 6 - #time[2]) .. time[2]
          now_us = tonumber(now_text)
          floors, stored, touched = {}, {}, {}
        end
        local floor = floors[fence_key]
        if floor then
          -- A later grant of this call: one above the call's last, written
          -- back at the end (below). A call's fences reach clients only when
          -- it completes, and then the floor holds the highest of them.
          reply = floor + 1
          floors[fence_key] = reply
        else
          -- The call's first grant on this floor swaps the server time in
          -- (one command: the common single grant needs no other).
          local previous
          if compat then
            previous = redis.pcall('GET', fence_key)
          else
            previous = redis.pcall('SET', fence_key, now_text, 'GET')
          end
          if type(previous) == 'table' then
            -- Undo the grant: an error reply means "nothing changed".
            redis.call('DEL', lock)
            reply = previous
          else
            touched[#touched + 1] = fence_key
            local fence = (tonumber(previous or '0') or 0) + 1
            if fence < now_us then
              fence = now_us
            end
            if compat or fence ~= now_us then
              -- The server clock is behind the floor (it stepped back, or
              -- grants came faster than 1 per us), or the swap was not made:
              -- write the fence now, so the floor never holds less than it
              -- did, whatever happens later in the call.
              redis.call('SET', fence_key, string.format('%.0f', fence))
            end
            floors[fence_key], stored[fence_key] = fence, fence
            reply = fence
          end
        end
      end
    end
    if unfenced then
      k = k + 1
    else
      k = k + 2
    end
    a = a + 3
  else
    return redis.error_reply('ERR lock.lua: unknown operation ' .. tostring(op))
  end
  count = count + 1
  replies[count] = reply
end
if touched then
  for i = 1, #touched do
    local key = touched[i]
    if floors[key] ~= stored[key] then
      redis.call('SET', key, string.format('%.0f', floors[key]))
    end
  end
end
if count == 1 then
  -- An error table becomes the call's error reply.
  return replies[1]
end
return replies
