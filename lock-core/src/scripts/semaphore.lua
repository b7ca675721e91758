-- A counting semaphore: at most `permits` holders at once, each with a
-- lease of its own.
--
-- (Sent as family_prelude.lua followed by this file: now_us, now_ms and
-- issue_fence come from the prelude.)
--
--   acquire  KEYS: leases, floor   ARGV: 'a', token, ttl_ms, permits
--   renew    KEYS: leases          ARGV: 'r', token, ttl_ms
--   release  KEYS: leases          ARGV: 'd', token
--
-- `leases` is a sorted set: member = a holder's token, score = the server
-- time (ms) its lease ends. A lease is counted while its score is in the
-- future, so a holder that dies stops counting one ttl after its last grant
-- or renewal, whatever the other holders do; the expired ones are removed
-- by the next call. The set's own ttl is kept at its latest lease, so a
-- semaphore nobody holds leaves nothing behind. `floor` is the time-mixed
-- fence floor, as for the plain lock (the namespace's, in the same hash
-- slot in a cluster).
--
-- Replies:
--   acquire  the fence (> 0) when granted (a retry by a holder refreshes
--            its lease and gets a fresh fence); when every permit is held,
--            -2 - the ms until the first lease ends
--   renew    1 when the lease was extended, 0 when it is not held (expired
--            or released: the holder has lost it)
--   release  1 when the lease was removed, 0 when it was not held; a
--            release publishes on the key's channel (+ ':released')
--
-- Lease ends are server times (family_prelude.lua reads the clock); like a
-- key's ttl, they move with the server's clock.

local op, leases, token = ARGV[1], KEYS[1], ARGV[2]


-- Leases that ended no longer count.
redis.call('ZREMRANGEBYSCORE', leases, '-inf', now_ms)

-- Keeps the set's ttl at its latest lease end.
local function keep_until_last()
  local last = redis.call('ZRANGE', leases, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIREAT', leases, last[2])
  end
end

if op == 'd' then
  local removed = redis.call('ZREM', leases, token)
  if removed == 1 then
    keep_until_last()
    redis.call('PUBLISH', leases .. ':released', 'released')
  end
  return removed
end

local ttl = tonumber(ARGV[3])
local ends = string.format('%.0f', now_ms + ttl)

if op == 'r' then
  if redis.call('ZSCORE', leases, token) then
    redis.call('ZADD', leases, 'XX', ends, token)
    keep_until_last()
    return 1
  end
  return 0
end

if op ~= 'a' then
  return redis.error_reply('ERR semaphore.lua: unknown operation ' .. tostring(op))
end

local permits = tonumber(ARGV[4])
local held = redis.call('ZSCORE', leases, token)
if not held and redis.call('ZCARD', leases) >= permits then
  local first = redis.call('ZRANGE', leases, 0, 0, 'WITHSCORES')
  return -2 - (tonumber(first[2]) - now_ms)
end
redis.call('ZADD', leases, ends, token)
keep_until_last()

local fence = issue_fence(KEYS[2])
if type(fence) == 'table' and not held then
  -- An error reply means nothing changed: undo a new grant.
  redis.call('ZREM', leases, token)
end
return fence
