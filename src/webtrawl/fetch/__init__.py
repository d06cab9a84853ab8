"""Getting bytes from servers: the HTTP fetcher, robots.txt rules and per-host politeness."""
