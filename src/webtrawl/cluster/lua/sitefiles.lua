-- Record the robots.txt and sitemap responses a node archived, for the coordinator's index: appended to the
-- partition's stream. ARGV: the entry (`cluster.wire.encode_site_files`).
redis.call('XADD', PREFIX .. ':s', '*', 'f', ARGV[1])
return 1
