"""The Lua scripts of :class:`RedisStore`: ``_logic.py`` ported line by line.

Each script reads the server clock (``TIME``; Redis 5+ replicates script effects, so a
non-deterministic read before writes is allowed), loads the JSON state of its keys, applies
the same rules as ``_logic.py`` and writes every key back with a TTL (``SET ... PX``).
Floats go back to Python as strings: Redis truncates Lua numbers to integers.
"""

from __future__ import annotations

_PRELUDE = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function load(k, new)
  local v = redis.call('GET', k)
  if v then return cjson.decode(v) end
  return new()
end
local function save(k, s, ttl)
  redis.call('SET', k, cjson.encode(s), 'PX', math.ceil(ttl * 1000))
end
local function num(v) if v == nil or v == '' then return nil end return tonumber(v) end
local function str(x) if x == nil then return '' end return string.format('%.17g', x) end
local function count(tbl)  -- entries of a map (probes in flight, slots leased): # counts arrays only
  local n = 0
  for _ in pairs(tbl) do n = n + 1 end
  return n
end
"""

_BREAKER = r"""
local function P(i)
  return {kind = ARGV[i], size = tonumber(ARGV[i + 1]), seconds = tonumber(ARGV[i + 2]),
          min = tonumber(ARGV[i + 3]), frate = tonumber(ARGV[i + 4]), srate = tonumber(ARGV[i + 5]),
          sdur = tonumber(ARGV[i + 6]), odur = tonumber(ARGV[i + 7]), growth = tonumber(ARGV[i + 8]),
          maxo = tonumber(ARGV[i + 9]), probes = tonumber(ARGV[i + 10]), close = tonumber(ARGV[i + 11]),
          lease = tonumber(ARGV[i + 12])}
end
local function bnew()
  return {st = 'closed', ep = 0, oa = 0, of = 0, why = '', sk = 0, oc = 0, pr = {}, ps = 0, w = '', fk = ''}
end
local function fmtg(x) return string.format('%g', x) end
local trans = {}

