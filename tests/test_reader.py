"""`webtrawl.open(DIR)` as a Python user reads a crawl: its captures, search, a URL's archived response,
what failed or was dropped and why, its counts; a running crawl too; one clear error for what is no crawl."""

from __future__ import annotations

import asyncio
import gzip
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import webtrawl
from tests.crawls import connect, fast_config
from tests.sites import SiteServer
from webtrawl import Crawler, FetchConfig, StoreError
from webtrawl.reader import CrawlReader, open

BROKEN = "/broken/"
"""The test site's page that always answers 500: retried, then failed."""


@pytest.fixture
async def small_site() -> AsyncIterator[SiteServer]:
    async with SiteServer(pages=20, calendar=False) as server:
        yield server


async def test_a_finished_crawl_reads_as_the_commands_show_it(small_site: SiteServer, tmp_path: Path) -> None:
    site = small_site.site
    fetch = FetchConfig(backoff=0.05, max_attempts=2, read_timeout=5, total_timeout=10)
    report = await Crawler(fast_config(small_site.url, tmp_path, fetch=fetch)).run()
    assert report.outcome == "finished"

    with webtrawl.open(tmp_path) as crawl:  # the package's name for it
        assert crawl.name == "default"
        captures = list(crawl.captures())
        assert len(captures) == connect(tmp_path).execute("SELECT COUNT(*) FROM captures").fetchone()[0]
        by_url = {capture.url: capture for capture in captures}
        home = by_url[small_site.url]
        assert (home.status, home.depth, home.title) == (200, 0, site.pages["/"].title)
        assert home.warc_file is not None and home.warc_file.endswith(".warc.gz") and home.fetched_at.endswith("Z")
        assert by_url[site.url("/hop/3")].redirects == (site.url("/hop/1"), site.url("/hop/2"))
        assert by_url[site.url("/hop/1")].final_url == site.url("/chain-end/")
        assert [c.status for c in captures if c.url == site.url(BROKEN)] == [500, 500]  # every attempt

        counts = crawl.counts
        assert (counts.waiting, counts.running) == (0, 0)
        assert counts.done == report.done_total and counts.failed == report.failed_total
        assert crawl.stats.captures == len(captures) and crawl.stats.failures == report.failures

        page = next(path for path, info in site.pages.items() if info.depth is not None and path != "/")
        hits = crawl.search(site.pages[page].word)
        assert [hit.page.url for hit in hits] == [site.url(page)]
        assert site.pages[page].word in "".join(segment.text for segment in hits[0].snippet if segment.match)

        docs = crawl.record(site.url("/docs/#top"))  # written as a user might: normalized as the crawl does
        assert site.route("/docs/").gzip
        assert (docs.status, docs.header("content-encoding")) == (200, "gzip")
        assert ("Content-Type", "text/html; charset=utf-8") in docs.headers
        assert docs.body == gzip.compress(site.route("/docs/").body, mtime=0)  # as the server sent it
        assert docs.decoded() == site.route("/docs/").body

        failed = {row.url: row.reason for row in crawl.failed()}
        assert failed[site.url("/missing/0/")] == "HTTP 404"
        assert failed[site.url(BROKEN)] == "HTTP 500 (after 2 attempts)"
        assert failed[site.url("/private/")] == "blocked by robots.txt"
        assert len(failed) == report.failed_total
        assert {row.url for row in crawl.failed("HTTP 404")} == {
            url for url, why in failed.items() if why == "HTTP 404"
        }
        dropped = {drop.url: drop.reason for drop in crawl.dropped()}
        assert dropped[site.other_origin + "/"] == "out-of-scope"
        assert sum(report.drops.values()) == len(dropped)

        with pytest.raises(StoreError, match="the crawl never found it"):
            crawl.record(site.url("/no/such/page/"))
        with pytest.raises(StoreError, match=r"the frontier has it as failed: blocked by robots\.txt"):
            crawl.record(site.url("/private/"))


async def test_a_running_crawl_is_read_while_it_waits_for_a_retry(small_site: SiteServer, tmp_path: Path) -> None:
    site = small_site.site
    fetch = FetchConfig(backoff=60, read_timeout=5, total_timeout=10)  # the retry stays due long after the test
    crawler = Crawler(fast_config(small_site.url, tmp_path, fetch=fetch))
    running = asyncio.create_task(crawler.run())
    try:
        await only_its_retry_left(crawler)
        with open(tmp_path) as crawl:
            (retry,) = crawl.retries()
            assert (retry.url, retry.reason, retry.attempts) == (site.url(BROKEN), "HTTP 500", 1)
            assert crawl.record(small_site.url).status == 200
            assert any(capture.url == small_site.url for capture in crawl.captures())
    finally:
        crawler.stop()
        report = await running
    assert report.outcome == "interrupted" and report.waiting == 1


async def only_its_retry_left(crawler: Crawler) -> None:
    """Wait until `crawler` has nothing in flight and nothing to claim before its retry, due in a minute (its
    frontier knows; the store has it once the last batch is committed, which comes first)."""
    for _ in range(600):
        await asyncio.sleep(0.05)
        frontier = crawler.frontier
        if frontier is not None and frontier.running == 0 and (frontier.next_wakeup() or 0) > 30:
            return
    raise AssertionError("the crawl never came down to its retry")


async def test_what_is_not_a_crawl_is_one_clear_error(small_site: SiteServer, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no crawl database at"):
        open(tmp_path / "nowhere")

    not_a_crawl = tmp_path / "other"
    not_a_crawl.mkdir()
    sqlite3.connect(not_a_crawl / "crawl.db").execute("CREATE TABLE t(x)").connection.commit()
    with pytest.raises(StoreError, match="is not a webtrawl crawl database"):
        open(not_a_crawl)

    for name in ("first", "second"):
        await Crawler(fast_config(small_site.url, tmp_path, name=name, max_pages=1)).run()
    with pytest.raises(StoreError, match=r"several crawls.*\(first, second\)"):
        open(tmp_path)
    with pytest.raises(StoreError, match="no crawl named 'third' here"):
        open(tmp_path, name="third")
    with open(tmp_path, name="second") as crawl:
        assert isinstance(crawl, CrawlReader) and crawl.name == "second"
        assert [capture.url for capture in crawl.captures()] == [small_site.url]
