-- leakgate GCRA, the general path: any keys, quotas, groups, rules, leases and reservations.
-- The client appends this file to gcra.lua (which documents the arguments and the reply) to make
-- one script; a call that the fast path there cannot take continues here.

local floor = math.floor
local TWO53 = 9007199254740992
-- The finest unit a rate may use: 1/2^32 ns (so that L <= 2^52).
local MAX_D = 4294967296

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

local function lt(am, al, bm, bl)
  return am < bm or (am == bm and al < bl)
end

-- ceil(lo / D) for 0 <= lo < 10^6 * D: float division corrected to the exact quotient
local function ceil_div(lo, D)
  local q = floor(lo / D)
  if q * D > lo then q = q - 1 elseif (q + 1) * D <= lo then q = q + 1 end
  if q * D < lo then q = q + 1 end
  return q
end

local t = redis.call('TIME')
local redis_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
if redis_us > arg(10) then return { 2, redis_us } end
local now_ms, now_ns
if ARGV[1] == '' then
  now_ns = redis_us % 1000
  now_ms = (redis_us - now_ns) / 1000
  now_ns = now_ns * 1000
else
  now_ms, now_ns = arg(1), arg(2)
end
local m = arg(3)
local mw_ms, mw_ns = arg(4), arg(5)
local lease_want = arg(6)
local slack = arg(7)
local write = ARGV[8] == '1'
local rules = ARGV[9] == '1'
local tat = ARGV[9] == '2'
local k = #KEYS

-- Quota j's numbers at Q[7j-6 .. 7j]: D, L, T.ms, T.lo, tau.ms, tau.lo, and now's lo in its units.
-- (Flat tables: a script allocates every table on every call.) With rules, R[j] names its rate
-- as a bucket stores it: "D:T.ms:T.lo".
local Q, R = {}, {}
for j = 1, m do
  local b, o = 10 + (j - 1) * 6, 7 * (j - 1)
  for f = 1, 6 do Q[o + f] = arg(b + f) end
  Q[o + 7] = now_ns * Q[o + 1]
  if rules then R[j] = ARGV[b + 1] .. ':' .. ARGV[b + 3] .. ':' .. ARGV[b + 4] end
end

-- Each key's group at G[i], first bucket at F[i] and number of buckets at C[i]; bucket x's quota
-- at J[x] and cost at W[2x - 1], W[2x].
local G, F, C, J, W = {}, {}, {}, {}, {}
local p, x = 11 + m * 6, 0
for i = 1, k do
  G[i], C[i], F[i] = arg(p), arg(p + 1), x + 1
  p = p + 2
  for _ = 1, C[i] do
    x = x + 1
    J[x], W[2 * x - 1], W[2 * x] = arg(p), arg(p + 1), arg(p + 2)
    p = p + 3
  end
end

-- The backlog (bm, bl) of a bucket kept in another rate (T = (tm, tl) in units with Lo per ms),
-- as a backlog of quota j: its level rounded up to a whole unit of work, that many emission
-- intervals of quota j, capped at quota j's tau. By doubling: only sums and comparisons of
-- pairs, so every number stays exact (each below twice the backlog or twice tau).
local function carry(bm, bl, Lo, tm, tl, j)
  if bm == 0 and bl == 0 then return 0, 0 end
  local o = 7 * (j - 1)
  local L, um, ul = Q[o + 2], Q[o + 5], Q[o + 6]
  -- P[q]: the old interval times 2^(q-1), while below the backlog; N[q]: the new one, while
  -- within tau (nil beyond).
  local Pm, Pl, Nm, Nl = { tm }, { tl }, { Q[o + 3] }, { Q[o + 4] }
  local top = 1
  while true do
    local sm, sl = add(Pm[top], Pl[top], Pm[top], Pl[top], Lo)
    if not lt(sm, sl, bm, bl) then break end
    if Nm[top] ~= nil then
      local nm, nl = add(Nm[top], Nl[top], Nm[top], Nl[top], L)
      if le(nm, nl, um, ul) then Nm[top + 1], Nl[top + 1] = nm, nl end
    end
    top = top + 1
    Pm[top], Pl[top] = sm, sl
  end
  -- The most whole intervals below the backlog, r, greedily; the level is r + 1 whole units,
  -- and the new backlog (r + 1) new intervals, unless that passes tau.
  local am, al = 0, 0
  local nm, nl = Q[o + 3], Q[o + 4]
  local capped = not le(nm, nl, um, ul)
  for q = top, 1, -1 do
    local sm, sl = add(am, al, Pm[q], Pl[q], Lo)
    if lt(sm, sl, bm, bl) then
      am, al = sm, sl
      if not capped then
        if Nm[q] == nil then
          capped = true
        else
          nm, nl = add(nm, nl, Nm[q], Nl[q], L)
          capped = not le(nm, nl, um, ul)
        end
      end
    end
  end
  if capped then return um, ul end
  return nm, nl
