-- leakgate GCRA, script version 4: one decision over several buckets, all or nothing, taken only
-- if the call has not passed its deadline. (Version 3: a rule bucket also stores its quota's tau,
-- and a change of quota carries the units a bucket could admit, not its level; and a key may
-- hold one TAT under the quota each call brings: ARGV[9] "2". Version 4: a plain key may also
-- keep holds of calls over several Redis Cluster slots, which every call counts: ARGV[8].)
--
-- A time is a pair (ms, lo): whole milliseconds and units of 1/D ns within the millisecond
-- (0 <= lo < L = 10^6 * D, L <= 2^52). The script only adds, subtracts and compares pairs, so
-- every number it handles is an exact integer below 2^53 (see units.rs in leakgate-redis).
--
-- KEYS       one Redis key per limited key, holding that key's buckets (see ARGV[9]); with rules,
--            each followed by its origins (below).
-- ARGV[1]    "" = read the clock with TIME here; otherwise the caller's time, whole ms
-- ARGV[2]    the caller's time, ns within that ms
-- ARGV[3]    m, the number of distinct quotas in the call
-- ARGV[4]    max_wait, whole ms          ARGV[5] max_wait, ns within that ms
-- ARGV[6]    extra units to lease after an admission (0: none; only with one plain key)
-- ARGV[7]    ms added to each key's time to live beyond the moment its buckets are empty
-- ARGV[8]    "1": charge the cost if it conforms; "0": a peek, nothing is charged; a phase of a
--            call over several Redis Cluster slots (plain or rule buckets; see gcra_general.lua):
--            "r" reserve (conforms: a hold is recorded, nothing charged), "c" commit the hold
--            (charge it), "x" release it (nothing charged); then ARGV[#ARGV - 1] is the call's
--            id and ARGV[#ARGV] its hold's expiry on Redis's clock (µs)
-- ARGV[9]    how keys hold their buckets:
--            "0" plain: "ms:lo,ms:lo,..." (the key's name fixes its quotas; every key has the
--                m quotas in order), then any holds, each ";id/t.ms/t.ns/exp.us/c.ms/c.lo/..."
--                (script version 4: see gcra_general.lua);
--            "1" rules: "ms:lo@D:T.ms:T.lo:tau.ms:tau.lo,..." (each bucket names the quota it
--                is kept in; one kept in another quota is carried over to its quota now: see
--                carry() in gcra_carry.lua). A leading '~' marks a copy kept for servers on
--                other rules (see the origins in gcra_general.lua). Version 2 wrote no tau.
--                Then any holds, as for "0" (version 4), in the quotas the buckets are kept in.
--            "2" TAT (redis-cell's bucket: one key, one bucket, the quota given by each call):
--                "ms:lo@D;NOTE", the TAT in the units of the quota that wrote it; a call in
--                other units (another D) reads it rounded up to the whole ns, and a TAT beyond
--                the call's tau stays (it is refused until then). NOTE is the last ARGV, kept
--                as it is (the client writes the quota there, for listing).
-- ARGV[10]   the call's deadline on Redis's clock (TIME, whole µs since the epoch): a script that
--            starts after it decides nothing, charges nothing and replies {2, TIME in µs}. The
--            caller has given up by then, and would not see the decision.
-- then, for each quota j, 6 numbers: D, L, T.ms, T.lo, tau.ms, tau.lo
-- then, for each key i: its group (0: enforcing; g > 0: shadow group g), its number of buckets
-- c, and for each bucket: its quota j, cost.ms, cost.lo; with rules, then its number of origins
-- (the key under the paths earlier rules gave it, each the next Redis key in KEYS), and for each
-- origin: the number of quotas of its rule there
-- then, with a lease (ARGV[6] > 0), for each quota j: when the caller last saw its bucket of the
-- key empty again (its TAT), T.ms, T.lo (0, 0: unknown); see `lost` in gcra_general.lua
--
-- Enforcing buckets decide together: the request is granted iff every one conforms. A shadow
-- group's buckets are charged with the request iff they all conform, and never refuse it.
--
-- Reply: {granted (+ 2 if the key was found lost: see `lost`), now.ms, now.ns, delay.ms,
-- delay.ns, leased, TIME in µs, then for each bucket
-- (keys in order, each key's buckets in order): backlog.ms, backlog.lo} where backlog =
-- max(TAT - now, 0) before the decision (after any carry-over) and delay is when the enforcing
-- buckets let the request go, rounded up to the nanosecond (0 for a meter). TIME is read in
-- every call, for the deadline, and returned so that the caller can follow Redis's clock.

-- Needs Redis 5 or later (or any Valkey): scripts replicate their effects, so TIME is allowed.

-- The common call, one enforcing key and one quota, no lease: the steps of the general path
-- (gcra_general.lua, which the client appends to this file to make the script), inlined before
-- anything else is set up (a script pays for every function and table it
-- makes, on every call). Its quota is ARGV[11..16]; its cost ARGV[20..21]. A rule bucket that
-- must be carried over (kept in another quota, marked, or with other buckets) leaves this block
-- by `break` and goes the general way.
if #KEYS == 1 and ARGV[3] == '1' and ARGV[6] == '0' and ARGV[17] == '0' and ARGV[18] == '1' and ARGV[8] < '2' then
repeat
  local tonumber = tonumber
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if us > tonumber(ARGV[10]) then return { 2, us } end
  local rule = ARGV[9] == '1'
  local tat = ARGV[9] == '2'
  local now_ms, now_ns
  if ARGV[1] == '' then
    local r = us % 1000
    now_ms, now_ns = (us - r) / 1000, r * 1000
  else
    now_ms, now_ns = tonumber(ARGV[1]), tonumber(ARGV[2])
  end
  local D, L, um, ul = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[15]), tonumber(ARGV[16])
  local cm, cl = tonumber(ARGV[20]), tonumber(ARGV[21])
  local nl = now_ns * D
  local sm, sl = now_ms, nl
  local raw = redis.call('GET', KEYS[1])
  if raw then
    local a, b, d, x, y
    if rule then
      local u, v
      a, b, d, x, y, u, v = string.match(raw, '^(%d+):(%d+)@(%d+):(%d+):(%d+):(%d+):(%d+)$')
      if a == nil or d ~= ARGV[11] or x ~= ARGV[13] or y ~= ARGV[14] or u ~= ARGV[15] or v ~= ARGV[16] then
        break
      end
    elseif tat then
      a, b, d = string.match(raw, '^(%d+):(%d+)@(%d+);')
      -- Written in other units: the general path reads it in the call's.
      if a ~= nil and d ~= ARGV[11] then break end
    else
      a, b = string.match(raw, '^(%d+):(%d+)$')
      -- Holds of a cross-slot call (see gcra_general.lua): the general path reads them.
      if a == nil and string.find(raw, ';', 1, true) then break end
    end
    if a == nil or #a > 16 or #b > 16 then
      return redis.error_reply('leakgate: not a leakgate bucket at key ' .. KEYS[1])
    end
    local am, al = tonumber(a), tonumber(b)
    if am >= 9007199254740992 or al >= L or (rule and am >= 4503599627370496) then
      return redis.error_reply('leakgate: not a leakgate bucket at key ' .. KEYS[1])
    end
    if am > now_ms or (am == now_ms and al > nl) then sm, sl = am, al end
  end
  local bm, bl = sm - now_ms, sl - nl
  if bl < 0 then bm, bl = bm - 1, bl + L end
  local reply = { 1, now_ms, now_ns, 0, 0, 0, us, bm, bl }
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
  local value = string.format('%.0f:%.0f', sm, sl)
  if rule then
    value = value .. '@' .. ARGV[11] .. ':' .. ARGV[13] .. ':' .. ARGV[14] .. ':' .. ARGV[15] .. ':' .. ARGV[16]
  end
  if tat then value = value .. '@' .. ARGV[11] .. ';' .. ARGV[#ARGV] end
  redis.call('SET', KEYS[1], value, 'PX', tm + tonumber(ARGV[7]) + 1)
  return reply
until true
end

