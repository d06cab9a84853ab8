-- Add hosts the crawl's scope gained (seeds that redirected elsewhere) to its set, KEYS[1] ('{crawl:scope}').
-- ARGV[1]: the crawl's incarnation, which KEYS[1] .. ':crawl' holds since the crawl was created in this Redis
-- (as a partition's counters do, see common.lua): a node of a crawl this Redis lost writes nothing.
-- ARGV[2..]: the host keys. Returns how many were new.
if (redis.call('GET', KEYS[1] .. ':crawl') or '') ~= ARGV[1] then
  return redis.error_reply('CRAWLGONE ' .. string.match(KEYS[1], '^{(.*):scope}$'))
end
if #ARGV < 2 then
  return 0
end
return redis.call('SADD', KEYS[1], unpack(ARGV, 2))
