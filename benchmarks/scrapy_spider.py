"""The Scrapy baseline: a breadth-first, robots-obeying crawl of one host, with webtrawl's settings.

Run as its own process so the harness can measure it alone:

    python benchmarks/scrapy_spider.py http://127.0.0.1:8080/ --feed out/scrapy.jsonl

Each page fetched becomes one JSON line: url, status, title. Links are taken from every `<a href>` and
followed when they stay on the start URL's host (scheme and port included), as webtrawl's default scope does.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urljoin, urlsplit

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response, TextResponse

# Explicit, so the comparison holds whatever Scrapy's defaults become.
SETTINGS: dict[str, Any] = {
    "ROBOTSTXT_OBEY": True,
    "CONCURRENT_REQUESTS": 16,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
    "DOWNLOAD_DELAY": 0,
    "AUTOTHROTTLE_ENABLED": False,
    "COOKIES_ENABLED": False,
    "TELNETCONSOLE_ENABLED": False,
    "REMOTE_CONTROL_ENABLED": False,
    "LOG_LEVEL": "WARNING",
    # Breadth-first: lower depth first, first-in first-out within a depth.
    "DEPTH_PRIORITY": 1,
    "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
    "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
    "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
}


class SiteSpider(scrapy.Spider):
    """Follows every same-host link from one start URL."""

    name = "site"

    def __init__(self, start_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start_url
        self.origin = urlsplit(start_url)[:2]

    async def start(self) -> AsyncIterator[scrapy.Request]:
        # Unlike the default, the start request goes through the duplicate filter, so a later link
        # to the same URL is not fetched again.
        yield scrapy.Request(self.start_url)

    def start_requests(self) -> Iterator[scrapy.Request]:
        """The same, for Scrapy before 2.13."""
        yield scrapy.Request(self.start_url)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[dict[str, Any] | scrapy.Request]:
        if not isinstance(response, TextResponse):
            yield {"url": response.url, "status": response.status, "title": None}
            return
        yield {"url": response.url, "status": response.status, "title": response.css("title::text").get()}
        for href in response.css("a::attr(href)").getall():
            url = urljoin(response.url, href.strip())
            if urlsplit(url)[:2] == self.origin:
                yield scrapy.Request(url.partition("#")[0])


def main() -> None:
    parser = argparse.ArgumentParser(description="Crawl one site with Scrapy, breadth-first.")
    parser.add_argument("url", help="start URL, e.g. http://127.0.0.1:8080/")
    parser.add_argument("--feed", required=True, help="JSON-lines file to write (replaced)")
    args = parser.parse_args()
    feeds = {args.feed: {"format": "jsonlines", "fields": ["url", "status", "title"], "overwrite": True}}
    process = CrawlerProcess({**SETTINGS, "FEEDS": feeds})
    process.crawl(SiteSpider, start_url=args.url)
    process.start()


if __name__ == "__main__":
    main()
