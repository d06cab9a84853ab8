-- Put ended URLs back in their hosts' queues for a re-crawl pass (the coordinator does, for URLs whose revisit
-- is due). ARGV: 6 values per URL: fp, host, depth, entry JSON (with the previous fetch), the state it ended in
-- ('done' | 'failed'), cash ('' unless the crawl orders by importance).
-- A URL waiting or running already is left as it is. Returns {re-queued, {host, head, ...}}.
local entries, cashes = PREFIX .. ':e', PREFIX .. ':cash'
local counts = {done = 0, failed = 0}
local requeued, touched = 0, {}
for i = 1, #ARGV, 6 do
  local fp, host, depth, blob, ended, cash = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], ARGV[i + 4],
    ARGV[i + 5]
  if redis.call('HEXISTS', entries, fp) == 0 then
    redis.call('HSET', entries, fp, blob)
    redis.call('HDEL', PREFIX .. ':att', fp)
    if cash ~= '' then
      redis.call('HSET', cashes, fp, cash)
    end
    enqueue(fp, host, depth)
    counts[ended] = counts[ended] + 1
    requeued = requeued + 1
    touched[host] = true
  end
end
if requeued > 0 then
  -- A crawl rebuilt in a new Redis never counted these as ended: its counters do not go below zero.
  for state, n in pairs(counts) do
    local have = tonumber(redis.call('HGET', C, state) or 0)
    if n > 0 and have > 0 then
      redis.call('HINCRBY', C, state, -math.min(n, have))
    end
  end
  redis.call('HINCRBY', C, 'waiting', requeued)
  redis.call('HINCRBY', C, 'act', 1)
end
local heads = {}
for host in pairs(touched) do
  heads[#heads + 1] = host
  heads[#heads + 1] = redis.call('ZSCORE', PREFIX .. ':h', host)
end
return {requeued, heads}
