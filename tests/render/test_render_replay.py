"""A rendered page replayed by the dashboard in Chromium from the WARC alone, its site's server stopped: the
text its scripts wrote, its style and image from the archive, nothing fetched elsewhere; and its thumbnail
(`--screenshots`) in the page's details and in the list of pages."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.crawls import connect, fast_config, path_of
from tests.sites.jsapp import JsSite
from webtrawl import Crawler
from webtrawl.config import RenderConfig, ScopeConfig
from webtrawl.web.serve import Dashboard
from webtrawl.web.site import Site

pytestmark = pytest.mark.slow


@dataclass
class Crawled:
    out: Path
    origin: str


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    out = tmp_path_factory.mktemp("replay")

    async def crawl() -> Crawled:
        async with JsSite() as site:
            allow = site.origin.replace(".", r"\.") + r"/(article/\d+)?$"
            config = replace(
                fast_config(site.url, out, scope=ScopeConfig(allow=(allow,))),
                render=RenderConfig(mode="all", timeout=5, screenshots=True),
            )
            await Crawler(config).run()
            return Crawled(out, site.origin)

    return asyncio.run(crawl())  # the site's server is gone once this returns


@pytest.fixture(scope="module")
def ids(crawled: Crawled) -> dict[str, int]:
    conn: sqlite3.Connection = connect(crawled.out)
    return {path_of(url): capture_id for capture_id, url in conn.execute("SELECT id, url FROM captures")}


@pytest.fixture(scope="module")
def base_url(crawled: Crawled) -> Iterator[str]:
    with Dashboard(Site(crawled.out), port=0).beside() as server:
        yield server.url.rstrip("/")


@pytest.fixture(scope="module")
def browser(base_url: str) -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--headless"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, base_url: str) -> Iterator[Page]:
    context = browser.new_context(base_url=base_url)
    yield context.new_page()
    context.close()


def test_a_rendered_page_replays_from_the_archive_alone(page: Page, ids: dict[str, int], base_url: str) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"/archive/{ids['/article/3']}")
    frame = page.frame_locator("iframe.archive-frame")
    frame.get_by_text("scriptword3").wait_for()
    logo = frame.locator("img").first
    logo.wait_for()
    page.wait_for_load_state("networkidle")
    assert logo.evaluate("image => image.complete && image.naturalWidth") == 1, "the logo came from the archive"
    color = frame.locator("body").evaluate("body => getComputedStyle(body).fontFamily")
    assert "sans-serif" in color, "the page's stylesheet came from the archive"
    assert requested and all(url.startswith(base_url) for url in requested)


def test_the_home_page_replays_with_the_links_its_script_wrote(page: Page, ids: dict[str, int]) -> None:
    page.goto(f"/archive/{ids['/']}/raw")
    hrefs = page.locator("a").evaluate_all("links => links.map(link => link.getAttribute('href'))")
    assert any(href.endswith("/article/5") and href.startswith("/archive/url/") for href in hrefs)


def test_thumbnails_show_in_the_page_details_and_the_list(page: Page, ids: dict[str, int]) -> None:
    page.goto(f"/page/{ids['/article/2']}")
    thumbnail = page.locator("#thumbnail")
    thumbnail.wait_for()
    page.wait_for_load_state("networkidle")
    assert thumbnail.evaluate("image => image.naturalWidth") == 320
    page.goto("/pages")
    page.wait_for_load_state("networkidle")
    widths = page.locator("#pages img.thumbnail").evaluate_all("images => images.map(image => image.naturalWidth)")
    assert widths == [320] * len(ids)
