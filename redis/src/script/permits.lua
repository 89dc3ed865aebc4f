-- Permits of one key held as leases: a sorted set, member = token, score = the permit's expiry
-- in ms on this server's clock (TIME). A permit is held while now < expiry. Redis runs a script
-- alone, so counting and adding never interleave with another client's.
-- KEYS[1]: the set. ARGV: op ('a' acquire, 'r' renew, 'x' release), token, max, ttl_ms.
-- Replies: acquire {1, in_flight, 0} or {0, in_flight, retry_after_ms}; renew and release 1|0.
local key = KEYS[1]
local op, token, max, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Expired permits are returned: they no longer count.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
-- The set lives as long as its latest permit (never shorter: PEXPIRE only lengthens here).
local function keep(until_ms)
  local left = redis.call('PTTL', key)
  if left < until_ms - now then
    redis.call('PEXPIRE', key, until_ms - now)
  end
end
if op == 'a' then
  local held = redis.call('ZCARD', key)
  if held < max then
    redis.call('ZADD', key, now + ttl, token)
    keep(now + ttl)
    return {1, held + 1, 0}
  end
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  local retry = 0
  if first[2] then retry = tonumber(first[2]) - now end
  return {0, held, retry}
elseif op == 'r' then
  if redis.call('ZSCORE', key, token) then
    redis.call('ZADD', key, 'XX', now + ttl, token)
    keep(now + ttl)
    return 1
  end
  return 0
elseif op == 'x' then
  return redis.call('ZREM', key, token)
end
return redis.error_reply('leakgate permits: unknown operation')
