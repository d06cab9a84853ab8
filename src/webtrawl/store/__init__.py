"""What a crawl writes: the SQLite database (frontier + page index), WARC files, the optional mirror."""
