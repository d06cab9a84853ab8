-- A host's request slots shared by every node (`--partition-by url`, where one host's URLs are spread over
-- all partitions): at most `per_host` requests at once, starting at least `delay` apart, across the crawl.
-- KEYS[1]: the host's slot zset (member -> expiry, ms); its ':next' and ':seq' keys share its hash tag.
-- A slot lives `ttl` (a lease's TTL) unless its node renews it with its leases: the slots of a node that died,
-- stalled or was cut off come back as its leases do.
-- ARGV: 'take', node, n, per_host, delay (ms), ttl (ms) -> {granted slot ids, ms to wait before asking again}
--       'renew', ttl (ms), slot ids...                  -> the slot ids still held (an expired one stays gone)
--       'give', slot ids...                              -> slots released
local key = KEYS[1]
local op = ARGV[1]
if op == 'give' then
  if #ARGV < 2 then
    return 0
  end
  return redis.call('ZREM', key, unpack(ARGV, 2))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if op == 'renew' then
  local ttl, kept = tonumber(ARGV[2]), {}
  for i = 3, #ARGV do
    local expiry = redis.call('ZSCORE', key, ARGV[i])
    if expiry and tonumber(expiry) > now then
      redis.call('ZADD', key, 'XX', now + ttl, ARGV[i])
      kept[#kept + 1] = ARGV[i]
    end
  end
  if #kept > 0 then
    redis.call('PEXPIRE', key, ttl + 1000)
    redis.call('PEXPIRE', key .. ':seq', ttl + 1000)
  end
  return kept
end
local node, n, per_host = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local delay, ttl = tonumber(ARGV[5]), tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local next_start = tonumber(redis.call('GET', key .. ':next') or 0)
if now < next_start then
  return {{}, next_start - now}
end
local free = per_host - redis.call('ZCARD', key)
if delay > 0 then
  free = math.min(free, 1)
end
local granted = {}
for _ = 1, math.min(n, free) do
  local slot = node .. ':' .. redis.call('INCR', key .. ':seq')
  redis.call('ZADD', key, now + ttl, slot)
  granted[#granted + 1] = slot
end
if #granted > 0 then
  if delay > 0 then
    redis.call('SET', key .. ':next', now + delay, 'PX', delay + 1000)
  end
  redis.call('PEXPIRE', key, ttl + 1000)
  redis.call('PEXPIRE', key .. ':seq', ttl + 1000)
  return {granted, 0}
end
return {granted, 10}
