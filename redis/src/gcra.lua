-- leakgate GCRA, script version 1: one decision over several buckets, all or nothing.
--
-- A time is a pair (ms, lo): whole milliseconds and units of 1/D ns within the millisecond
-- (0 <= lo < L = 10^6 * D, L <= 2^52). The script only adds, subtracts and compares pairs, so
-- every number it handles is an exact integer below 2^53 (see units.rs in leakgate-redis).
--
-- KEYS[i]    one Redis key per limited key; it holds that key's m buckets as "ms:lo,ms:lo,...".
-- ARGV[1]    "" = read the clock with TIME here; otherwise the caller's time, whole ms
-- ARGV[2]    the caller's time, ns within that ms
-- ARGV[3]    m, the number of quotas (buckets per key)
-- ARGV[4]    max_wait, whole ms          ARGV[5] max_wait, ns within that ms
-- ARGV[6]    extra units to lease after an admission (0: none; only with one key)
-- ARGV[7]    ms added to each key's time to live beyond the moment its buckets are empty
-- ARGV[8]    "1": charge the cost if it conforms; "0": a peek, nothing is written
-- then, for each quota j, 6 numbers: D, L, T.ms, T.lo, tau.ms, tau.lo
-- then, for each key i and quota j, 2 numbers: cost.ms, cost.lo
--
-- Reply: {granted, now.ms, now.ns, delay.ms, delay.ns, leased, then for each key i and quota j:
-- backlog.ms, backlog.lo} where backlog = max(TAT - now, 0) before the decision and delay is when
-- the request may go, rounded up to the nanosecond (0 for a meter).

-- Needs Redis 5 or later (or any Valkey): scripts replicate their effects, so TIME is allowed.

-- The common call, one key and one quota, no lease: the steps of the general path below,
-- inlined before anything else is set up (a script pays for every function and table it makes,
-- on every call).
if #KEYS == 1 and ARGV[3] == '1' and ARGV[6] == '0' then
  local tonumber = tonumber
  local now_ms, now_ns
  if ARGV[1] == '' then
    local t = redis.call('TIME')
    local us = tonumber(t[2])
    now_ms = tonumber(t[1]) * 1000 + (us - us % 1000) / 1000
    now_ns = (us % 1000) * 1000
  else
    now_ms, now_ns = tonumber(ARGV[1]), tonumber(ARGV[2])
  end
  local D, L, um, ul = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[13]), tonumber(ARGV[14])
  local cm, cl = tonumber(ARGV[15]), tonumber(ARGV[16])
  local nl = now_ns * D
  local sm, sl = now_ms, nl
  local raw = redis.call('GET', KEYS[1])
  if raw then
    local a, b = string.match(raw, '^(%d+):(%d+)$')
    if a == nil or #a > 16 or #b > 16 then
      return redis.error_reply('leakgate: not a leakgate bucket at key ' .. KEYS[1])
    end
    local am, al = tonumber(a), tonumber(b)
    if am >= 9007199254740992 or al >= L then
      return redis.error_reply('leakgate: not a leakgate bucket at key ' .. KEYS[1])
    end
    if am > now_ms or (am == now_ms and al > nl) then sm, sl = am, al end
  end
  local bm, bl = sm - now_ms, sl - nl
  if bl < 0 then bm, bl = bm - 1, bl + L end
  local reply = { 1, now_ms, now_ns, 0, 0, 0, bm, bl }
  if ARGV[8] ~= '1' then return reply end
  local em, el = bm + cm, bl + cl
  if el >= L then em, el = em + 1, el - L end
  local dm, dn = 0, 0
  if em > um or (em == um and el > ul) then
    local wm, wl = em - um, el - ul
    if wl < 0 then wm, wl = wm - 1, wl + L end
    local q = math.floor(wl / D)
    if q * D > wl then q = q - 1 elseif (q + 1) * D <= wl then q = q + 1 end
    if q * D < wl then q = q + 1 end
    dm, dn = wm, q
    if dn >= 1000000 then dm, dn = dm + 1, dn - 1000000 end
  end
  reply[4], reply[5] = dm, dn
  local mw_ms, mw_ns = tonumber(ARGV[4]), tonumber(ARGV[5])
  if dm > mw_ms or (dm == mw_ms and dn > mw_ns) then
    reply[1] = 0
    return reply
  end
  local gm, gl = now_ms + dm, nl + dn * D
  if gl >= L then gm, gl = gm + 1, gl - L end
  if sm < gm or (sm == gm and sl < gl) then sm, sl = gm, gl end
  sm, sl = sm + cm, sl + cl
  if sl >= L then sm, sl = sm + 1, sl - L end
  local tm, tl = sm - now_ms, sl - nl
  if tl < 0 then tm, tl = tm - 1, tl + L end
  if tl > 0 then tm = tm + 1 end
  redis.call('SET', KEYS[1], string.format('%.0f:%.0f', sm, sl), 'PX', tm + tonumber(ARGV[7]) + 1)
  return reply
