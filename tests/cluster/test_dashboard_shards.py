"""A distributed crawl's dashboard in a real browser: a word found on a page a worker fetched leads to its
archived copy, read in that node's directory; a shard this machine cannot read is named on every page.

Three nodes (the coordinator's and two workers) crawl the test sites into three directories; the dashboard
is given the coordinator's.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.cluster.processes import NAME, Sites, crawl_on_three_nodes
from tests.redis_servers import RedisServer
from webtrawl.web.serve import Dashboard
from webtrawl.web.site import Site

pytestmark = pytest.mark.slow


@pytest.fixture
def page() -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--headless"])
        yield browser.new_page()
        browser.close()


def test_the_archived_copy_of_a_page_a_worker_fetched_opens_from_the_coordinators_dashboard(
    tmp_path: Path, page: Page
) -> None:
    with Sites() as sites, RedisServer() as server:
        crawl_on_three_nodes(sites, server.url, tmp_path)
        by_url = {s.site.url(path): info for s in sites.servers for path, info in s.site.pages.items()}
    shard = sqlite3.connect(f"file:{tmp_path / 'w0' / 'node.db'}?mode=ro", uri=True)
    fetched = [url for (url,) in shard.execute("SELECT url FROM captures WHERE status = 200")]
    shard.close()
    info = next(by_url[url] for url in fetched if url in by_url and by_url[url].word)  # a worker fetched it
    with Dashboard(Site(tmp_path / "coord", name=NAME), port=0).beside() as dashboard:
        base = dashboard.url.rstrip("/")
        page.goto(f"{base}/")
        expect(page.locator(".notice")).to_have_count(0)
        page.fill("header input[name=q]", info.word)
        page.press("header input[name=q]", "Enter")
        page.wait_for_url(re.compile(r"/search\?q="))
        page.locator("#hits > li a.browse-title").first.click()
        page.wait_for_url(re.compile(r"/archive/\d+"))
        copy = page.frame_locator("iframe.archive-frame")
        expect(copy.locator("h1")).to_have_text(info.title)

        (tmp_path / "w1").rename(tmp_path / "w1-elsewhere")
        page.goto(f"{base}/pages")
        expect(page.locator(".notice")).to_contain_text("1 shard(s) of this crawl cannot be read from this machine")
        expect(page.locator(".notice")).to_contain_text(str((tmp_path / "w1").resolve()))