local function totals(b, p)
  if p.kind == 'count' then
    local w = b.w
    if type(w) ~= 'string' then w = '' end
    local f, s = 0, 0
    for i = 1, #w do
      local ch = string.sub(w, i, i)
      if ch == '1' or ch == '3' then f = f + 1 end
      if ch == '2' or ch == '3' then s = s + 1 end
    end
    return #w, f, s
  end
  local horizon = math.floor(now) - p.seconds
  local kept, c, f, s = {}, 0, 0, 0
  if type(b.w) == 'table' then
    for _, x in ipairs(b.w) do
      if x[1] > horizon then kept[#kept + 1] = x; c = c + x[2]; f = f + x[3]; s = s + x[4] end
    end
  end
  b.w = kept
  return c, f, s
end

local function rec_window(b, p, failed, slow)
  local code = 0
  if failed then code = code + 1 end
  if slow then code = code + 2 end
  if p.kind == 'count' then
    local w = b.w
    if type(w) ~= 'string' then w = '' end
    w = w .. tostring(code)
    if #w > p.size then w = string.sub(w, #w - p.size + 1) end
    b.w = w
    return
  end
  totals(b, p)
  local sec = math.floor(now)
  local last = b.w[#b.w]
  if not (last and last[1] >= sec) then last = {sec, 0, 0, 0}; b.w[#b.w + 1] = last end
  last[2] = last[2] + 1
  if failed then last[3] = last[3] + 1 end
  if slow then last[4] = last[4] + 1 end
end

local function move(b, p, scope, new, reason)
  local c, f, s = totals(b, p)
  local of = ''
  if new == 'open' then of = str(b.of) end
  trans[#trans + 1] = {scope, b.st, new, reason, c, f, s, of}
  b.st = new
  b.ep = b.ep + 1
  if p.kind == 'count' then b.w = '' else b.w = {} end
  b.pr = {}
  b.ps = 0
  if new == 'closed' then b.sk = 0; b.fk = '' end
end

local function bopen(b, p, scope, why, kind, pdur)
  b.fk = kind or ''
  b.sk = b.sk + 1
  b.oc = b.oc + 1
  b.oa = now
  local grown = math.min(p.maxo, p.odur * p.growth ^ math.max(0, b.sk - 1))
  -- after a failed probe, the period counts from the probe's start (at least odur)
  if pdur and pdur > 0 then b.of = math.max(p.odur, grown - pdur) else b.of = grown end
  b.why = why
  move(b, p, scope, 'open', why)
end

local function advance(b, p, scope)
  if b.st == 'open' and now >= b.oa + b.of then
    move(b, p, scope, 'half_open', 'open period of ' .. fmtg(b.of) .. 's elapsed')
  end
  local pr = {}
  for k, v in pairs(b.pr) do if v > now then pr[k] = v end end
  b.pr = pr
end


local function view(b, scope)
  if b.st == 'open' then
    return {scope, b.st, str(math.max(0, b.oa + b.of - now)), b.why, count(b.pr), str(b.of), b.oc, b.fk or ''}
  end
  local fk = b.fk or ''
  if b.st == 'closed' then fk = '' end
  return {scope, b.st, '', '', count(b.pr), '', b.oc, fk}
end

local function ttl_of(p)
  return math.max(3600, 2 * p.maxo, 2 * p.seconds, p.lease)
end

local function record(b, p, scope, ep, pid, outcome, dur, kind)
  if ep ~= b.ep then return end
  local failed = outcome == 'failure'
  local slow = dur > p.sdur
  local slow_rule = p.srate < 1.0
  if b.st == 'half_open' then
    b.pr[pid] = nil
    if outcome == 'ignored' then return end
    rec_window(b, p, failed, slow)
    if failed then
      bopen(b, p, scope, 'probe failed', kind, dur)
    elseif slow and slow_rule then
      bopen(b, p, scope, 'probe slower than ' .. fmtg(p.sdur) .. 's', '', dur)
    else
      b.ps = b.ps + 1
      if b.ps >= p.close then
        move(b, p, scope, 'closed', string.format('%d/%d probes succeeded', b.ps, b.ps))
      end
    end
    return
  end
  if b.st ~= 'closed' or outcome == 'ignored' then return end
  rec_window(b, p, failed, slow)
  local c, f, s = totals(b, p)
  if c < p.min then return end
  if f / c >= p.frate then
    bopen(b, p, scope, string.format('%d/%d failed', f, c), kind)
  elseif slow_rule and s / c >= p.srate then
    bopen(b, p, scope, string.format('%d/%d slower than ', s, c) .. fmtg(p.sdur) .. 's')
  end
end
"""

# KEYS: one breaker key per scope. ARGV: permit_id, n, then per scope: scope + 13 params.
BREAKER_ADMIT = (
    _PRELUDE
    + _BREAKER
    + r"""
local pid, n = ARGV[1], tonumber(ARGV[2])
local bs, ps, scopes = {}, {}, {}
for i = 1, n do
  local base = 3 + (i - 1) * 14
  scopes[i] = ARGV[base]
  ps[i] = P(base + 1)
  bs[i] = load(KEYS[i], bnew)
end
local granted, rejected, eps, probes = 1, 0, {}, {}
for i = 1, n do
  local b, p = bs[i], ps[i]
  advance(b, p, scopes[i])
  local got = nil
  if b.st == 'closed' then
    got = 0
  elseif b.st == 'half_open' and count(b.pr) < p.probes then
    b.pr[pid] = now + p.lease
    got = 1
  end
  if got == nil then
    granted, rejected = 0, i
    for j = 1, i - 1 do bs[j].pr[pid] = nil end
    break
  end
  eps[#eps + 1] = b.ep
  probes[#probes + 1] = got
end
local views = {}
for i = 1, n do
  save(KEYS[i], bs[i], ttl_of(ps[i]))
  views[i] = view(bs[i], scopes[i])
end
if granted == 0 then eps, probes = {}, {} end
return {granted, rejected, eps, probes, views, trans}
"""
)

# KEYS: one breaker key per outcome. ARGV: permit_id, duration, n, then per outcome:
# scope, epoch, outcome, failure kind ('' none), 13 params.
BREAKER_RECORD = (
    _PRELUDE
    + _BREAKER
    + r"""
local pid, dur, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local views = {}
for i = 1, n do
  local base = 4 + (i - 1) * 17
  local scope, ep, outcome, kind = ARGV[base], tonumber(ARGV[base + 1]), ARGV[base + 2], ARGV[base + 3]
  local p = P(base + 4)
  local b = load(KEYS[i], bnew)
  record(b, p, scope, ep, pid, outcome, dur, kind)
  advance(b, p, scope)
  save(KEYS[i], b, ttl_of(p))
  views[i] = view(b, scope)
end
return {views, trans}
"""
)

# KEYS: one breaker key per scope. ARGV: n, then per scope: scope + 13 params. Read-only
# apart from moving an elapsed open period to half-open.
BREAKER_VIEWS = (
    _PRELUDE
    + _BREAKER
    + r"""
local n = tonumber(ARGV[1])
local views = {}
for i = 1, n do
  local base = 2 + (i - 1) * 14
  local p = P(base + 1)
  local b = load(KEYS[i], bnew)
  advance(b, p, ARGV[base])
  save(KEYS[i], b, ttl_of(p))
  views[i] = view(b, ARGV[base])
end
return views
"""
)

_BUCKET = r"""
local EPS = 1e-9
local function tol(cap) return EPS * math.max(1.0, cap) end
local function knew() return {u = {}, blk = 0, sl = {}} end
local function prune(k)
  local u = {}
  for dim, entries in pairs(k.u) do
    local kept = {}
    for e, a in pairs(entries) do if tonumber(e) > now and a > 0 then kept[e] = a end end
    u[dim] = kept
  end
  k.u = u
  local sl = {}
  for r, tt in pairs(k.sl) do if tt > now then sl[r] = tt end end
  k.sl = sl
end
local function used(k, dim)
  local s = 0
  for _, a in pairs(k.u[dim] or {}) do s = s + a end
  return s
end
local function add(k, dim, expires, amount)
  if amount <= 0 then return end
  if k.u[dim] == nil then k.u[dim] = {} end
  local key = tostring(math.ceil(expires))
  k.u[dim][key] = (k.u[dim][key] or 0) + amount
end
local function time_until(k, dim, amount, cap)
  if amount > cap + tol(cap) then return math.huge end
  local allowed = cap - amount + tol(cap)
  local u = used(k, dim)
  if u <= allowed then return 0 end
  local keys = {}
  for e in pairs(k.u[dim] or {}) do keys[#keys + 1] = tonumber(e) end
  table.sort(keys)
  for _, e in ipairs(keys) do
    u = u - k.u[dim][tostring(e)]
    if u <= allowed then return e - now end
  end
  return 0
end
local function kttl(k, window)
  local h = math.max(window, k.blk - now)
  for _, tt in pairs(k.sl) do h = math.max(h, tt - now) end
  for _, entries in pairs(k.u) do
    for e in pairs(entries) do h = math.max(h, tonumber(e) - now) end
  end
  return h + 60
end
local function winf(x) if x == math.huge then return 'inf' end return str(x) end
"""

# KEYS: the bucket key. ARGV: window, reservation_id, slots ('' none), lease, n, then n x (dim, amount, capacity).
RESERVE = (
    _PRELUDE
    + _BUCKET
    + r"""
local window, rid, slots, lease, n = tonumber(ARGV[1]), ARGV[2], num(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local k = load(KEYS[1], knew)
prune(k)
local wait, dim = math.max(0, k.blk - now), 'retry_after'
for i = 1, n do
  local d, amount, cap = ARGV[3 * i + 3], tonumber(ARGV[3 * i + 4]), tonumber(ARGV[3 * i + 5])
  local w = time_until(k, d, amount, cap)
  if w > wait then wait, dim = w, d end
end
local ok = 0
if wait <= 0 then
  if slots ~= nil and count(k.sl) >= slots then
    wait, dim = math.huge, 'concurrency'
  else
    ok = 1
    for i = 1, n do add(k, ARGV[3 * i + 3], now + window, tonumber(ARGV[3 * i + 4])) end
    if slots ~= nil then k.sl[rid] = now + lease end
  end
end
save(KEYS[1], k, kttl(k, window))
return {ok, winf(wait), dim, str(now)}
"""
)

# KEYS: the bucket key. ARGV: rid, granted_at, window, free_slot (0/1), nref, (dim, amount)*, ncharge, (dim, amount)*
SETTLE = (
    _PRELUDE
    + _BUCKET
    + r"""
local rid, granted, window, free = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local k = load(KEYS[1], knew)
prune(k)
local key = tostring(math.ceil(granted + window))
local nref = tonumber(ARGV[5])
for i = 1, nref do
  local d, amount = ARGV[5 + 2 * i - 1], tonumber(ARGV[5 + 2 * i])
  local entries = k.u[d]
  if entries ~= nil and entries[key] ~= nil and amount > 0 then entries[key] = math.max(0, entries[key] - amount) end
end
local at = 6 + 2 * nref
local nch = tonumber(ARGV[at])
for i = 1, nch do add(k, ARGV[at + 2 * i - 1], now + window, tonumber(ARGV[at + 2 * i])) end
if free == '1' then k.sl[rid] = nil end
save(KEYS[1], k, kttl(k, window))
return 1
"""
)

# KEYS: the bucket key. ARGV: dim, remaining, reset_in ('' none), capacity, window, since ('' none)
SYNC = (
    _PRELUDE
    + _BUCKET
    + r"""
local dim, remaining, reset_in, cap, window, since =
  ARGV[1], tonumber(ARGV[2]), num(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), num(ARGV[6])
if reset_in ~= nil and reset_in <= 0 then return 0 end
local k = load(KEYS[1], knew)
prune(k)
local unseen = 0
if since ~= nil then
  local after = math.ceil(since + window)
  for e, a in pairs(k.u[dim] or {}) do if tonumber(e) > after then unseen = unseen + a end end
end
local excess = (cap - used(k, dim)) - (remaining - unseen)
local lowered = 0
if excess > tol(cap) then
  add(k, dim, now + (reset_in or window), excess)
  lowered = 1
end
save(KEYS[1], k, kttl(k, window))
return lowered
"""
)

# KEYS: the bucket key. ARGV: n, then n x (dim, capacity). Read-only: nothing is written.
BUCKET_VIEW = (
    _PRELUDE
    + _BUCKET
    + r"""
local k = load(KEYS[1], knew)
prune(k)
local levels = {}
for i = 1, tonumber(ARGV[1]) do
  local d = ARGV[2 * i]
  levels[#levels + 1] = str(tonumber(ARGV[2 * i + 1]) - used(k, d))
end
return {levels, str(math.max(0, k.blk - now)), count(k.sl)}
"""
)

# KEYS: the bucket key. ARGV: seconds, window
BLOCK = (
    _PRELUDE
    + _BUCKET
    + r"""
local k = load(KEYS[1], knew)
prune(k)
k.blk = math.max(k.blk, now + tonumber(ARGV[1]))
save(KEYS[1], k, kttl(k, tonumber(ARGV[2])))
return 1
"""
)

# KEYS: the counter key. ARGV: amount ('0': read only), ttl seconds. The total, as a string.
COUNTER = r"""
local v
if tonumber(ARGV[1]) ~= 0 then
  v = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
else
  v = redis.call('GET', KEYS[1]) or '0'
end
return v
"""

# KEYS: the budget key. ARGV: ratio, floor, window, op ('request' | 'spend'), force ('1': count the
# spend even when none is left: it was already made)
BUDGET = (
    _PRELUDE
    + r"""
local ratio, floor_, window, op = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local force = ARGV[5] == '1'
local s = load(KEYS[1], function() return {q = {}, r = {}} end)
local horizon = now - window
local function trim(part)
  local kept = {}
  for sec, c in pairs(s[part]) do if tonumber(sec) + 1 > horizon then kept[sec] = c end end
  s[part] = kept
end
trim('q')
trim('r')
local function total(part)
  local n = 0
  for _, c in pairs(s[part]) do n = n + c end
  return n
end
local sec = tostring(math.floor(now))
if op == 'request' then s.q[sec] = (s.q[sec] or 0) + 1 end
local left = math.max(0, floor_ + math.floor(ratio * total('q')) - total('r'))
local ok = 1
if op == 'spend' then
  if left <= 0 then ok = 0 end
  if ok == 1 or force then
    s.r[sec] = (s.r[sec] or 0) + 1
    left = math.max(0, left - 1)
  end
end
redis.call('SET', KEYS[1], cjson.encode(s), 'PX', math.ceil((window + 60) * 1000))
return {ok, left}
"""
)

# KEYS: the load key. ARGV: member, lease, n, n x (deployment, in flight), m, m x (deployment, share, ttl).
# Returns {others: deployment, count, ...}, {shares: deployment, share, seconds left, seconds since said, ...}.
LOAD_SYNC = (
    _PRELUDE
    + r"""
local member, lease, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local s = load(KEYS[1], function() return {m = {}, s = {}} end)
local members = {}
for m, e in pairs(s.m) do if e[1] > now and m ~= member then members[m] = e end end
local live, any = {}, false
for i = 1, n do
  local c = tonumber(ARGV[3 + 2 * i])
  if c > 0 then live[ARGV[2 + 2 * i]] = c; any = true end
end
if any then members[member] = {now + lease, live} end
local held = {}
for d, x in pairs(s.s) do if x[2] > now then held[d] = x end end
local at = 4 + 2 * n
for i = 1, tonumber(ARGV[at]) do
  local j = at + 3 * (i - 1)
  held[ARGV[j + 1]] = {tonumber(ARGV[j + 2]), now + tonumber(ARGV[j + 3]), now}
end
local last = now
for _, e in pairs(members) do last = math.max(last, e[1]) end
for _, x in pairs(held) do last = math.max(last, x[2]) end
if next(members) == nil and next(held) == nil then
  redis.call('DEL', KEYS[1])
else
  save(KEYS[1], {m = members, s = held}, last - now + 1)
end
local others, totals = {}, {}
for m, e in pairs(members) do
  if m ~= member then
    for d, c in pairs(e[2]) do totals[d] = (totals[d] or 0) + c end
  end
end
for d, c in pairs(totals) do others[#others + 1] = d; others[#others + 1] = tostring(c) end
local shares = {}
for d, x in pairs(held) do
  shares[#shares + 1] = d; shares[#shares + 1] = str(x[1]); shares[#shares + 1] = str(x[2] - now)
  shares[#shares + 1] = str(now - x[3])
end
return {others, shares}
"""
)
