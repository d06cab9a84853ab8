-- A host's request slots shared by every node (`--partition-by url`, where one host's URLs are spread over
-- all partitions): at most `per_host` requests at once, starting at least `delay` apart, across the crawl.
-- KEYS[1]: the host's slot zset (member -> expiry, ms); its ':next' and ':seq' keys share its hash tag.
-- A slot expires by itself after `ttl`, so the slots of a node that died come back.
-- ARGV: 'take', node, n, per_host, delay (ms), ttl (ms) -> {granted slot ids, ms to wait before asking again}
--       'give', slot ids...                              -> slots released
local key = KEYS[1]
local op = ARGV[1]
if op == 'give' then
  return redis.call('ZREM', key, unpack(ARGV, 2))
end
local node, n, per_host = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local delay, ttl = tonumber(ARGV[5]), tonumber(ARGV[6])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
