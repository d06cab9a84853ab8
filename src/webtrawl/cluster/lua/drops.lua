-- Record links a node did not follow (out of scope, too deep, …) for the coordinator: appended to the
-- partition's stream. ARGV: the drops as JSON ([[url, reason, referrer], …]).
redis.call('XADD', PREFIX .. ':s', '*', 'd', ARGV[1])
return 1
