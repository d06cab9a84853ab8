-- Hand out waiting URLs of one partition, under our lease only. First, retries that are due go back to
-- their hosts' queues. ARGV: lease token, then pairs of host and how many URLs to take from it.
-- Returns {{fp, entry JSON, attempts, cash or false, ...}, {host, new head or false, ...}}, or false when the
-- lease is not ours.
local token = ARGV[1]
if not holds(token) then
  return false
end
local entries, run, attempts = PREFIX .. ':e', PREFIX .. ':run', PREFIX .. ':att'
local due = redis.call('ZRANGEBYSCORE', PREFIX .. ':later', '-inf', now_ms(), 'LIMIT', 0, 1000)
local touched, out, heads, taken = {}, {}, {}, 0
for _, fp in ipairs(due) do
  local blob = redis.call('HGET', entries, fp)
  if blob then
    local entry = cjson.decode(blob)
    enqueue(fp, entry[2], entry[3])
    touched[entry[2]] = true
  end
  redis.call('ZREM', PREFIX .. ':later', fp)
end
for i = 2, #ARGV, 2 do
  local host, n = ARGV[i], tonumber(ARGV[i + 1])
  local queue = PREFIX .. ':q:' .. host
  local fps = redis.call('ZRANGE', queue, 0, n - 1)
  for _, fp in ipairs(fps) do
    out[#out + 1] = fp
    out[#out + 1] = redis.call('HGET', entries, fp) or '[]'
    out[#out + 1] = redis.call('HGET', attempts, fp) or '0'
    out[#out + 1] = redis.call('HGET', PREFIX .. ':cash', fp) or false
    redis.call('HSET', run, fp, token)
  end
  if #fps > 0 then
    redis.call('ZREM', queue, unpack(fps))
    taken = taken + #fps
  end
  touched[host] = true
end
for host in pairs(touched) do
  local queue = PREFIX .. ':q:' .. host
  local head = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
  heads[#heads + 1] = host
  if head[2] then
    local depth = math.floor(tonumber(head[2]) / SEQ_SPAN)
    redis.call('ZADD', PREFIX .. ':h', depth, host)
    heads[#heads + 1] = depth
  else
    redis.call('ZREM', PREFIX .. ':h', host)
    heads[#heads + 1] = false
  end
end
if taken > 0 then
  redis.call('HINCRBY', C, 'waiting', -taken)
  redis.call('HINCRBY', C, 'running', taken)
end
return {out, heads}
