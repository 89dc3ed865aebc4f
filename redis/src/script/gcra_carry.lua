-- leakgate GCRA, the general path's arithmetic: exact pairs, and a rule bucket carried to another
-- quota. The client puts this file between gcra.lua (the fast path) and gcra_general.lua (which
-- uses it), to make one script; nothing here runs on the fast path.
--
-- A pair (m, l) is m whole milliseconds and l units of 1/D ns, 0 <= l < L = 10^6 * D <= 2^52
-- (see gcra.lua): sums, differences, halves and comparisons of pairs below 2^52 ms are exact.

local floor = math.floor
local TWO53 = 9007199254740992
-- The finest unit a rate may use: 1/2^32 ns (so that L <= 2^52).
local MAX_D = 4294967296
-- The largest backlog a carried bucket keeps (2^50 ms, about 35,000 years): a debt carried to a
-- much slower rate saturates here, and TAT = now + backlog stays below 2^51 ms.
local MAX_BACKLOG = 1125899906842624

-- A decimal field of a stored bucket (digits only, by the pattern that captured it): its value if
-- it is below 2^53, else nil.
local function num(s)
  if s == nil or #s > 16 then return nil end
  local v = tonumber(s)
  if v >= TWO53 then return nil end
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

-- A quota's numbers are read from a flat table q at q[o + 1 .. o + 6]: D, L, T.ms, T.lo, tau.ms,
-- tau.lo (gcra_general.lua's Q).

-- x * T' / T rounded down (up if `up`), at most the cap c: a span x of a rate whose interval is
-- T = (fm, fl) in units with Lo per ms, as the same number of intervals (whole and fractional) of
-- the quota at q[o + 1 ..], whose interval is T'. Exact with sums, halves and comparisons only:
-- * whole intervals by doubling: P[q] = T * 2^(q-1) while within x, V[q] = T' * 2^(q-1) while
--   within the cap (nil beyond), taken greedily from the largest;
-- * the rest r < T as floor(r * T' / T) by the bits of T' from the lowest: r * 2^i is
--   g * T + h (h < T) for each i, doubled step by step, and the g and h of each bit of T' are
--   summed, the h carried into the result each time they reach T. The sum of the h left over is
--   r * T' mod T: not zero means the quotient was not whole.
-- Every number stays below twice x, T, T' or the cap.
local function scale(xm, xl, Lo, fm, fl, q, o, up, cm, cl)
  local L, nm, nl = q[o + 2], q[o + 3], q[o + 4]
  local Pm, Pl, Vm, Vl = { fm }, { fl }, {}, {}
  -- A quotient (qm, ql) in intervals of T' plus (am, al), and its remainder (rm, rl) < T plus
  -- (bm, bl) < T, the remainder carried into the quotient when it reaches T (once is enough).
  local function plus(qm, ql, rm, rl, am, al, bm, bl)
    qm, ql = add(qm, ql, am, al, L)
    rm, rl = add(rm, rl, bm, bl, Lo)
    if le(fm, fl, rm, rl) then
      rm, rl = sub(rm, rl, fm, fl, Lo)
      qm, ql = add(qm, ql, 0, 1, L)
    end
    return qm, ql, rm, rl
  end
  if le(nm, nl, cm, cl) then Vm[1], Vl[1] = nm, nl end
  local top = 0
  if le(fm, fl, xm, xl) then top = 1 end
  while top > 0 do
    local sm, sl = add(Pm[top], Pl[top], Pm[top], Pl[top], Lo)
    if not le(sm, sl, xm, xl) then break end
    if Vm[top] ~= nil then
      local vm, vl = add(Vm[top], Vl[top], Vm[top], Vl[top], L)
      if le(vm, vl, cm, cl) then Vm[top + 1], Vl[top + 1] = vm, vl end
    end
    top = top + 1
    Pm[top], Pl[top] = sm, sl
  end
  local am, al, rm, rl = 0, 0, 0, 0
  for b = top, 1, -1 do
    local sm, sl = add(am, al, Pm[b], Pl[b], Lo)
    if le(sm, sl, xm, xl) then
      if Vm[b] == nil then return cm, cl end
      am, al = sm, sl
      rm, rl = add(rm, rl, Vm[b], Vl[b], L)
      if not le(rm, rl, cm, cl) then return cm, cl end
    end
  end
  local hm, hl = sub(xm, xl, am, al, Lo)
  if hm ~= 0 or hl ~= 0 then
    local gm, gl, sm, sl, tm, tl = 0, 0, 0, 0, nm, nl
    while tm ~= 0 or tl ~= 0 do
      -- L is even (10^6 * D): the parity of T' >> i is that of its lo field.
      if tl % 2 == 1 then rm, rl, sm, sl = plus(rm, rl, sm, sl, gm, gl, hm, hl) end
      if tm % 2 == 1 then tm, tl = (tm - 1) / 2, floor((tl + L) / 2) else tm, tl = tm / 2, floor(tl / 2) end
      gm, gl, hm, hl = plus(gm, gl, hm, hl, gm, gl, hm, hl)
    end
    if up and (sm ~= 0 or sl ~= 0) then rm, rl = add(rm, rl, 0, 1, L) end
  end
  if not le(rm, rl, cm, cl) then return cm, cl end
  return rm, rl
end

-- The backlog (bm, bl) = max(TAT - now, 0) of a rule bucket kept in another quota (D = Do,
-- T = (tm, tl), tau = (um, ul); um nil for a bucket of script version 2, which kept no tau), as
-- a backlog of the quota at q[o + 1 ..] (the contract's "Rules", reload): the units it could admit now, its burst
-- less its level (tau - backlog, as intervals), become the units quota j's bucket can admit,
-- capped at the new burst; a backlog beyond tau (a debt) stays a debt beyond the new tau.
-- Against the caller: the units available rounded down, a debt up, to the new quota's unit 1/D;
-- a rate kept (the same D and T) keeps every span exactly. So no change, however frequent, makes
-- more units available than before it: a shrink keeps the debt it cannot hold, and a grow adds
-- nothing at once (the new units come at the rate). A version 2 bucket keeps its level (the
-- meaning it was written with), rounded up.
local function carry(bm, bl, Do, tm, tl, um, ul, q, o)
  local L, vm, vl = q[o + 2], q[o + 5], q[o + 6]
  local Lo = Do * 1000000
  local same = Do == q[o + 1] and tm == q[o + 3] and tl == q[o + 4]
  if um == nil then
    if same then return bm, bl end
    return scale(bm, bl, Lo, tm, tl, q, o, true, MAX_BACKLOG, 0)
  end
  if le(bm, bl, um, ul) then
    local am, al = sub(um, ul, bm, bl, Lo)
    if not same then am, al = scale(am, al, Lo, tm, tl, q, o, false, vm, vl) end
    if not le(am, al, vm, vl) then return 0, 0 end
    return sub(vm, vl, am, al, L)
  end
  local dm, dl = sub(bm, bl, um, ul, Lo)
  if not same then dm, dl = scale(dm, dl, Lo, tm, tl, q, o, true, MAX_BACKLOG, 0) end
  dm, dl = add(vm, vl, dm, dl, L)
  if dm >= MAX_BACKLOG then return MAX_BACKLOG, 0 end
  return dm, dl
end

-- The rule bucket of `raw` at `pos`: "TAT.ms:TAT.lo@D:T.ms:T.lo:tau.ms:tau.lo" (script version
-- 3), or the same without ":tau.ms:tau.lo" (version 2). Returns its end and its numbers (tau nil
-- for version 2), or nil if it is not a bucket this script can hold.
local function rule_bucket(raw, pos)
  local _, e, a, c, d, x, y = string.find(raw, '^(%d+):(%d+)@(%d+):(%d+):(%d+)', pos)
  if e == nil then return nil end
  local _, e3, u, v = string.find(raw, '^:(%d+):(%d+)', e + 1)
  local am, al, Do, tm, tl = num(a), num(c), num(d), num(x), num(y)
  if am == nil or al == nil or Do == nil or tm == nil or tl == nil then return nil end
  if am >= TWO53 / 2 or Do < 1 or Do > MAX_D then return nil end
  local Lo = Do * 1000000
  if al >= Lo or tl >= Lo or (tm == 0 and tl == 0) then return nil end
  local um, ul
  if e3 ~= nil then
    um, ul, e = num(u), num(v), e3
    if um == nil or ul == nil or ul >= Lo or um >= TWO53 / 2 then return nil end
  end
  return e, am, al, Do, tm, tl, um, ul
end
