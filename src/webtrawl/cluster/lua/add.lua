-- Add URLs to one partition: check-and-add in the dedup set, the crawl's budgets, and enqueue, atomically,
-- so two nodes discovering one URL enqueue it once. Needs bloom.lua in front when dedup is 'bloom'.
-- ARGV: dedup ('bloom' | 'exact'), Bloom first-layer capacity, Bloom error rate, URL budget per host and per
-- path template (0: none), then 8 values per URL: fp (8 bytes), host, depth, entry JSON, kind, template,
-- referrer fp (decimal, '' if none), cash it receives ('' unless the crawl orders by importance).
-- Returns {new URLs, {host, head, ...}}; URLs over a budget go to the stream as drops.
local dedup, capacity, error_rate = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local max_host, max_template = tonumber(ARGV[4]), tonumber(ARGV[5])
local entries, budgets = PREFIX .. ':e', PREFIX .. ':b'

local function first_time(fp, explicit)
  if dedup == 'exact' then
    return redis.call('SADD', PREFIX .. ':seen', fp) == 1
  end
  if explicit then
    -- The whitelist: a URL given explicitly is never lost to a false positive of the filter.
    local fresh = redis.call('SADD', PREFIX .. ':x', fp) == 1
    bloom_add(PREFIX, fp, capacity, error_rate)
    return fresh and redis.call('HEXISTS', entries, fp) == 0
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
for i = 6, #ARGV, 8 do
  local fp, host, depth, blob = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  local kind, template, referrer, cash = ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7]
  if first_time(fp, kind == 'seed' or kind == 'sitemap') then
    local reason = over_budget(host, template, kind)
    if reason then
      drops[#drops + 1] = {cjson.decode(blob)[1], reason, referrer}
    else
      redis.call('HINCRBY', budgets, 'h|' .. host, 1)
      redis.call('HINCRBY', budgets, 't|' .. template, 1)
      redis.call('HSET', entries, fp, blob)
      if cash ~= '' then
        redis.call('HSET', cashes, fp, cash)
      end
      enqueue(fp, host, depth)
      redis.call('HINCRBY', C, 'waiting', 1)
      added = added + 1
      touched[host] = true
    end
  else
    -- Seen before: a URL not yet completed gathers its cash; only one still waiting may move closer to the
    -- seeds (or up its depth, with more cash).
    local richer = cash ~= '' and tonumber(cash) > 0 and redis.call('HEXISTS', cashes, fp) == 1
    if richer then
      redis.call('HINCRBYFLOAT', cashes, fp, cash)
    end
    local score = redis.call('ZSCORE', PREFIX .. ':q:' .. host, fp)
    if score then
      local queued = math.floor(tonumber(score) / SEQ_SPAN)
      if queued > depth then
        redis.call('HSET', entries, fp, blob)
        enqueue(fp, host, depth)
        added = added + 1
        touched[host] = true
      elseif richer then
        enqueue(fp, host, queued)
      end
    end
  end
end
if #drops > 0 then
  redis.call('XADD', PREFIX .. ':s', '*', 'd', cjson.encode(drops))
end
if added > 0 then
  redis.call('HINCRBY', C, 'act', 1)
end
local heads = {}
for host in pairs(touched) do
  heads[#heads + 1] = host
  heads[#heads + 1] = redis.call('ZSCORE', PREFIX .. ':h', host)
end
return {added, heads}
