"""Sitemaps: the page URLs a site lists for crawlers, read once per host when its robots.txt is known.

A host's sitemaps are the `Sitemap:` lines of its robots.txt, or `/sitemap.xml` when there are none. A
sitemap is an `<urlset>` of page URLs or a `<sitemapindex>` of further sitemaps (followed two levels
deep); either may be gzipped (see `parse.sitemap` for how a file is read). What is fetched:
- only sitemaps on the host's own origin, and only those its robots.txt allows, politely: the host's
  delay (raised by its Crawl-delay) between request starts, its slot reserved while one is in flight;
- at most `MAX_SITEMAP_FILES` requests and `max_urls` page URLs per host, `MAX_SITEMAP_BYTES` per file;
- a broken file (an HTML error page, bad XML, a cut-off body) is logged and skipped; what it listed
  before the fault is kept. Nothing here ever stops the crawl.
Text and RSS/Atom sitemaps are not read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import InvalidURL
from .models import FetchOutcome, KeepResponse, NewURL
from .parse.sitemap import SitemapError, decoded_chunks, parse_sitemap
from .urls import fingerprint, normalize, origin

if TYPE_CHECKING:
    from .fetch.fetcher import Fetcher
    from .fetch.robots import RobotsRules
    from .politeness import Politeness
    from .scope import Scope

log = logging.getLogger(__name__)

MAX_SITEMAP_BYTES = 50 * 1024 * 1024
"""Decompressed bytes read of one sitemap file (the protocol's limit); also the most received."""
MAX_SITEMAP_FILES = 100
"""Sitemap files fetched per host at most (an index may list thousands)."""
MAX_INDEX_DEPTH = 2
"""Levels of sitemap indexes followed below the sitemaps robots.txt names."""
MAX_REDIRECTS = 5
SITEMAP_SLOTS = 4
"""Sitemap bodies held in memory at once, across hosts."""


class Sitemaps:
    """Reads the sitemaps of the crawl's hosts and turns their entries into frontier URLs."""

    def __init__(
        self, fetcher: Fetcher, politeness: Politeness, scope: Scope, *, max_urls: int, keep: KeepResponse
    ) -> None:
        """`keep` archives each sitemap response."""
        self._fetcher = fetcher
        self._keep = keep
        self._politeness = politeness
        self._scope = scope
        self._max_urls = max_urls
        self._slots = asyncio.Semaphore(SITEMAP_SLOTS)

    async def discover(
        self, host: str, rules: RobotsRules, stopped: Callable[[], bool] = lambda: False
    ) -> tuple[list[NewURL], list[tuple[str, str]]]:
        """The URLs `host`'s sitemaps list, in scope at depth 1, and those out of scope with the reason.

        `host` is an origin whose robots.txt is `rules` and whose politeness slot is not handed out yet
        (the caller sets the rules afterwards); `stopped()` true ends the reading early. Never raises
        except on cancellation.
        """
        delay = self._politeness.delay(host, rules)  # as the rules will set it
        reader = _HostReader(
            self._fetcher, self._politeness, self._slots, host, rules, delay, self._max_urls, self._keep
        )
        try:
            await reader.run(stopped)
        except Exception:  # a bug here must not stop the crawl; the host's pages are crawled anyway
            log.exception("error while reading the sitemaps of %s", host)
        urls, drops = [], []
        check = self._scope.check
        for url in reader.found:
            reason = check(url, 1)
            if reason is None:
                urls.append(NewURL(url=url, fp=fingerprint(url), host=origin(url), depth=1, kind="sitemap"))
            else:
                drops.append((url, reason))
        if reader.found:
            log.info("%s: %d URLs from its sitemaps (%d requests)", host, len(reader.found), reader.requests)
        return urls, drops


class _HostReader:
    """The sitemap reading of one host: its queue of sitemap files, its request pacing, what it found."""

    def __init__(
        self,
        fetcher: Fetcher,
        politeness: Politeness,
        slots: asyncio.Semaphore,
        host: str,
        rules: RobotsRules,
        delay: float,
        max_urls: int,
        keep: KeepResponse,
    ) -> None:
        self.fetcher = fetcher
        self.keep = keep
        self.politeness = politeness
        self.slots = slots
        self.host = host
        self.rules = rules
        self.delay = delay
        """Seconds between two request starts: the host's delay, raised by its Crawl-delay."""
        self.max_urls = max_urls
        self.next_start = politeness.next_start(host)
        self.found: dict[str, None] = {}
        """Page URLs, normalized, in the order read (a dict: each once)."""
        self.requests = 0
        self.loudness = logging.INFO
        """The level faults of the current file are logged at."""

    async def run(self, stopped: Callable[[], bool]) -> None:
        queue = deque((url, 0) for url in sitemap_locations(self.host, self.rules))
        seen = {url for url, _ in queue}
        while queue and len(self.found) < self.max_urls and self.requests < MAX_SITEMAP_FILES and not stopped():
            url, level = queue.popleft()
            # A fault in a sitemap the site names is worth a warning; /sitemap.xml was only a guess.
            self.loudness = logging.WARNING if level or self.rules.sitemaps else logging.INFO
            async with self.slots:
                outcome = await self._fetch(url)
                nested = await self._read(outcome) if outcome is not None else []
            if level < MAX_INDEX_DEPTH:
                for loc in nested:
                    if loc not in seen and origin(loc) == self.host:
                        seen.add(loc)
                        queue.append((loc, level + 1))
        # The host's pages follow at the host's own pace: its Crawl-delay counts from the last request.
        wait = self.next_start - time.monotonic()
        if self.requests and wait > 0 and not stopped():
            await asyncio.sleep(wait)

    async def _fetch(self, url: str) -> FetchOutcome | None:
        """GET a sitemap politely, following redirects on the same origin; None when there is nothing to read."""
        for _ in range(MAX_REDIRECTS + 1):
            if not self.rules.allowed(url):
                log.info("sitemap %s is disallowed by robots.txt", url)
                return None
            wait = self.next_start - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self.next_start = time.monotonic() + self.delay
            self.politeness.reserve(self.host)
            outcome: FetchOutcome | None = None
            try:
                outcome = await self.fetcher.fetch(url, any_type=True, max_size=MAX_SITEMAP_BYTES)
            finally:
                self.politeness.release(self.host, ip=outcome.ip if outcome is not None else None)
            self.requests += 1
            self.keep(outcome)
            status = outcome.status
            if status is not None and 200 <= status < 300:
                return outcome
            if status is None or not 300 <= status < 400:
                log.log(self.loudness, "sitemap %s: %s", url, outcome.error or f"HTTP {status}")
                return None
            try:
                url = normalize(outcome.header("Location") or "", url)
            except InvalidURL:
                return None
            if origin(url) != self.host:
                log.info("sitemap %s redirects to another origin (%s): not followed", outcome.url, url)
                return None
        return None

    async def _read(self, outcome: FetchOutcome) -> list[str]:
        """Add a fetched sitemap's page URLs to `found` (up to `max_urls`); return the sitemaps it lists.

        Other tasks run between two chunks.
        """
        found, nested = self.found, []
        chunks = decoded_chunks(outcome.body, outcome.header("Content-Encoding"), MAX_SITEMAP_BYTES)
        try:
            for batch in parse_sitemap(chunks):
                for kind, loc in batch:
                    try:
                        url = normalize(loc, outcome.url)
                    except InvalidURL:
                        continue
                    if kind == "sitemap":
                        nested.append(url)
                    elif len(found) < self.max_urls:
                        found[url] = None
                if len(found) >= self.max_urls:
                    break
                await asyncio.sleep(0)
        except SitemapError as exc:
            log.log(self.loudness, "sitemap %s: %s (entries before the fault are kept)", outcome.url, exc)
        if outcome.truncated:
            log.log(self.loudness, "sitemap %s was cut (%s)", outcome.url, outcome.truncated)
        return nested


def sitemap_locations(host: str, rules: RobotsRules) -> list[str]:
    """The sitemaps to read for the origin `host`: those robots.txt lists on this origin, else /sitemap.xml."""
    listed = []
    for line in rules.sitemaps:
        try:
            url = normalize(line.strip(), host + "/robots.txt")  # a relative one is taken as robots.txt's
        except InvalidURL:
            continue
        if origin(url) == host:
            listed.append(url)
        else:
            log.info("robots.txt of %s lists a sitemap on another origin (%s): not read", host, url)
    return list(dict.fromkeys(listed)) if rules.sitemaps else [host + "/sitemap.xml"]