end


local floor = math.floor
local TWO53 = 9007199254740992

-- A decimal field of a stored bucket (digits only, by the pattern that captured it): its value if
-- it is below 2^53, else nil.
local function num(s)
  if s == nil or #s > 16 then return nil end
  local v = tonumber(s)
  if v >= TWO53 then return nil end
  return v
end

-- Arguments come from leakgate's client, which keeps them below 2^53: tonumber suffices.
local function arg(i)
  local v = tonumber(ARGV[i])
  if v == nil then error('leakgate: bad argument ' .. i) end
  return v
end

local function add(am, al, bm, bl, L)
  local m, l = am + bm, al + bl
  if l >= L then return m + 1, l - L end
  return m, l
end

-- a - b, for a >= b
local function sub(am, al, bm, bl, L)
  local m, l = am - bm, al - bl
  if l < 0 then return m - 1, l + L end
  return m, l
end

local function le(am, al, bm, bl)
  return am < bm or (am == bm and al <= bl)
end

-- ceil(lo / D) for 0 <= lo < 10^6 * D: float division corrected to the exact quotient
local function ceil_div(lo, D)
  local q = floor(lo / D)
  if q * D > lo then q = q - 1 elseif (q + 1) * D <= lo then q = q + 1 end
  if q * D < lo then q = q + 1 end
  return q
end

local now_ms, now_ns
if ARGV[1] == '' then
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  now_ms = tonumber(t[1]) * 1000 + floor(us / 1000)
  now_ns = (us % 1000) * 1000
else
  now_ms, now_ns = arg(1), arg(2)
end
local m = arg(3)
local mw_ms, mw_ns = arg(4), arg(5)
local lease_want = arg(6)
local slack = arg(7)
local write = ARGV[8] == '1'
local k = #KEYS

-- Quota j's numbers at Q[7j-6 .. 7j]: D, L, T.ms, T.lo, tau.ms, tau.lo, and now's lo in its units.
-- (Flat tables: a script allocates every table on every call.)
local Q = {}
for j = 1, m do
  local b, o = 8 + (j - 1) * 6, 7 * (j - 1)
  for f = 1, 6 do Q[o + f] = arg(b + f) end
  Q[o + 7] = now_ns * Q[o + 1]
end
local cost_base = 8 + m * 6

-- The reply, which also holds each bucket's backlog max(TAT - now, 0) at 6 + 2x - 1 and 6 + 2x.
local reply = { 1, now_ms, now_ns, 0, 0, 0 }
-- Each bucket's start = max(TAT, now) at S[2x - 1], S[2x]; after a grant, its new TAT.
local S = {}
local delay_ms, delay_ns = 0, 0
for i = 1, k do
  local raw = redis.call('GET', KEYS[i])
  local pos = 1
  for j = 1, m do
    local o, x = 7 * (j - 1), (i - 1) * m + j
    local L, nl = Q[o + 2], Q[o + 7]
    local tm, tl = now_ms, nl
    if raw then
      local a, b, e, _
      if m == 1 then
        a, b = string.match(raw, '^(%d+):(%d+)$')
        e = #raw
      else
        _, e, a, b = string.find(raw, '^(%d+):(%d+)', pos)
      end
      local am, al = num(a), num(b)
      if am == nil or al == nil or al >= L then
        return redis.error_reply('leakgate: not a leakgate bucket at key ' .. KEYS[i])
      end
      pos = e + 1
      if j < m then
        if string.sub(raw, pos, pos) ~= ',' then
          return redis.error_reply('leakgate: not a leakgate bucket at key ' .. KEYS[i])
        end
        pos = pos + 1
      end
      if not le(am, al, now_ms, nl) then tm, tl = am, al end
    end
    S[2 * x - 1], S[2 * x] = tm, tl
    local bm, bl = sub(tm, tl, now_ms, nl, L)
    reply[5 + 2 * x], reply[6 + 2 * x] = bm, bl
    -- The wait before this bucket conforms: max(backlog + cost - tau, 0), in whole ns.
    local sm, sl = add(bm, bl, arg(cost_base + 2 * x - 1), arg(cost_base + 2 * x), L)
    if not le(sm, sl, Q[o + 5], Q[o + 6]) then
      local wm, wl = sub(sm, sl, Q[o + 5], Q[o + 6], L)
      local wn = ceil_div(wl, Q[o + 1])
      if wn >= 1000000 then wm, wn = wm + 1, wn - 1000000 end
      if not le(wm, wn, delay_ms, delay_ns) then delay_ms, delay_ns = wm, wn end
    end
  end
  if raw and pos ~= #raw + 1 then
    return redis.error_reply('leakgate: not a leakgate bucket at key ' .. KEYS[i])
  end
