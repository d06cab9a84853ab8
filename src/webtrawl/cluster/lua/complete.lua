-- Complete URLs of one partition, under our lease only. A URL no longer running under our token (the lease
-- was lost and taken over: it went back to waiting) is skipped. ARGV: lease token, node id, the node's batch
-- id, then 3 values per URL: fp, verdict ('done' | 'failed' | 'retry'), retry delay (ms). The results
-- themselves stay in the node's shard. The fps completed are acknowledged in `:ack` (per node, its last
-- batch's only), so a node killed before it read this reply settles its shard from them when it restarts
-- (`store.shard`).
-- Returns {completed, {fp of each skipped}}, or false when the lease is not ours.
local token, node, batch = ARGV[1], ARGV[2], ARGV[3]
if not holds(token) then
  return false
end
-- A call run again (its reply was lost) finds the URLs it completed the first time acknowledged: they count
-- as completed, not skipped, so the node settles them in its shard.
local acks = PREFIX .. ':ack'
local acked, before = {}, {}
if redis.call('HGET', acks, node) == batch then
  acked[1] = redis.call('HGET', acks, node .. '/') or ''
  for i = 1, #acked[1], 8 do
    before[string.sub(acked[1], i, i + 7)] = true
  end
else
  redis.call('HSET', acks, node, batch)
end
local attempts = PREFIX .. ':att'
local now = now_ms()
local completed, skipped, retried = 0, {}, 0
local finished = {done = 0, failed = 0}
for i = 4, #ARGV, 3 do
  local fp, verdict, delay = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local running = redis.call('HGET', RUNNING, fp)
  local under, depth, host, record
  if running then
    under, depth, host, record = cmsgpack.unpack(running)
  end
  if under == token then
    redis.call('HDEL', RUNNING, fp)
    if verdict == 'retry' then
      redis.call('HSET', RETRYING, fp, cmsgpack.pack(depth, host, record))
      redis.call('HINCRBY', attempts, fp, 1)
      redis.call('ZADD', PREFIX .. ':later', now + delay, fp)
      retried = retried + 1
    else
      redis.call('HDEL', attempts, fp)
      redis.call('HDEL', PREFIX .. ':cash', fp)
      finished[verdict] = finished[verdict] + 1
    end
    acked[#acked + 1] = fp
    completed = completed + 1
  elseif not before[fp] then
    skipped[#skipped + 1] = fp
  end
end
redis.call('HSET', acks, node .. '/', table.concat(acked))
if completed > 0 then
  redis.call('HINCRBY', C, 'running', -completed)
  redis.call('HINCRBY', C, 'waiting', retried)
  redis.call('HINCRBY', C, 'done', finished.done)
  redis.call('HINCRBY', C, 'failed', finished.failed)
  redis.call('HINCRBY', C, 'act', 1)
end
return {completed, skipped}
