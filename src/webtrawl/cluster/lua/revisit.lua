-- Put ended URLs back in their hosts' queues for a re-crawl pass (the coordinator does, for URLs whose revisit
-- is due). ARGV: 5 values per URL: host, depth, record (with the previous fetch), the state it ended in
-- ('done' | 'failed'), cash ('' unless the crawl orders by importance).
-- A URL waiting or running already is left as it is. Returns {re-queued, {host, head, ...}}.
local cashes = PREFIX .. ':cash'
local counts = {done = 0, failed = 0}
local requeued, touched = 0, {}
for i = 1, #ARGV, 5 do
  local host, depth, record, ended, cash = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local fp = string.sub(record, 1, 8)
  if not present(fp) then
    redis.call('HDEL', PREFIX .. ':att', fp)
    if cash ~= '' then
      redis.call('HSET', cashes, fp, cash)
    end
    enqueue(host, depth, record)
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
