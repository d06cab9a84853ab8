"""`python -m webtrawl.parse`: the crawl's page-reading worker process (`worker`)."""

from .worker import main

main()
