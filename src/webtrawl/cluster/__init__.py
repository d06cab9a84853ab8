"""The distributed mode's parts: the Redis connection, the node registry, partition leases and crawl control."""
