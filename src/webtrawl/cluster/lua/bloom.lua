-- Scalable Bloom filter (Almeida et al., 2007) that deduplicates one partition's URL fingerprints.
--
-- This chunk only defines local functions; other scripts are concatenated after it, so a frontier script
-- can test and add URLs in the same atomic call that enqueues them. Every key it touches is
-- `prefix .. ":bf"` (the meta hash) or `prefix .. ":bf:" .. i` (the bitmap of layer i), all under the
-- partition's hash tag, so a script using it stays on one Redis Cluster slot.
--
-- Meta hash fields: capacity and error_rate (the crawl's settings, fixed when the filter is created),
-- layers, and for each layer i: m:i (bits), k:i (hashes), capacity:i and count:i (fingerprints added).
-- Layer i holds capacity * 2^i fingerprints at error_rate * (1 - r) * r^i with r = 0.5, so the rates of
-- all layers sum to less than error_rate however far the filter grows.
--
-- A fingerprint is 8 bytes (big-endian xxh3). Lua numbers are doubles, so it is read as two 32-bit halves
-- h1 and h2 (h2 made odd) and bit i of a layer is (h1 + i * h2) mod m (Kirsch and Mitzenmacher), computed
-- step by step so no value ever exceeds 2^33 and every index is exact.
--
-- A layer is capped at 2^32 - 1 bits: SETBIT offsets end at 2^32 - 1 (strings are at most 512 MB). A
-- capped layer keeps its capacity with fewer bits than its rate needs, so it is worse than its share;
-- the estimated false-positive rate the Python side reports (bloom.bloom_stats) shows it.
--
-- Within one script the meta is read once per prefix and kept in bloom_filters; a script that uses these
-- functions changes the filter only through them.

local BLOOM_MAX_BITS = 4294967295
local BLOOM_RATIO = 0.5
local bloom_filters = {}

-- Bits and hash count of a layer for `capacity` fingerprints at `error_rate`; bloom.layer_size in Python
-- computes the same numbers with the same operations in the same order.
local function bloom_layer_size(capacity, error_rate)
  local ln2 = math.log(2)
  local m = math.ceil(-capacity * math.log(error_rate) / (ln2 * ln2))
  if m > BLOOM_MAX_BITS then
    m = BLOOM_MAX_BITS
  end
  local k = math.floor(m / capacity * ln2 + 0.5)
  if k < 1 then
    k = 1
  end
  return m, k
end

local function bloom_halves(fp8)
  if type(fp8) ~= 'string' or #fp8 ~= 8 then
    error('bloom: a fingerprint is an 8-byte string')
  end
  local b1, b2, b3, b4, b5, b6, b7, b8 = string.byte(fp8, 1, 8)
  local h2 = ((b5 * 256 + b6) * 256 + b7) * 256 + b8
  return ((b1 * 256 + b2) * 256 + b3) * 256 + b4, h2 - h2 % 2 + 1
end

local function bloom_load(prefix)
  local filter = bloom_filters[prefix]
  if filter then
    return filter
  end
  local flat = redis.call('HGETALL', prefix .. ':bf')
  if #flat == 0 then
    return nil
  end
  local meta = {}
  for i = 1, #flat, 2 do
    meta[flat[i]] = tonumber(flat[i + 1])
  end
  filter = {capacity = meta.capacity, error_rate = meta.error_rate, layers = {}}
  for i = 0, meta.layers - 1 do
    filter.layers[i + 1] = {
      m = meta['m:' .. i], k = meta['k:' .. i], capacity = meta['capacity:' .. i], count = meta['count:' .. i],
    }
  end
  bloom_filters[prefix] = filter
  return filter
end

-- Adds the next layer. Its bitmap is created at full size in one step: SETBIT on a missing key allocates
-- exactly up to the bit, while growing an existing string bit by bit would over-allocate (up to twice).
local function bloom_grow(prefix, filter)
  local i = #filter.layers
  local capacity = filter.capacity * 2 ^ i
  local m, k = bloom_layer_size(capacity, filter.error_rate * (1 - BLOOM_RATIO) * BLOOM_RATIO ^ i)
  local key = prefix .. ':bf:' .. i
  redis.call('HSET', prefix .. ':bf', 'layers', i + 1, 'm:' .. i, string.format('%.0f', m), 'k:' .. i, k,
    'capacity:' .. i, string.format('%.0f', capacity), 'count:' .. i, 0)
  redis.call('DEL', key)
  redis.call('SETBIT', key, m - 1, 0)
  filter.layers[i + 1] = {m = m, k = k, capacity = capacity, count = 0}
end

local function bloom_create(prefix, capacity, error_rate)
  if type(capacity) ~= 'number' or capacity < 1 or capacity ~= math.floor(capacity) then
    error('bloom: capacity must be a positive integer')
  end
  if type(error_rate) ~= 'number' or not (error_rate > 0 and error_rate < 1) then
    error('bloom: error_rate must be between 0 and 1')
  end
  -- Stored with 17 digits so every later layer is sized from exactly the rate the first one was.
  local rate = string.format('%.17g', error_rate)
  redis.call('HSET', prefix .. ':bf', 'capacity', string.format('%.0f', capacity), 'error_rate', rate)
  local filter = {capacity = capacity, error_rate = tonumber(rate), layers = {}}
  bloom_grow(prefix, filter)
  bloom_filters[prefix] = filter
  return filter
end

-- Whether every bit of the fingerprint is set in any layer. The newest layer is the largest and holds
-- most fingerprints, so it is looked at first.
local function bloom_seen(prefix, filter, h1, h2)
  for i = #filter.layers, 1, -1 do
    local layer = filter.layers[i]
    local key, m = prefix .. ':bf:' .. (i - 1), layer.m
    local index, step, found = h1 % m, h2 % m, true
    for _ = 1, layer.k do
      if redis.call('GETBIT', key, index) == 0 then
        found = false
        break
      end
      index = (index + step) % m
    end
    if found then
      return true
    end
  end
  return false
end

-- 1 if the fingerprint was (probably) not in the filter and is now added, 0 if it (probably) was.
-- capacity and error_rate only matter when this call creates the filter.
local function bloom_add(prefix, fp8, capacity, error_rate)
  local h1, h2 = bloom_halves(fp8)
  local filter = bloom_load(prefix) or bloom_create(prefix, capacity, error_rate)
  if bloom_seen(prefix, filter, h1, h2) then
    return 0
  end
  local i = #filter.layers
  if filter.layers[i].count >= filter.layers[i].capacity then
    bloom_grow(prefix, filter)
    i = i + 1
  end
  local layer, key = filter.layers[i], prefix .. ':bf:' .. (i - 1)
  local m = layer.m
  local index, step = h1 % m, h2 % m
  for _ = 1, layer.k do
    redis.call('SETBIT', key, index, 1)
    index = (index + step) % m
  end
  layer.count = layer.count + 1
  redis.call('HINCRBY', prefix .. ':bf', 'count:' .. (i - 1), 1)
  return 1
end

-- 1 if the fingerprint is (probably) in the filter, without adding it; 0 when there is no filter yet.
local function bloom_check(prefix, fp8)
  local h1, h2 = bloom_halves(fp8)
  local filter = bloom_load(prefix)
  if filter and bloom_seen(prefix, filter, h1, h2) then
    return 1
  end
  return 0
end

-- The meta hash as a flat field/value array (empty when there is no filter).
local function bloom_stats(prefix)
  return redis.call('HGETALL', prefix .. ':bf')
end
