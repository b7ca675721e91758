-- The plain lock in fair mode: waiters are granted in arrival order.
--
-- (Sent as family_prelude.lua followed by this file: now_us, now_ms and
-- issue_fence come from the prelude.)
--
--   KEYS: lock, queue, waiters, floor (one hash slot)
--
--   acquire   ARGV: 'a', token, ttl_ms, waiter_ttl_ms
--   wait      ARGV: 'w', token, waiter_ttl_ms   (renews a waiter's place)
--   renew     ARGV: 'r', token, ttl_ms
--   release   ARGV: 'd', token
--   give up   ARGV: 'c', token
--
-- `lock` is the plain lock's key (the holder's token, its ttl the lease).
-- `queue` is a sorted set of waiting tokens scored by arrival (server time
-- in us, kept strictly increasing), and `waiters` the same tokens scored by
-- the server time (ms) their place lapses: a waiting client renews its
-- place every fraction of `waiter_ttl_ms`, and a waiter that dies or
-- pauses loses its place one waiter ttl after its last renewal, holding up
-- the queue by no more than that (there is no fixed minutes-long timeout).
-- Both sets expire with their latest place, so a lock nobody waits for
-- leaves only its own key.
--
-- The lock is granted to an acquire when it is free and the acquirer heads
-- the queue (or the queue is empty); any other acquire joins the queue (or
-- keeps its place) and is refused. A release wakes only the head of the
-- queue, on its own channel (lock .. ':released:' .. token), not every
-- waiter. Every client of one lock must use fair mode: a plain acquire
-- does not look at the queue.
--
-- Replies:
--   acquire  the fence (> 0) when granted; otherwise -2 - the ms after
--            which to try again: the holder's remaining lease, or, when
--            the lock is free but another waiter is ahead, that waiter's
--            remaining place (its grant or its lapse comes first)
--   wait     1 when the place was renewed, 0 when it lapsed (join again)
--   renew    1 when the ttl was reset, 0 when the key is not ours
--   release  1 when our key was deleted, 0 when it was not ours (then
--            the token's place in the queue, if any, is given up as by
--            'c': one release undoes whatever an abandoned acquire left)
--   give up  1 when a place was given up, 0 when there was none

local lock, queue, waiters, floor_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, token = ARGV[1], ARGV[2]


-- Waiters whose place lapsed leave the queue.
local lapsed = redis.call('ZRANGEBYSCORE', waiters, '-inf', now_ms)
for _, gone in ipairs(lapsed) do
  redis.call('ZREM', queue, gone)
end
if #lapsed > 0 then
  redis.call('ZREMRANGEBYSCORE', waiters, '-inf', now_ms)
end

local function head()
  return redis.call('ZRANGE', queue, 0, 0)[1]
end

-- Keeps both sets alive exactly as long as their latest place.
local function keep_until_last()
  local last = redis.call('ZRANGE', waiters, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIREAT', waiters, last[2])
    redis.call('PEXPIREAT', queue, last[2])
  end
end

-- Wakes the head of the queue, if the lock is free.
local function wake_head()
  local next = head()
  if next and redis.call('EXISTS', lock) == 0 then
    redis.call('PUBLISH', lock .. ':released:' .. next, 'released')
  end
end

-- Gives up `token`'s place, waking the next waiter if it was the head.
local function give_up()
  local was_head = head() == token
  local removed = redis.call('ZREM', queue, token)
  redis.call('ZREM', waiters, token)
  if removed == 1 then
    keep_until_last()
    if was_head then
      wake_head()
    end
  end
  return removed
end

if op == 'a' then
  local ttl = tonumber(ARGV[3])
  local current = redis.call('GET', lock)
  local first = head()
  if current ~= token and (current or (first and first ~= token)) then
    -- Join the queue at the back, or keep the place held.
    local place_ends = string.format('%.0f', now_ms + tonumber(ARGV[4]))
    if not redis.call('ZSCORE', queue, token) then
      local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')
      local arrival = now_us
      if last[2] and tonumber(last[2]) >= arrival then
        arrival = tonumber(last[2]) + 1
      end
      redis.call('ZADD', queue, string.format('%.0f', arrival), token)
    end
    redis.call('ZADD', waiters, place_ends, token)
    keep_until_last()
    if current then
      return -2 - redis.call('PTTL', lock)
    end
    return -2 - (tonumber(redis.call('ZSCORE', waiters, first)) - now_ms)
  end
  -- Granted (or a retry by the holder: its lease restarts from this send).
  redis.call('SET', lock, token, 'PX', ttl)
  local queued = redis.call('ZREM', queue, token) == 1
  redis.call('ZREM', waiters, token)
  local fence = issue_fence(floor_key)
  if type(fence) == 'table' then
    -- An error reply means nothing changed: undo the grant, keep the place.
    if current ~= token then
      redis.call('DEL', lock)
    end
    if queued then
      redis.call('ZADD', queue, string.format('%.0f', now_us), token)
      redis.call('ZADD', waiters, string.format('%.0f', now_ms + tonumber(ARGV[4])), token)
    end
  end
  return fence
elseif op == 'w' then
  if redis.call('ZSCORE', waiters, token) then
    redis.call('ZADD', waiters, 'XX', string.format('%.0f', now_ms + tonumber(ARGV[3])), token)
    keep_until_last()
    return 1
  end
  return 0
elseif op == 'r' then
  if redis.call('GET', lock) == token then
    return redis.call('PEXPIRE', lock, ARGV[3])
  end
  return 0
elseif op == 'd' then
  if redis.call('GET', lock) == token then
    redis.call('DEL', lock)
    wake_head()
    return 1
  end
  -- Not the holder: a waiter that gives up (its place goes, as with 'c').
  give_up()
  return 0
elseif op == 'c' then
  return give_up()
end
return redis.error_reply('ERR fair.lua: unknown operation ' .. tostring(op))
