-- Record URLs that ended before this Redis had the crawl (a coordinator rebuilding from its index a crawl that
-- Redis lost): seen by the dedup, counted in the budgets and as done or failed, and not queued. Needs bloom.lua
-- in front when dedup is 'bloom'. ARGV: dedup ('bloom' | 'exact'), Bloom first-layer capacity, Bloom error
-- rate, then 5 values per URL: fp (8 bytes), host, path template, the state it ended in ('done' | 'failed'),
-- and whether it was given explicitly ('1' for a seed or a sitemap's URL, else '').
-- A URL seen already is left as it is, so a rebuild cut short can run again. Returns how many were new.
local dedup, capacity, error_rate = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local budgets = PREFIX .. ':b'
local counts, recorded = {done = 0, failed = 0}, 0
for i = 4, #ARGV, 5 do
  local fp, host, template, ended, explicit = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local new
  if dedup == 'exact' then
    new = redis.call('SADD', PREFIX .. ':seen', fp) == 1
  else
    if explicit == '1' then
      redis.call('SADD', PREFIX .. ':x', fp)  -- the whitelist: so the seed added next is not taken as new
    end
    new = bloom_add(PREFIX, fp, capacity, error_rate) == 1
  end
  if new then
    redis.call('HINCRBY', budgets, 'h|' .. host, 1)
    redis.call('HINCRBY', budgets, 't|' .. template, 1)
    counts[ended] = counts[ended] + 1
    recorded = recorded + 1
  end
end
for state, n in pairs(counts) do
  if n > 0 then
    redis.call('HINCRBY', C, state, n)
  end
end
return recorded
