-- Add URLs to one partition: check-and-add in the dedup set, the crawl's budgets, and enqueue, atomically,
-- so two nodes discovering one URL enqueue it once. Needs bloom.lua in front when dedup is 'bloom'.
-- ARGV: dedup ('bloom' | 'exact'), Bloom first-layer capacity, Bloom error rate, URL budget per host and per
-- path template (0: none), then 6 values per URL: host, depth, record (`cluster/entries.py`), kind,
-- template, cash it receives ('' unless the crawl orders by importance).
-- Returns {URLs new or moved closer to the seeds, {host, head, ...}, {fp, budget it is over, ...}}: the caller
-- records the drops.
local dedup, capacity, error_rate = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local max_host, max_template = tonumber(ARGV[4]), tonumber(ARGV[5])
local budgets = PREFIX .. ':b'

local function first_time(fp, explicit)
  if dedup == 'exact' then
    return redis.call('SADD', PREFIX .. ':seen', fp) == 1
  end
  if explicit then
    -- The whitelist: a URL given explicitly is never lost to a false positive of the filter.
    local fresh = redis.call('SADD', PREFIX .. ':x', fp) == 1
    bloom_add(PREFIX, fp, capacity, error_rate)
    return fresh and not present(fp)
  end
  return bloom_add(PREFIX, fp, capacity, error_rate) == 1
end

local function over_budget(host, template, kind)
  if kind == 'seed' then
    return nil
  end
  if max_host > 0 and tonumber(redis.call('HGET', budgets, 'h|' .. host) or 0) >= max_host then
    return 'host-budget'
  end
  if max_template > 0 and kind ~= 'sitemap'
      and tonumber(redis.call('HGET', budgets, 't|' .. template) or 0) >= max_template then
    return 'template-budget'
  end
  return nil
end

local cashes = PREFIX .. ':cash'
local added, touched, drops = 0, {}, {}
for i = 6, #ARGV, 6 do
  local host, depth, record, kind = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3]
  local template, cash = ARGV[i + 4], ARGV[i + 5]
  local fp = string.sub(record, 1, 8)
  if first_time(fp, kind == 'seed' or kind == 'sitemap') then
    local reason = over_budget(host, template, kind)
    if reason then
      drops[#drops + 1] = fp
      drops[#drops + 1] = reason
    else
      redis.call('HINCRBY', budgets, 'h|' .. host, 1)
      redis.call('HINCRBY', budgets, 't|' .. template, 1)
      if cash ~= '' then
        redis.call('HSET', cashes, fp, cash)
      end
      enqueue(host, depth, record)
      redis.call('HINCRBY', C, 'waiting', 1)
      added = added + 1
      touched[host] = true
    end
  else
    -- Seen before: a URL not yet completed gathers its cash (read when it is claimed); only one still waiting
    -- may move closer to the seeds.
    if cash ~= '' and tonumber(cash) > 0 and redis.call('HEXISTS', cashes, fp) == 1 then
      redis.call('HINCRBYFLOAT', cashes, fp, cash)
    end
    local queued = queued_depth(fp)
    if queued and queued > depth then
      enqueue(host, depth, record)
      added = added + 1
      touched[host] = true
    end
  end
end
if added > 0 then
  redis.call('HINCRBY', C, 'act', 1)
end
local heads = {}
for host in pairs(touched) do
  heads[#heads + 1] = host
  heads[#heads + 1] = redis.call('ZSCORE', PREFIX .. ':h', host)
end
return {added, heads, drops}