end

local function bad(i)
  return redis.error_reply('leakgate: not a leakgate bucket at key ' .. KEYS[i])
end

-- The reply, which also holds each bucket's backlog max(TAT - now, 0) at 7 + 2x - 1 and 7 + 2x.
local reply = { 1, now_ms, now_ns, 0, 0, 0, redis_us }
-- Each bucket's start = max(TAT, now) at S[2x - 1], S[2x]; after a grant, its new TAT.
local S = {}
-- The enforcing buckets' wait; each shadow group's at V[2g - 1], V[2g].
local delay_ms, delay_ns = 0, 0
local V = {}
-- Keys whose stored value must be written even if not charged (carried over, dropped buckets).
local dirty = {}
for i = 1, k do
  local raw = redis.call('GET', KEYS[i])
  if raw == '' then return bad(i) end
  local pos = 1
  for b = 1, C[i] do
    local x = F[i] + b - 1
    local j = J[x]
    local o = 7 * (j - 1)
    local L, nl = Q[o + 2], Q[o + 7]
    local tm, tl = now_ms, nl
    if raw and pos <= #raw then
      if b > 1 then
        if string.sub(raw, pos, pos) ~= ',' then return bad(i) end
        pos = pos + 1
      end
      local a, c, e, rate, _
      if rules then
        _, e, a, c, rate = string.find(raw, '^(%d+):(%d+)@(%d+:%d+:%d+)', pos)
      elseif tat then
        -- One bucket; what follows its units (the note) is the client's.
        _, _, a, c, rate = string.find(raw, '^(%d+):(%d+)@(%d+);')
        e = #raw
      elseif C[i] == 1 then
        a, c = string.match(raw, '^(%d+):(%d+)$')
        e = #raw
      else
        _, e, a, c = string.find(raw, '^(%d+):(%d+)', pos)
      end
      local am, al = num(a), num(c)
      if am == nil or al == nil or (rules and am >= TWO53 / 2) then return bad(i) end
      pos = e + 1
      if tat and rate ~= ARGV[11] then
        -- Written in other units: rounded up to the whole ns, in the call's (exact: q < 10^6
        -- and D <= 2^32).
        local Do = num(rate)
        if al == nil or Do == nil or Do < 1 or Do > MAX_D or al >= Do * 1000000 then
          return bad(i)
        end
        local q = ceil_div(al, Do)
        if q >= 1000000 then am, q = am + 1, q - 1000000 end
        al = q * Q[o + 1]
      end
      if not rules or rate == R[j] then
        if al >= L then return bad(i) end
        if not le(am, al, now_ms, nl) then tm, tl = am, al end
      else
        -- Kept in another rate: carried over to quota j.
        local d, r1, r2 = string.match(rate, '^(%d+):(%d+):(%d+)$')
        local Do, rm, rl = num(d), num(r1), num(r2)
        if Do == nil or rm == nil or rl == nil or Do < 1 or Do > MAX_D then return bad(i) end
        local Lo = Do * 1000000
        if al >= Lo or rl >= Lo or (rm == 0 and rl == 0) then return bad(i) end
        local nlo = now_ns * Do
        if not le(am, al, now_ms, nlo) then
          local bm, bl = sub(am, al, now_ms, nlo, Lo)
          local cm, cl = carry(bm, bl, Lo, rm, rl, j)
          tm, tl = add(now_ms, nl, cm, cl, L)
        end
        dirty[i] = true
      end
    elseif raw and not rules then
      return bad(i)
    elseif raw then
      -- A quota the stored buckets lack: it starts empty.
      dirty[i] = true
    end
    if rules then
      -- A bucket beyond its quota's tau (the quota's burst was lowered) is capped at it.
      local cm, cl = add(now_ms, nl, Q[o + 5], Q[o + 6], L)
      if not le(tm, tl, cm, cl) then
        tm, tl = cm, cl
        dirty[i] = true
      end
    end
    S[2 * x - 1], S[2 * x] = tm, tl
  end
  if raw and pos ~= #raw + 1 then
    -- More buckets stored than the key has: with rules, a quota removed from its rule. Each
    -- must still be a bucket.
    if not rules then return bad(i) end
    while pos <= #raw do
      local _, e = string.find(raw, '^,%d+:%d+@%d+:%d+:%d+', pos)
      if e == nil then return bad(i) end
      pos = e + 1
    end
    dirty[i] = true
  end
