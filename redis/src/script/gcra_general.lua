-- leakgate GCRA, the general path: any keys, quotas, groups, rules, leases and reservations.
-- The client appends this file to gcra.lua (which documents the arguments and the reply) and
-- gcra_carry.lua (the pair arithmetic and the carry it uses) to make one script; a call that the
-- fast path cannot take continues here.

-- Arguments come from leakgate's client, which keeps them below 2^53: tonumber suffices.
local function arg(i)
  local v = tonumber(ARGV[i])
  if v == nil then error('leakgate: bad argument ' .. i) end
  return v
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
-- ARGV[8]: "1" charge, "0" peek, or a phase of a cross-slot call: "r" reserve, "c" commit,
-- "x" release (see the holds, below), whose id and hold expiry (µs, Redis's clock) end ARGV.
local op = ARGV[8]
local write = op == '1' or op == 'r'
local hold_id, hold_exp
if op == 'r' or op == 'c' or op == 'x' then
  hold_id, hold_exp = ARGV[#ARGV - 1], arg(#ARGV)
  if not string.match(hold_id, '^%x+$') or (ARGV[9] ~= '0' and ARGV[9] ~= '1') then error('leakgate: bad hold') end
end
local rules = ARGV[9] == '1'
local tat = ARGV[9] == '2'
-- Quota j's numbers at Q[7j-6 .. 7j]: D, L, T.ms, T.lo, tau.ms, tau.lo, and now's lo in its units.
-- (Flat tables: a script allocates every table on every call.) With rules, R[j] names its quota
-- as a bucket stores it: "D:T.ms:T.lo:tau.ms:tau.lo".
local Q, R = {}, {}
for j = 1, m do
  local b, o = 10 + (j - 1) * 6, 7 * (j - 1)
  for f = 1, 6 do Q[o + f] = arg(b + f) end
  Q[o + 7] = now_ns * Q[o + 1]
  if rules then
    R[j] = ARGV[b + 1] .. ':' .. ARGV[b + 3] .. ':' .. ARGV[b + 4] .. ':' .. ARGV[b + 5] .. ':' .. ARGV[b + 6]
  end
end

-- Each key's Redis key at KEYS[K[i]], group at G[i], first bucket at F[i] and number of buckets
-- at C[i]; bucket x's quota at J[x] and cost at W[2x - 1], W[2x]. With rules, a key's origins
-- follow it in KEYS (its buckets under the paths earlier rules gave it), O[i] listing each as
-- { index in KEYS, number of quotas of its rule there } (NONE: no origins): the key count k is
-- found by reading.
local K, G, F, C, J, W, O, NONE = {}, {}, {}, {}, {}, {}, {}, {}
local p, x, k = 11 + m * 6, 0, 0
local used = 0
while used < #KEYS do
  k = k + 1
  used = used + 1
  K[k], G[k], C[k], F[k] = used, arg(p), arg(p + 1), x + 1
  p = p + 2
  for _ = 1, C[k] do
    x = x + 1
    J[x], W[2 * x - 1], W[2 * x] = arg(p), arg(p + 1), arg(p + 2)
    p = p + 3
  end
  if rules then
    local n = arg(p)
    p = p + 1
    if n > 0 then O[k] = {} end
    for r = 1, n do
      used = used + 1
      O[k][r] = { used, arg(p) }
      p = p + 1
    end
  end
end
if used ~= #KEYS then error('leakgate: bad keys') end

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
-- Keys whose stored value must be written even if not charged (carried over, dropped buckets,
-- origins taken in).
local dirty = {}
-- Holds of cross-slot calls (plain and rule buckets; script version 4). A call whose keys live in
-- several Redis Cluster slots is decided in two phases: each slot's script reserves ("r"): its
-- buckets conform counting every live hold as charged, and then it records a hold
-- ";id/t.ms/t.ns/exp.us/c.ms/c.lo/..." (the call's id, its time, when the hold expires, and the
-- cost of each bucket) after the key's buckets, charging nothing. Then the caller commits ("c":
-- TAT := max(TAT, t) + c, the charge at the hold's time) or releases ("x": the hold is dropped)
-- on every slot. A hold past its expiry is committed by whichever script next reads the key,
-- never dropped: its caller may have been admitted. HC[2x - 1], HC[2x]: the live holds' cost on
-- bucket x; HS[i]: key i's live holds as stored; A: each bucket's TAT without the live holds
-- (what is stored), while S counts them (what decides).
-- HT: each plain bucket's stored TAT (0 if none; not raised to now), which a commit charges; a
-- rule bucket's only if its key has holds (else what is stored is S, raised to now, as before),
-- or its carried TAT where it was carried or an origin was fuller (those are at least now).
local HC, HS, A, HT = {}, {}, {}, {}

-- A rule bucket's TAT (am, al, in units of Do), carried to quota j as of now: its new TAT.
local function carried(am, al, Do, tm, tl, um, ul, j)
  local o = 7 * (j - 1)
  local nlo, bm, bl = now_ns * Do, 0, 0
  if not le(am, al, now_ms, nlo) then bm, bl = sub(am, al, now_ms, nlo, Do * 1000000) end
  local cm, cl = carry(bm, bl, Do, tm, tl, um, ul, Q, o)
  return add(now_ms, Q[o + 7], cm, cl, Q[o + 2])
end

-- Every rule bucket of a stored value `raw` from `pos` (after a mark): a list of
-- { start, end, TAT.ms, TAT.lo, D, T.ms, T.lo, tau.ms, tau.lo }, or nil if one is not a bucket.
local function rule_buckets(raw, pos)
  local list = {}
  while pos <= #raw do
    if #list > 0 then
      if string.sub(raw, pos, pos) ~= ',' then return nil end
      pos = pos + 1
    end
    local e, am, al, Do, tm, tl, um, ul = rule_bucket(raw, pos)
    if e == nil then return nil end
    list[#list + 1] = { pos, e, am, al, Do, tm, tl, um, ul }
    pos = e + 1
  end
  return list
end

local read_holds

for i = 1, k do
  local raw = redis.call('GET', KEYS[K[i]])
  if raw == '' then return bad(K[i]) end
  -- Made only for a call that meets a hold (a script pays for every function it makes).
  if read_holds == nil and raw and not tat and string.find(raw, ';', 1, true) then
    -- Key i's holds as stored (its buckets read into S and HT, in the call's quotas): its caller's
    -- own committed or dropped, every expired one committed, the live ones counted in HC and kept
    -- in HS[i]. False if one is not a hold of this key.
    read_holds = function(i, holds)
      local kept = ''
      for h in string.gmatch(holds, '[^;]+') do
        local f = {}
        for v in string.gmatch(h, '[^/]+') do f[#f + 1] = v end
        if #f ~= 4 + 2 * C[i] or not string.match(f[1], '^%x+$') then return false end
        for e = 2, #f do
          f[e] = num(f[e])
          -- Times and costs within the pairs' range (see gcra_carry.lua); the expiry is µs.
          if f[e] == nil or (e ~= 4 and f[e] >= TWO53 / 4) then return false end
        end
        local mine = f[1] == hold_id
        if mine and op == 'x' then
          -- Released by its caller, who was not admitted: dropped, even past its expiry.
          dirty[i] = true
        elseif f[4] <= redis_us or (mine and op == 'c') then
          -- Committed: the charge at the hold's time, TAT := max(TAT, t) + c, after every
          -- charge stored (never less than the charges in the order of their times: see
          -- connection/cross_slot.rs in leakgate-redis).
          for b = 1, C[i] do
            local x = F[i] + b - 1
            local o = 7 * (J[x] - 1)
            local L, tm, tl = Q[o + 2], f[2], f[3] * Q[o + 1]
            if f[3] >= 1000000 or f[4 + 2 * b] >= L then return false end
            if HT[2 * x - 1] ~= nil and lt(tm, tl, HT[2 * x - 1], HT[2 * x]) then tm, tl = HT[2 * x - 1], HT[2 * x] end
            tm, tl = add(tm, tl, f[3 + 2 * b], f[4 + 2 * b], L)
            HT[2 * x - 1], HT[2 * x] = tm, tl
            if lt(S[2 * x - 1], S[2 * x], tm, tl) then S[2 * x - 1], S[2 * x] = tm, tl end
          end
          dirty[i] = true
        else
          kept = kept .. ';' .. h
          for b = 1, C[i] do
            local x = F[i] + b - 1
            local L = Q[7 * (J[x] - 1) + 2]
            if f[4 + 2 * b] >= L then return false end
            HC[2 * x - 1], HC[2 * x] = add(HC[2 * x - 1] or 0, HC[2 * x] or 0, f[3 + 2 * b], f[4 + 2 * b], L)
          end
        end
      end
      HS[i] = kept
      return true
    end
  end
  if rules then
    -- Each bucket kept in its quota is read as it is; one kept in another quota (or written by
    -- script version 2) is carried over to its quota now; a quota the stored buckets lack
    -- starts empty; buckets beyond the key's quotas (a quota removed) are dropped. A mark ('~':
    -- a copy kept for servers on other rules, below) changes nothing for the key's own rules.
    -- Holds follow the buckets (a cross-slot call's, as on a plain key), their costs in the
    -- quotas the buckets are kept in.
    local list, holds
    if raw then
      local body, cut = raw, string.find(raw, ';', 1, true)
      if cut then body, holds = string.sub(raw, 1, cut - 1), string.sub(raw, cut + 1) end
      list = rule_buckets(body, string.sub(body, 1, 1) == '~' and 2 or 1)
      if list == nil or #list == 0 then return bad(K[i]) end
      if #list ~= C[i] then dirty[i] = true end
    end
    -- Whether the held buckets are kept in the call's quotas (only asked of a key with holds).
    local kept = holds ~= nil and #list == C[i]
    for b = 1, kept and C[i] or 0 do
      local s, o = list[b], 7 * (J[F[i] + b - 1] - 1)
      if not (s[5] == Q[o + 1] and s[6] == Q[o + 3] and s[7] == Q[o + 4] and s[8] == Q[o + 5] and s[9] == Q[o + 6]) then
        kept = false
      end
    end
    if holds and not kept then
      -- The key's quotas changed while holds were on it: each is committed now, in the quota
      -- it was held in, before the buckets are carried (against the caller: a hold released
      -- later leaves its charge), except the caller's own release.
      for h in string.gmatch(holds, '[^;]+') do
        local f = {}
        for v in string.gmatch(h, '[^/]+') do f[#f + 1] = v end
        if #f < 6 or #f % 2 ~= 0 or not string.match(f[1], '^%x+$') then return bad(K[i]) end
        for e = 2, #f do
          f[e] = num(f[e])
          if f[e] == nil or (e ~= 4 and f[e] >= TWO53 / 4) or (e == 3 and f[e] >= 1000000) then return bad(K[i]) end
        end
        if not (f[1] == hold_id and op == 'x') then
          for b = 1, math.min(#list, (#f - 4) / 2) do
            local s = list[b]
            local Lo, tm, tl = s[5] * 1000000, f[2], f[3] * s[5]
            if f[4 + 2 * b] >= Lo then return bad(K[i]) end
            if lt(tm, tl, s[3], s[4]) then tm, tl = s[3], s[4] end
            s[3], s[4] = add(tm, tl, f[3 + 2 * b], f[4 + 2 * b], Lo)
          end
        end
      end
      holds = nil
      dirty[i] = true
    end
    for b = 1, C[i] do
      local x = F[i] + b - 1
      local j = J[x]
      local o = 7 * (j - 1)
      local tm, tl = now_ms, Q[o + 7]
      -- With holds, the stored TAT is kept as it is, not raised to now (a hold committed later
      -- is charged at its own time; without holds now, a later hold's time is at least now).
      local hm, hl = 0, 0
      local s = list and list[b]
      if s then
        if s[5] == Q[o + 1] and s[6] == Q[o + 3] and s[7] == Q[o + 4] and s[8] == Q[o + 5] and s[9] == Q[o + 6] then
          hm, hl = s[3], s[4]
          if not le(s[3], s[4], tm, tl) then tm, tl = s[3], s[4] end
        else
          tm, tl = carried(s[3], s[4], s[5], s[6], s[7], s[8], s[9], j)
          hm, hl = tm, tl
          dirty[i] = true
        end
      end
      S[2 * x - 1], S[2 * x] = tm, tl
      if holds then HT[2 * x - 1], HT[2 * x] = hm, hl end
    end
    if holds and not read_holds(i, holds) then return bad(K[i]) end
    -- The key's buckets under the paths earlier rules gave it: each unmarked one (written by a
    -- server on those rules since this key was last carried from it) is carried to the key's
    -- quotas, bucket by bucket, and the fuller of the two kept, so what either side charged
    -- counts. A marked one is a copy of this key's own buckets: nothing to take in.
    for _, origin in ipairs(O[i] or NONE) do
      local raw2 = redis.call('GET', KEYS[origin[1]])
      if raw2 == '' then return bad(origin[1]) end
      if raw2 then
        -- Holds there (a cross-slot call of a server on those rules) are kept there for it, and
        -- counted here as charged now, on top of an unmarked origin's buckets. A marked one's
        -- were counted when it was taken in (the copy is this key's state since): not again.
        local cut, oh = string.find(raw2, ';', 1, true), nil
        if cut then raw2, oh = string.sub(raw2, 1, cut - 1), string.sub(raw2, cut + 1) end
        local marked = string.sub(raw2, 1, 1) == '~'
        local found = rule_buckets(raw2, marked and 2 or 1)
        if found == nil or #found == 0 then return bad(origin[1]) end
        origin.raw, origin.found, origin.holds = raw2, found, oh
        for h in string.gmatch(not marked and oh or '', '[^;]+') do
          local f = {}
          for v in string.gmatch(h, '[^/]+') do f[#f + 1] = v end
          if #f < 6 or #f % 2 ~= 0 or not string.match(f[1], '^%x+$') then return bad(origin[1]) end
          for b = 1, math.min(#found, (#f - 4) / 2) do
            local s, c, d = found[b], num(f[3 + 2 * b]), num(f[4 + 2 * b])
            local Lo, nlo = s[5] * 1000000, now_ns * s[5]
            if c == nil or d == nil or c >= TWO53 / 4 or d >= Lo then return bad(origin[1]) end
            if lt(s[3], s[4], now_ms, nlo) then s[3], s[4] = now_ms, nlo end
            s[3], s[4] = add(s[3], s[4], c, d, Lo)
          end
        end
        if not marked then
          for b = 1, math.min(#found, C[i]) do
            local x, s = F[i] + b - 1, found[b]
            local tm, tl = carried(s[3], s[4], s[5], s[6], s[7], s[8], s[9], J[x])
            if lt(S[2 * x - 1], S[2 * x], tm, tl) then S[2 * x - 1], S[2 * x] = tm, tl end
            if HT[2 * x - 1] ~= nil and lt(HT[2 * x - 1], HT[2 * x], tm, tl) then HT[2 * x - 1], HT[2 * x] = tm, tl end
          end
          dirty[i] = true
        end
      end
    end
  else
    local pos, holds = 1, nil
    if raw and not tat then
      local cut = string.find(raw, ';', 1, true)
      if cut then raw, holds = string.sub(raw, 1, cut - 1), string.sub(raw, cut + 1) end
    end
    for b = 1, C[i] do
      local x = F[i] + b - 1
      local o = 7 * (J[x] - 1)
      local L, nl = Q[o + 2], Q[o + 7]
      local tm, tl = now_ms, nl
      if raw then
        if b > 1 then
          if string.sub(raw, pos, pos) ~= ',' then return bad(K[i]) end
          pos = pos + 1
        end
        local a, c, e, rate, _
        if tat then
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
        if am == nil or al == nil then return bad(K[i]) end
        pos = e + 1
        local Do = tat and num(rate)
        if tat and Do ~= Q[o + 1] then
          -- Written in other units: rounded up to the whole ns, in the call's (exact: q < 10^6
          -- and D <= 2^32).
          if Do == nil or Do < 1 or Do > MAX_D or al >= Do * 1000000 then return bad(K[i]) end
          local q = ceil_div(al, Do)
          if q >= 1000000 then am, q = am + 1, q - 1000000 end
          al = q * Q[o + 1]
        end
        if al >= L then return bad(K[i]) end
        if not le(am, al, now_ms, nl) then tm, tl = am, al end
        if not tat then HT[2 * x - 1], HT[2 * x] = am, al end
      elseif not tat then
        HT[2 * x - 1], HT[2 * x] = 0, 0
      end
      S[2 * x - 1], S[2 * x] = tm, tl
    end
    if raw and pos ~= #raw + 1 then return bad(K[i]) end
    if holds and not read_holds(i, holds) then return bad(K[i]) end
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

-- What is stored (A), and what decides (S): the stored TAT plus every live hold. A plain bucket
-- keeps its TAT as stored (not raised to now), so that a hold committed later is charged at its
-- own time.
for x = 1, #S / 2 do
  if HT[2 * x - 1] ~= nil and not lost then
    A[2 * x - 1], A[2 * x] = HT[2 * x - 1], HT[2 * x]
  else
    A[2 * x - 1], A[2 * x] = S[2 * x - 1], S[2 * x]
  end
  if HC[2 * x - 1] then
    S[2 * x - 1], S[2 * x] = add(S[2 * x - 1], S[2 * x], HC[2 * x - 1], HC[2 * x], Q[7 * (J[x] - 1) + 2])
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
      -- A reserve records its hold (counted in S from now on), and charges nothing.
      if op == 'r' then
        HS[i] = (HS[i] or '') .. ';' .. hold_id .. '/' .. string.format('%.0f/%.0f/%.0f', now_ms, now_ns, hold_exp)
      end
      for x = F[i], F[i] + C[i] - 1 do
        local o = 7 * (J[x] - 1)
        local L = Q[o + 2]
        local gm, gl = add(now_ms, Q[o + 7], delay_ms, delay_ns * Q[o + 1], L)
        local bm, bl = S[2 * x - 1], S[2 * x]
        if le(bm, bl, gm, gl) then bm, bl = gm, gl end
        S[2 * x - 1], S[2 * x] = add(bm, bl, W[2 * x - 1], W[2 * x], L)
        if op == 'r' then
          HS[i] = HS[i] .. string.format('/%.0f/%.0f', W[2 * x - 1], W[2 * x])
        else
          bm, bl = A[2 * x - 1], A[2 * x]
          if le(bm, bl, gm, gl) then bm, bl = gm, gl end
          A[2 * x - 1], A[2 * x] = add(bm, bl, W[2 * x - 1], W[2 * x], L)
        end
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
          A[2 * j - 1], A[2 * j] =
            add(A[2 * j - 1], A[2 * j], pw[2 * m * q + 2 * j - 1], pw[2 * m * q + 2 * j], Q[7 * j - 5])
        end
      end
    end
    n = n / 2
  end
  reply[6] = leased
end

-- Ms until a backlog (bm, bl) is gone, rounded up.
local function ms_up(bm, bl)
  if bl > 0 then return bm + 1 end
  return bm
end

-- Write each charged (or carried-over) key's buckets, to expire when the last of them is empty
-- again (plus the slack).
for i = 1, k do
  if charged[i] or dirty[i] then
    local value, ttl = '', 0
    for x = F[i], F[i] + C[i] - 1 do
      local j = J[x]
      local o = 7 * (j - 1)
      local pair = string.format('%.0f:%.0f', A[2 * x - 1], A[2 * x])
      if rules then pair = pair .. '@' .. R[j] end
      if tat then pair = pair .. '@' .. ARGV[11] .. ';' .. ARGV[#ARGV] end
      if x == F[i] then value = pair else value = value .. ',' .. pair end
      if not le(S[2 * x - 1], S[2 * x], now_ms, Q[o + 7]) then
        local dm = ms_up(sub(S[2 * x - 1], S[2 * x], now_ms, Q[o + 7], Q[o + 2]))
        if dm > ttl then ttl = dm end
      end
    end
    local body = value
    -- Live holds stay after the buckets, and keep the key until they expire and their charge
    -- (counted in S, so in ttl) has passed.
    if HS[i] and HS[i] ~= '' then
      value = value .. HS[i]
      local last = 0
      for e in string.gmatch(HS[i], ';%x+/%d+/%d+/(%d+)') do
        if tonumber(e) > last then last = tonumber(e) end
      end
      if last > redis_us then ttl = ttl + math.ceil((last - redis_us) / 1000) end
    end
    redis.call('SET', KEYS[K[i]], value, 'PX', string.format('%.0f', ttl + slack + 1))
    -- At each origin, a marked ('~') copy of the key's buckets as they are (each names its
    -- quota): a server still on those rules reads (and charges) the key's state there, carried
    -- to its own quotas as it reads it, and what it charges is taken in above at this key's
    -- next check. Buckets of the origin beyond the key's, up to its rule's quotas there, are
    -- kept as they were.
    for _, origin in ipairs(O[i] or NONE) do
      local copy, life, found = '~' .. body, ttl, origin.found or NONE
      for b = C[i] + 1, math.min(#found, origin[2]) do
        local s = found[b]
        copy = copy .. ',' .. string.sub(origin.raw, s[1], s[2])
        local nlo = now_ns * s[5]
        if not le(s[3], s[4], now_ms, nlo) then
          local left = ms_up(sub(s[3], s[4], now_ms, nlo, s[5] * 1000000))
          if left > life then life = left end
        end
      end
      -- The origin's holds stay there, for its server to commit or release.
      if origin.holds then
        copy = copy .. ';' .. origin.holds
        local last = 0
        for e in string.gmatch(';' .. origin.holds, ';%x+/%d+/%d+/(%d+)') do
          if tonumber(e) > last then last = tonumber(e) end
        end
        if last > redis_us then life = life + math.ceil((last - redis_us) / 1000) end
      end
      redis.call('SET', KEYS[origin[1]], copy, 'PX', string.format('%.0f', life + slack + 1))
    end
  end
end
if lost then reply[1] = reply[1] + 2 end
return reply
