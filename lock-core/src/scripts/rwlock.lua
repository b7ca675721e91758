-- A read-write lock: many readers or one writer, every hold a lease of its
-- own, writers preferred.
--
-- (Sent as family_prelude.lua followed by this file: now_us, now_ms and
-- issue_fence come from the prelude.)
--
--   KEYS: writer, readers, intent, floor (one hash slot)
--
--   read acquire     ARGV: 'r', token, ttl_ms
--   write acquire    ARGV: 'w', token, ttl_ms, intent_ttl_ms
--   read renew       ARGV: 'e', token, ttl_ms
--   write renew      ARGV: 'f', token, ttl_ms
--   intent renew     ARGV: 'i', token, intent_ttl_ms
--   read release     ARGV: 'x', token
--   write release    ARGV: 'y', token
--   intent withdraw  ARGV: 'z', token
--
-- `writer` is a string key (the writer's token, its ttl the writer's
-- lease), as the plain lock's. `readers` is a sorted set: member = a
-- reader's token, score = the server time (ms) its lease ends; ended leases
-- stop counting at once and are dropped by the next call, so a dead reader
-- blocks writers for at most one ttl after its last renewal, whatever the
-- other readers do. The set's ttl follows its latest lease.
--
-- Writers are preferred: a writer that finds the lock taken claims
-- `intent` (if no other writer holds it), and while an intent stands no new
-- reader is granted, so a stream of readers cannot starve a writer. The
-- intent is a short lease (`intent_ttl_ms`, renewed by the waiting writer):
-- a writer that dies while waiting holds readers back by at most that
-- long. A writer's grant clears its own intent.
--
-- Replies:
--   acquire  the fence (> 0) for a writer, 0 for a reader, when granted;
--            otherwise -2 - the ms until what blocks it may end (a writer's
--            lease, the last reader's lease or a waiting writer's intent)
--   renew    1 when the lease was extended, 0 when it is not held (lost)
--   release  1 when the hold was removed, 0 when it was not held (a
--            writer's release then withdraws its intent, if it holds it,
--            as 'z' does); a release
--            that leaves the lock free to a writer publishes on the writer
--            key's channel (+ ':released')
--   intent   1 when the intent is (still) this writer's, 0 otherwise

local writer, readers, intent, floor_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, token = ARGV[1], ARGV[2]


redis.call('ZREMRANGEBYSCORE', readers, '-inf', now_ms)

local function keep_until_last()
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIREAT', readers, last[2])
  end
end

-- -2 - the ms until the latest reader lease ends (all must end for a writer).
local function wait_for_readers()
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  return -2 - (tonumber(last[2]) - now_ms)
end

-- Claims the intent for `token` unless another writer holds it.
local function claim_intent(intent_ttl)
  local holder = redis.call('GET', intent)
  if holder == token then
    redis.call('PEXPIRE', intent, intent_ttl)
    return true
  elseif holder then
    return false
  end
  redis.call('SET', intent, token, 'PX', intent_ttl)
  return true
end

local function announce()
  redis.call('PUBLISH', writer .. ':released', 'released')
end

if op == 'r' then
  local ends = string.format('%.0f', now_ms + tonumber(ARGV[3]))
  if redis.call('ZSCORE', readers, token) then
    -- A retry by a reader: its lease restarts from this send.
    redis.call('ZADD', readers, 'XX', ends, token)
    keep_until_last()
    return 0
  end
  local held_by = redis.call('GET', writer)
  if held_by then
    return -2 - redis.call('PTTL', writer)
  end
  if redis.call('EXISTS', intent) == 1 then
    return -2 - redis.call('PTTL', intent)
  end
  redis.call('ZADD', readers, ends, token)
  keep_until_last()
  return 0
elseif op == 'w' then
  local ttl, intent_ttl = tonumber(ARGV[3]), ARGV[4]
  local held_by = redis.call('GET', writer)
  if held_by and held_by ~= token then
    claim_intent(intent_ttl)
    return -2 - redis.call('PTTL', writer)
  end
  if not held_by then
    if redis.call('ZCARD', readers) > 0 then
      claim_intent(intent_ttl)
      return wait_for_readers()
    end
    local waiting = redis.call('GET', intent)
    if waiting and waiting ~= token then
      return -2 - redis.call('PTTL', intent)
    end
  end
  -- Granted (or a retry by the holder: its lease restarts from this send).
  redis.call('SET', writer, token, 'PX', ttl)
  if redis.call('GET', intent) == token then
    redis.call('DEL', intent)
  end
  local fence = issue_fence(floor_key)
  if type(fence) == 'table' and not held_by then
    -- An error reply means nothing changed: undo the grant.
    redis.call('DEL', writer)
  end
  return fence
elseif op == 'e' then
  if redis.call('ZSCORE', readers, token) then
    redis.call('ZADD', readers, 'XX', string.format('%.0f', now_ms + tonumber(ARGV[3])), token)
    keep_until_last()
    return 1
  end
  return 0
elseif op == 'f' then
  if redis.call('GET', writer) == token then
    return redis.call('PEXPIRE', writer, ARGV[3])
  end
  return 0
elseif op == 'i' then
  if claim_intent(ARGV[3]) then
    return 1
  end
  return 0
elseif op == 'x' then
  local removed = redis.call('ZREM', readers, token)
  if removed == 1 then
    keep_until_last()
    if redis.call('ZCARD', readers) == 0 then
      announce()
    end
  end
  return removed
elseif op == 'y' then
  if redis.call('GET', writer) == token then
    redis.call('DEL', writer)
    announce()
    return 1
  end
  -- Not the holder: a waiting writer that gives up withdraws its intent
  -- (as 'z'), so one release undoes whatever an abandoned acquire left.
  if redis.call('GET', intent) == token then
    redis.call('DEL', intent)
    announce()
  end
  return 0
elseif op == 'z' then
  if redis.call('GET', intent) == token then
    redis.call('DEL', intent)
    announce()
    return 1
  end
  return 0
end
return redis.error_reply('ERR rwlock.lua: unknown operation ' .. tostring(op))