end

-- A lease request says when, as far as its caller knows, each bucket of its key will be empty
-- (ARGV after the keys: T.ms, T.lo per quota; 0, 0 if it does not know). A bucket never empties
-- sooner than that: its TAT only grows, and a key expires only once all its buckets are empty.
-- So a bucket found emptier than that was lost (FLUSHALL, a restart, an eviction), while units
-- its caller and others leased from it may still be in use. Every bucket of the key then starts
-- full, no sooner empty than the lost one could have been (its TAT was at most now + tau):
-- units still leased from the lost bucket and units admitted from now on share one schedule.
local lost = false
if lease_want > 0 and k == 1 and not rules then
  for x = 1, C[1] do
    local km, kl = arg(p + 2 * x - 2), arg(p + 2 * x - 1)
    if not le(km, kl, S[2 * x - 1], S[2 * x]) then lost = true end
  end
  if lost then
    for x = 1, C[1] do
      local o = 7 * (J[x] - 1)
      local fm, fl = add(now_ms, Q[o + 7], Q[o + 5], Q[o + 6], Q[o + 2])
      if lt(S[2 * x - 1], S[2 * x], fm, fl) then S[2 * x - 1], S[2 * x] = fm, fl end
    end
    dirty[1] = true
  end
end

-- Each bucket's backlog, for the reply, and the wait before it conforms: max(backlog + cost -
-- tau, 0), in whole ns.
for i = 1, k do
  local g = G[i]
  for x = F[i], F[i] + C[i] - 1 do
    local o = 7 * (J[x] - 1)
    local bm, bl = sub(S[2 * x - 1], S[2 * x], now_ms, Q[o + 7], Q[o + 2])
    reply[6 + 2 * x], reply[7 + 2 * x] = bm, bl
    local sm, sl = add(bm, bl, W[2 * x - 1], W[2 * x], Q[o + 2])
    if not le(sm, sl, Q[o + 5], Q[o + 6]) then
      local wm, wl = sub(sm, sl, Q[o + 5], Q[o + 6], Q[o + 2])
      local wn = ceil_div(wl, Q[o + 1])
      if wn >= 1000000 then wm, wn = wm + 1, wn - 1000000 end
      if g == 0 then
        if not le(wm, wn, delay_ms, delay_ns) then delay_ms, delay_ns = wm, wn end
      elseif V[2 * g - 1] == nil or not le(wm, wn, V[2 * g - 1], V[2 * g]) then
        V[2 * g - 1], V[2 * g] = wm, wn
      end
    end
  end
