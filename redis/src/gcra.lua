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

if redis.replicate_commands then redis.replicate_commands() end

local floor = math.floor
local TWO53 = 9007199254740992

local function num(s)
  if type(s) ~= 'string' or #s == 0 or #s > 16 or string.find(s, '%D') then return nil end
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

local Q = {}
for j = 1, m do
  local b = 8 + (j - 1) * 6
  local q = { D = arg(b + 1), L = arg(b + 2), tm = arg(b + 3), tl = arg(b + 4),
              um = arg(b + 5), ul = arg(b + 6) }
  q.nl = now_ns * q.D
  Q[j] = q
end
local cost_base = 8 + m * 6

-- Every bucket's state: start = max(TAT, now); backlog = start - now.
local start_ms, start_lo, bl_ms, bl_lo = {}, {}, {}, {}
local delay_ms, delay_ns = 0, 0
for i = 1, k do
  local raw = redis.call('GET', KEYS[i])
  local pos = 1
  for j = 1, m do
    local q, x = Q[j], (i - 1) * m + j
    local tm, tl = now_ms, q.nl
    if raw then
      local s, e, a, b = string.find(raw, '^(%d+):(%d+)', pos)
      local am, al = num(a), num(b)
      if s == nil or am == nil or al == nil or al >= q.L then
        return redis.error_reply('leakgate: not a leakgate bucket at key ' .. KEYS[i])
      end
      pos = e + 1
      if j < m then
        if string.sub(raw, pos, pos) ~= ',' then
          return redis.error_reply('leakgate: not a leakgate bucket at key ' .. KEYS[i])
        end
        pos = pos + 1
      end
      if not le(am, al, now_ms, q.nl) then tm, tl = am, al end
    end
    start_ms[x], start_lo[x] = tm, tl
    bl_ms[x], bl_lo[x] = sub(tm, tl, now_ms, q.nl, q.L)
    -- The wait before this bucket conforms: max(backlog + cost - tau, 0), in whole ns.
    local cm, cl = arg(cost_base + 2 * x - 1), arg(cost_base + 2 * x)
    local sm, sl = add(bl_ms[x], bl_lo[x], cm, cl, q.L)
    if not le(sm, sl, q.um, q.ul) then
      local wm, wl = sub(sm, sl, q.um, q.ul, q.L)
      local wn = ceil_div(wl, q.D)
      if wn >= 1000000 then wm, wn = wm + 1, wn - 1000000 end
      if not le(wm, wn, delay_ms, delay_ns) then delay_ms, delay_ns = wm, wn end
    end
  end
  if raw and pos ~= #raw + 1 then
    return redis.error_reply('leakgate: not a leakgate bucket at key ' .. KEYS[i])
  end
end

local reply = { 1, now_ms, now_ns, delay_ms, delay_ns, 0 }
local granted = le(delay_ms, delay_ns, mw_ms, mw_ns)
if not write then
  reply[4], reply[5] = 0, 0
elseif not granted then
  reply[1] = 0
else
  -- Each bucket is charged from the time the request goes: TAT := max(TAT, now + delay) + cost.
  local new_ms, new_lo = {}, {}
  for i = 1, k do
    for j = 1, m do
      local q, x = Q[j], (i - 1) * m + j
      local gm, gl = add(now_ms, q.nl, delay_ms, delay_ns * q.D, q.L)
      local bm, bl = start_ms[x], start_lo[x]
      if le(bm, bl, gm, gl) then bm, bl = gm, gl end
      new_ms[x], new_lo[x] = add(bm, bl, arg(cost_base + 2 * x - 1), arg(cost_base + 2 * x), q.L)
    end
  end
  -- A lease: the most extra units up to lease_want that conform now in every bucket, found by
  -- trying powers of two from the largest down (T * 2^p by doubling, so only sums are exact).
  if lease_want > 0 and k == 1 and delay_ms == 0 and delay_ns == 0 then
    local pw = { { n = 1 } }
    for j = 1, m do pw[1][j] = { Q[j].tm, Q[j].tl } end
    while pw[#pw].n * 2 <= lease_want do
      local prev, nxt = pw[#pw], { n = pw[#pw].n * 2 }
      for j = 1, m do
        local a, b = add(prev[j][1], prev[j][2], prev[j][1], prev[j][2], Q[j].L)
        nxt[j] = { a, b }
      end
      pw[#pw + 1] = nxt
    end
    local leased = 0
    for p = #pw, 1, -1 do
      if leased + pw[p].n <= lease_want then
        local fits, cand = true, {}
        for j = 1, m do
          local q = Q[j]
          local am, al = add(new_ms[j], new_lo[j], pw[p][j][1], pw[p][j][2], q.L)
          local lm, ll = add(now_ms, q.nl, q.um, q.ul, q.L)
          if not le(am, al, lm, ll) then fits = false break end
          cand[j] = { am, al }
        end
        if fits then
          leased = leased + pw[p].n
          for j = 1, m do new_ms[j], new_lo[j] = cand[j][1], cand[j][2] end
        end
      end
    end
    reply[6] = leased
  end
  -- Write each key's buckets, to expire when the last of them is empty again (plus the slack).
  for i = 1, k do
    local parts, ttl = {}, 0
    for j = 1, m do
      local q, x = Q[j], (i - 1) * m + j
      parts[j] = string.format('%.0f:%.0f', new_ms[x], new_lo[x])
      local dm, dl = sub(new_ms[x], new_lo[x], now_ms, q.nl, q.L)
      if dl > 0 then dm = dm + 1 end
      if dm > ttl then ttl = dm end
    end
    redis.call('SET', KEYS[i], table.concat(parts, ','), 'PX', string.format('%.0f', ttl + slack + 1))
  end
end

for x = 1, k * m do
  reply[6 + 2 * x - 1] = bl_ms[x]
  reply[6 + 2 * x] = bl_lo[x]
end
return reply
