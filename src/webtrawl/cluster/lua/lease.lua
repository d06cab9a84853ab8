-- Lease operations on one partition. ARGV[1]: operation; ARGV[2]: node id or lease token; ARGV[3]: TTL (ms).
-- acquire: a free partition gets a new epoch; whatever ran under an earlier epoch returns to waiting.
-- renew: extend our lease, only if it is still ours. release: return our running URLs and free it.
-- give: free it only if nothing runs under our lease (1), else keep it (0): a node giving a partition to
-- another (balance) checks here, not only in its own books, as a claim may have reached Redis before this
-- and its reply not reached the node yet.
local op, who, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local lease = PREFIX .. ':lease'
if op == 'acquire' then
  if redis.call('EXISTS', lease) == 1 then
    return false
  end
  local epoch = redis.call('HINCRBY', C, 'epoch', 1)
  local token = who .. ':' .. epoch
  redis.call('SET', lease, token, 'PX', ttl)
  return {token, requeue_running()}
elseif op == 'renew' then
  if holds(who) then
    redis.call('PEXPIRE', lease, ttl)
    return 1
  end
  return 0
elseif op == 'give' then
  if not holds(who) then
    return 1
  end
  for _, running in ipairs(redis.call('HVALS', RUNNING)) do
    if cmsgpack.unpack(running) == who then
      return 0
    end
  end
  redis.call('DEL', lease)
  return 1
elseif op == 'release' then
  if holds(who) then
    requeue_running()
    redis.call('DEL', lease)
    return 1
  end
  return 0
elseif op == 'reconcile' then
  if not holds(who) then
    return -1
  end
  local keep, orphans = {}, {}
  for i = 4, #ARGV do
    keep[ARGV[i]] = true
  end
  local running = redis.call('HGETALL', RUNNING)
  for i = 1, #running, 2 do
    if cmsgpack.unpack(running[i + 1]) == who and not keep[running[i]] then
      orphans[#orphans + 1] = running[i]
    end
  end
  return requeue(orphans)
end
return redis.error_reply('unknown lease operation ' .. tostring(op))
