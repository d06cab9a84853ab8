-- Shared by every partition script (concatenated in front of it). A partition's keys all start with
-- PREFIX (e.g. "{crawl:p17}"), so they share one Cluster hash tag. KEYS[1] is PREFIX .. ":c", declared
-- so that Redis routes the script to the partition's node.
-- ARGV[1] is the crawl's incarnation (the id it got when it was created in this Redis), taken off ARGV here:
-- a partition that does not have it refuses the call, so nothing writes into a crawl this Redis lost
-- (flushed, or restarted with nothing on disk) or into one rebuilt since by a new coordinator.
--   :c        hash: waiting, running, done, failed, seq (arrival counter), epoch, act (activity counter),
--             crawl (the incarnation; none for a crawl created before incarnations)
--   :lease    string "node:epoch", with the lease's TTL
--   :h        zset host -> head (smallest depth among its fetchable waiting URLs)
--   :q:HOST   zset fp -> depth * 2^32 + within: the host's waiting URLs in breadth-first order; within a
--             depth by arrival (seq), or by importance when the URL has cash
--   :e        hash fp -> entry (JSON made by the node: url, host, depth, kind, referrer, via[, previous fetch])
--   :cash     hash fp -> OPIC cash of a waiting or running URL (only when the crawl orders by importance)
--   :att      hash fp -> attempts made (only for URLs tried before)
--   :run      hash fp -> lease token the URL was handed out under
--   :later    zset fp -> time (ms, Redis clock) a retry is due
--   :s        stream of results for the coordinator
local PREFIX = string.sub(KEYS[1], 1, -3)
local C = KEYS[1]
if (redis.call('HGET', C, 'crawl') or '') ~= table.remove(ARGV, 1) then
  return redis.error_reply('CRAWLGONE ' .. string.match(PREFIX, '^{(.*):p%d+}$'))
end
local SEQ_SPAN = 4294967296

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function enqueue(fp, host, depth)
  -- More cash, a smaller score: first within its depth (ties by fingerprint).
  local cash = redis.call('HGET', PREFIX .. ':cash', fp)
  local within
  if cash then
    within = math.floor((SEQ_SPAN - 1) / (1 + tonumber(cash)))
  else
    within = redis.call('HINCRBY', C, 'seq', 1)
  end
  redis.call('ZADD', PREFIX .. ':q:' .. host, depth * SEQ_SPAN + within, fp)
  redis.call('ZADD', PREFIX .. ':h', 'LT', depth, host)
end

local function requeue(fps)
  -- Running URLs back to waiting (their lease passed on, or their node no longer has them in flight).
  for _, fp in ipairs(fps) do
    local blob = redis.call('HGET', PREFIX .. ':e', fp)
    if blob then
      local entry = cjson.decode(blob)
      enqueue(fp, entry[2], entry[3])
    end
    redis.call('HDEL', PREFIX .. ':run', fp)
  end
  if #fps > 0 then
    redis.call('HINCRBY', C, 'running', -#fps)
    redis.call('HINCRBY', C, 'waiting', #fps)
    redis.call('HINCRBY', C, 'act', 1)
  end
  return #fps
end

local function requeue_running()
  return requeue(redis.call('HKEYS', PREFIX .. ':run'))
end

local function holds(token)
  return redis.call('GET', PREFIX .. ':lease') == token
end