end

if not write then
  return reply
end
reply[4], reply[5] = delay_ms, delay_ns
if not le(delay_ms, delay_ns, mw_ms, mw_ns) then
  reply[1] = 0
  return reply
end

-- Granted. Each bucket is charged from the time the request goes:
-- TAT := max(TAT, now + delay) + cost.
for i = 1, k do
  for j = 1, m do
    local o, x = 7 * (j - 1), (i - 1) * m + j
    local L = Q[o + 2]
    local gm, gl = add(now_ms, Q[o + 7], delay_ms, delay_ns * Q[o + 1], L)
    local bm, bl = S[2 * x - 1], S[2 * x]
    if le(bm, bl, gm, gl) then bm, bl = gm, gl end
    S[2 * x - 1], S[2 * x] = add(bm, bl, arg(cost_base + 2 * x - 1), arg(cost_base + 2 * x), L)
  end
end

-- A lease: the most extra units up to lease_want that conform now in every bucket, found by
-- trying powers of two from the largest down (T * 2^p by doubling, so only sums are exact).
if lease_want > 0 and k == 1 and delay_ms == 0 and delay_ns == 0 then
  local pw, n = {}, 1
  for j = 1, m do pw[2 * j - 1], pw[2 * j] = Q[7 * j - 4], Q[7 * j - 3] end
  while n * 2 <= lease_want do
    local base, nb = #pw - 2 * m, #pw
    for j = 1, m do
      pw[nb + 2 * j - 1], pw[nb + 2 * j] =
        add(pw[base + 2 * j - 1], pw[base + 2 * j], pw[base + 2 * j - 1], pw[base + 2 * j], Q[7 * j - 5])
    end
    n = n * 2
  end
  -- pw holds T * 2^p for p = 0 .. log2(n), m pairs each.
  local leased = 0
  while n >= 1 do
    local p = 0
    while 2 ^ p < n do p = p + 1 end
    if leased + n <= lease_want then
      local fits = true
      for j = 1, m do
        local o, L = 7 * (j - 1), Q[7 * j - 5]
        local am, al = add(S[2 * j - 1], S[2 * j], pw[2 * m * p + 2 * j - 1], pw[2 * m * p + 2 * j], L)
        local lm, ll = add(now_ms, Q[o + 7], Q[o + 5], Q[o + 6], L)
        if not le(am, al, lm, ll) then fits = false break end
      end
      if fits then
        leased = leased + n
        for j = 1, m do
          S[2 * j - 1], S[2 * j] =
            add(S[2 * j - 1], S[2 * j], pw[2 * m * p + 2 * j - 1], pw[2 * m * p + 2 * j], Q[7 * j - 5])
        end
      end
    end
    n = n / 2
  end
  reply[6] = leased
end

-- Write each key's buckets, to expire when the last of them is empty again (plus the slack).
for i = 1, k do
  local value, ttl = '', 0
  for j = 1, m do
    local o, x = 7 * (j - 1), (i - 1) * m + j
    local pair = string.format('%.0f:%.0f', S[2 * x - 1], S[2 * x])
    if j == 1 then value = pair else value = value .. ',' .. pair end
    local dm, dl = sub(S[2 * x - 1], S[2 * x], now_ms, Q[o + 7], Q[o + 2])
    if dl > 0 then dm = dm + 1 end
    if dm > ttl then ttl = dm end
  end
  redis.call('SET', KEYS[i], value, 'PX', string.format('%.0f', ttl + slack + 1))
end
return reply
