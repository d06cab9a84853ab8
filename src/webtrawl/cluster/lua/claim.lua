-- Hand out waiting URLs of one partition, under our lease only. First, retries that are due go back to
-- their hosts' queues. ARGV: lease token, order ('bfs' | 'importance'), then pairs of host and how many URLs
-- to take from it: each host's smallest depth first, in arrival order, or with 'importance' the richest of
-- the first WINDOW waiting there (their cash is read as they are claimed).
-- Returns {{host, depth, record, attempts, cash or false, ...}, {host, new head or false, ...}}, or false
-- when the lease is not ours.
local token, order = ARGV[1], ARGV[2]
if not holds(token) then
  return false
end
local WINDOW = 64
local attempts, cashes = PREFIX .. ':att', PREFIX .. ':cash'
local due = redis.call('ZRANGEBYSCORE', PREFIX .. ':later', '-inf', now_ms(), 'LIMIT', 0, 1000)
local touched, out, heads, taken = {}, {}, {}, 0
for _, fp in ipairs(due) do
  local host = retry_due(fp)
  if host then
    touched[host] = true
  end
  redis.call('ZREM', PREFIX .. ':later', fp)
end

local function hand_out(host, depth, record)
  local fp = string.sub(record, 1, 8)
  unindex(fp)
  redis.call('HSET', RUNNING, fp, cmsgpack.pack(token, depth, host, record))
  out[#out + 1] = host
  out[#out + 1] = depth
  out[#out + 1] = record
  out[#out + 1] = redis.call('HGET', attempts, fp) or '0'
  out[#out + 1] = redis.call('HGET', cashes, fp) or false
  taken = taken + 1
end

-- Whether a record popped from the queue of `depth` is the one that counts (not one queued again since at a
-- smaller depth, nor one claimed already from there).
local function current(record, depth)
  return queued_depth(string.sub(record, 1, 8)) == depth
end

local function take_in_order(host, depth, queue, n)
  local got = 0
  for _, record in ipairs(redis.call('LPOP', queue, n) or {}) do
    if current(record, depth) then
      hand_out(host, depth, record)
      got = got + 1
    end
  end
  return got
end

local function take_richest(host, depth, queue, n)
  local candidates = {}
  for position, record in ipairs(redis.call('LRANGE', queue, 0, WINDOW - 1)) do
    if current(record, depth) then
      local cash = tonumber(redis.call('HGET', cashes, string.sub(record, 1, 8)) or 0)
      candidates[#candidates + 1] = {cash, position, record}
    else
      redis.call('LREM', queue, 1, record)
    end
  end
  table.sort(candidates, function(a, b) return a[1] > b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  local got = 0
  for i = 1, #candidates do
    if got == n then
      break
    end
    local record = candidates[i][3]
    redis.call('LREM', queue, 1, record)
    if current(record, depth) then  -- not handed out just now from an earlier copy in the window
      hand_out(host, depth, record)
      got = got + 1
    end
  end
  return got
end

for i = 3, #ARGV, 2 do
  local host, n = ARGV[i], tonumber(ARGV[i + 1])
  local depths = PREFIX .. ':d:' .. host
  while n > 0 do
    local depth = redis.call('ZRANGE', depths, 0, 0)[1]
    if not depth then
      break
    end
    depth = tonumber(depth)
    local queue = PREFIX .. ':q:' .. host .. ':' .. depth
    if order == 'importance' then
      n = n - take_richest(host, depth, queue, n)
    else
      n = n - take_in_order(host, depth, queue, n)
    end
    if redis.call('EXISTS', queue) == 0 then
      redis.call('ZREM', depths, depth)
    end
  end
  touched[host] = true
end
for host in pairs(touched) do
  heads[#heads + 1] = host
  heads[#heads + 1] = head_of(host)
end
if taken > 0 then
  redis.call('HINCRBY', C, 'waiting', -taken)
  redis.call('HINCRBY', C, 'running', taken)
end
return {out, heads}
