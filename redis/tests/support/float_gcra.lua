-- GCRA in floating-point seconds, for comparison only: the design of the redis-gcra script
-- that leakgate's seed pointed to (time as a double of seconds since 2017, the state written
-- back as a Lua number), written anew here. Not leakgate's script.
--
-- KEYS[1] the bucket; ARGV: count, period (s), burst, cost, then optionally the caller's time
-- as seconds and microseconds (the shape of TIME's reply) and ms added to the key's time to
-- live (so that a simulated clock is not cut short by Redis's real one).
-- Reply: {allowed, retry_after (s)}.
local count, period = tonumber(ARGV[1]), tonumber(ARGV[2])
local burst, cost = tonumber(ARGV[3]), tonumber(ARGV[4])
local sec, usec
if ARGV[5] then
  sec, usec = tonumber(ARGV[5]), tonumber(ARGV[6])
else
  local t = redis.call('TIME')
  sec, usec = tonumber(t[1]), tonumber(t[2])
end
-- Seconds since 2017-01-01, to keep the double's integer part short.
local now = (sec - 1483228800) + usec / 1000000
local interval = period / count
local tau = interval * burst
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + interval * cost
local allow_at = new_tat - tau
if now < allow_at then
  return { 0, tostring(allow_at - now) }
end
-- A Lua number passed to redis.call is written with 14 significant digits.
local slack = tonumber(ARGV[7] or '0')
redis.call('SET', KEYS[1], new_tat, 'PX', math.max(1, math.ceil((new_tat - now) * 1000)) + slack)
return { 1, '0' }
