"""The dashboard: a web application over one crawl's store (and its Redis, for a distributed crawl)."""
