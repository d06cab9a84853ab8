-- Shared by every partition script (concatenated in front of it). A partition's keys all start with
-- PREFIX (e.g. "{crawl:p17}"), so they share one Cluster hash tag. KEYS[1] is PREFIX .. ":c", declared
-- so that Redis routes the script to the partition's node.
-- ARGV[1] is the crawl's incarnation (the id it got when it was created in this Redis), taken off ARGV here:
-- a partition that does not have it refuses the call, so nothing writes into a crawl this Redis lost
-- (flushed, or restarted with nothing on disk) or into one rebuilt since by a new coordinator.
--   :c         hash: waiting, running, done, failed, act (activity counter), epoch, crawl (the incarnation),
--              wl, ws (the waiting index's level and split bucket)
--   :lease     string "node:epoch", with the lease's TTL
--   :h         zset host -> head (its smallest depth with a queue; a queue of stale records only counts
--              until a claim empties it)
--   :d:HOST    zset: the depths at which HOST has a queue
--   :q:HOST:D  list: HOST's waiting URLs at depth D in arrival order, each a record (`cluster/entries.py`:
--              its fingerprint in the first 8 bytes, then the rest of the URL's entry)
--   :w:B       hash fp -> depth of its record that counts: the waiting index, in buckets (below)
--   :e         hash fp -> {depth, host, record} (msgpack) of a URL waiting for a retry
--   :cash      hash fp -> OPIC cash of a waiting or running URL (only when the crawl orders by importance)
--   :att       hash fp -> attempts made (only for URLs tried before)
--   :run       hash fp -> {lease token it was handed out under, depth, host, record} (msgpack)
--   :later     zset fp -> time (ms, Redis clock) a retry is due
--   :ack       hash node -> its last batch id, node/ -> the fps (8 bytes each) of that batch completed here
-- A waiting URL costs its record in a list and a field in a small hash of the index, both kept by Redis in
-- its compact encodings (listpack): about 20 bytes beside the record, where a hash of entries and a sorted
-- set per host took about 200. A URL found again closer to the seeds is queued again at the smaller depth;
-- the index then names that depth, and its earlier record is skipped when it comes up (stale).
-- The index grows by linear hashing: bucket B of 2^wl (+ ws split) holds the fingerprints whose first four
-- bytes are B modulo the bucket count; past INDEX_LOAD waiting URLs a bucket on average (the partition's
-- `waiting` counter, which also counts the few waiting for a retry: an estimate is enough), the next bucket
-- splits in two. A bucket not yet split in a round holds up to twice the average, so at 40 nearly every
-- bucket stays under the 128 fields Redis keeps as a listpack, however large the crawl grows.
local PREFIX = string.sub(KEYS[1], 1, -3)
local C = KEYS[1]
if (redis.call('HGET', C, 'crawl') or '') ~= table.remove(ARGV, 1) then
  return redis.error_reply('CRAWLGONE ' .. string.match(PREFIX, '^{(.*):p%d+}$'))
end
local INDEX_LOAD = 40
local RUNNING, RETRYING = PREFIX .. ':run', PREFIX .. ':e'

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local index_state
local function index()
  if not index_state then
    local s = redis.call('HMGET', C, 'wl', 'ws', 'waiting')
    index_state = {level = tonumber(s[1] or 0), split = tonumber(s[2] or 0), size = tonumber(s[3] or 0)}
  end
  return index_state
end

local function hash_of(fp)
  local a, b, c, d = string.byte(fp, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function bucket(fp)
  local s = index()
  local span = 2 ^ s.level
  local h = hash_of(fp)
  local b = h % span
  if b < s.split then
    b = h % (2 * span)
  end
  return PREFIX .. ':w:' .. b
end

local function split_next()
  local s = index()
  local span = 2 ^ s.level
  local from, to = PREFIX .. ':w:' .. s.split, PREFIX .. ':w:' .. (s.split + span)
  local fields = redis.call('HGETALL', from)
  for i = 1, #fields, 2 do
    if hash_of(fields[i]) % (2 * span) ~= s.split then
      redis.call('HSET', to, fields[i], fields[i + 1])
      redis.call('HDEL', from, fields[i])
    end
  end
  s.split = s.split + 1
  if s.split == span then
    s.level, s.split = s.level + 1, 0
  end
  redis.call('HSET', C, 'wl', s.level, 'ws', s.split)
end

-- The depth fp waits at, or nil (not waiting in a queue).
local function queued_depth(fp)
  local depth = redis.call('HGET', bucket(fp), fp)
  if depth then
    return tonumber(depth)
  end
  return nil
end

local function unindex(fp)
  if redis.call('HDEL', bucket(fp), fp) == 1 then
    local s = index()
    s.size = s.size - 1
  end
end

-- Whether fp is waiting or running (or waiting for a retry): known to the frontier, not only to the dedup.
local function present(fp)
  return queued_depth(fp) ~= nil or redis.call('HEXISTS', RUNNING, fp) == 1
    or redis.call('HEXISTS', RETRYING, fp) == 1
end

local function enqueue(host, depth, record)
  local fp = string.sub(record, 1, 8)
  redis.call('RPUSH', PREFIX .. ':q:' .. host .. ':' .. depth, record)
  redis.call('ZADD', PREFIX .. ':d:' .. host, depth, depth)
  redis.call('ZADD', PREFIX .. ':h', 'LT', depth, host)
  if redis.call('HSET', bucket(fp), fp, depth) == 1 then
    local s = index()
    s.size = s.size + 1
    if s.size > INDEX_LOAD * (2 ^ s.level + s.split) then
      split_next()
    end
  end
end

-- Back in its queue, a URL that waited for a retry now due; returns its host (nil: it is not waiting).
local function retry_due(fp)
  local kept = redis.call('HGET', RETRYING, fp)
  if kept then
    local depth, host, record = cmsgpack.unpack(kept)
    enqueue(host, depth, record)
    redis.call('HDEL', RETRYING, fp)
    return host
  end
  return nil
end

local function requeue(fps)
  -- Running URLs back to waiting (their lease passed on, or their node no longer has them in flight).
  for _, fp in ipairs(fps) do
    local running = redis.call('HGET', RUNNING, fp)
    if running then
      local _token, depth, host, record = cmsgpack.unpack(running)
      enqueue(host, depth, record)
      redis.call('HDEL', RUNNING, fp)
    end
  end
  if #fps > 0 then
    redis.call('HINCRBY', C, 'running', -#fps)
    redis.call('HINCRBY', C, 'waiting', #fps)
    redis.call('HINCRBY', C, 'act', 1)
  end
  return #fps
end

local function requeue_running()
  return requeue(redis.call('HKEYS', RUNNING))
end

local function holds(token)
  return redis.call('GET', PREFIX .. ':lease') == token
end

-- The head of a host's queues: its smallest depth with a queue, or false (none left).
local function head_of(host)
  local depth = redis.call('ZRANGE', PREFIX .. ':d:' .. host, 0, 0)[1]
  if depth then
    redis.call('ZADD', PREFIX .. ':h', depth, host)
    return tonumber(depth)
  end
  redis.call('ZREM', PREFIX .. ':h', host)
  return false
end