end

-- A peek decides nothing; a refusal charges nothing. Either returns now unless a key was carried
-- over, whose new state is written (it means the same as the stored one, in the key's quotas).
local granted = write
if write then
  reply[4], reply[5] = delay_ms, delay_ns
  granted = le(delay_ms, delay_ns, mw_ms, mw_ns)
  if not granted then reply[1] = 0 end
end
if not granted and next(dirty) == nil then
  return reply
end

-- Which keys are charged: with a grant, the enforcing ones and those of every shadow group that
-- conforms too. Each is charged from the time the request goes: TAT := max(TAT, now + delay) + cost.
local charged = {}
if granted then
  for i = 1, k do
    local g = G[i]
    if g == 0 or V[2 * g - 1] == nil or le(V[2 * g - 1], V[2 * g], mw_ms, mw_ns) then
      charged[i] = true
      for x = F[i], F[i] + C[i] - 1 do
        local o = 7 * (J[x] - 1)
        local L = Q[o + 2]
        local gm, gl = add(now_ms, Q[o + 7], delay_ms, delay_ns * Q[o + 1], L)
        local bm, bl = S[2 * x - 1], S[2 * x]
        if le(bm, bl, gm, gl) then bm, bl = gm, gl end
        S[2 * x - 1], S[2 * x] = add(bm, bl, W[2 * x - 1], W[2 * x], L)
      end
    end
  end
end

-- A lease: the most extra units up to lease_want that conform now in every bucket, found by
-- trying powers of two from the largest down (T * 2^p by doubling, so only sums are exact). Only
-- for one plain key, whose bucket j is quota j.
if lease_want > 0 and k == 1 and not rules and granted and delay_ms == 0 and delay_ns == 0 then
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
    local q = 0
    while 2 ^ q < n do q = q + 1 end
    if leased + n <= lease_want then
      local fits = true
      for j = 1, m do
        local o, L = 7 * (j - 1), Q[7 * j - 5]
        local am, al = add(S[2 * j - 1], S[2 * j], pw[2 * m * q + 2 * j - 1], pw[2 * m * q + 2 * j], L)
        local lm, ll = add(now_ms, Q[o + 7], Q[o + 5], Q[o + 6], L)
        if not le(am, al, lm, ll) then fits = false break end
      end
      if fits then
        leased = leased + n
        for j = 1, m do
          S[2 * j - 1], S[2 * j] =
            add(S[2 * j - 1], S[2 * j], pw[2 * m * q + 2 * j - 1], pw[2 * m * q + 2 * j], Q[7 * j - 5])
        end
      end
    end
    n = n / 2
  end
  reply[6] = leased
end

-- Write each charged (or carried-over) key's buckets, to expire when the last of them is empty
-- again (plus the slack).
for i = 1, k do
  if charged[i] or dirty[i] then
    local value, ttl = '', 0
    for x = F[i], F[i] + C[i] - 1 do
      local j = J[x]
      local o = 7 * (j - 1)
      local pair = string.format('%.0f:%.0f', S[2 * x - 1], S[2 * x])
      if rules then pair = pair .. '@' .. R[j] end
      if tat then pair = pair .. '@' .. ARGV[11] .. ';' .. ARGV[#ARGV] end
      if x == F[i] then value = pair else value = value .. ',' .. pair end
      if not le(S[2 * x - 1], S[2 * x], now_ms, Q[o + 7]) then
        local dm, dl = sub(S[2 * x - 1], S[2 * x], now_ms, Q[o + 7], Q[o + 2])
        if dl > 0 then dm = dm + 1 end
        if dm > ttl then ttl = dm end
      end
    end
    redis.call('SET', KEYS[i], value, 'PX', string.format('%.0f', ttl + slack + 1))
  end
end
if lost then reply[1] = reply[1] + 2 end
return reply
