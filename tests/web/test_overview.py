"""The overview's cards and chart in Chromium: a finished crawl shows its real rate and its whole history; a
running one updates every card and the status line from the same reading, and its chart starts with the
crawl, not with the page."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

from tests.crawls import fast_config
from tests.sites import SiteServer
from tests.web.test_live import dashboard, until
from webtrawl.crawler import Crawler
from webtrawl.web.serve import Dashboard
from webtrawl.web.site import Site


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("overview")

    async def crawl() -> None:
        async with SiteServer(pages=60, calendar=False, delay=0.01) as server:
            await Crawler(fast_config(server.url, out)).run()

    asyncio.run(crawl())
    return out


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--headless"]
        )
        yield browser
        await browser.close()


async def _points(page: Page) -> int:
    points = await page.get_attribute("#live-chart polyline", "points") or ""
    return len(points.split())


async def test_a_finished_crawl_shows_its_average_rate_and_its_whole_history(finished: Path, browser: Browser) -> None:
    async with dashboard(finished) as client:
        overview = (await client.get("/api/overview")).json()
        live = (await client.get("/api/live")).json()
        history = (await client.get("/api/history")).json()
    assert overview["pages_per_second"] > 0 and not live["live"]
    assert live["crawl"]["pages_per_second"] == overview["pages_per_second"]
    assert (live["crawl"]["captures"], live["crawl"]["bytes"]) == (overview["captures"], overview["bytes"])
    conn = sqlite3.connect(f"file:{finished / 'crawl.db'}?mode=ro", uri=True)
    try:
        first, last, captures = conn.execute(
            "SELECT MIN(fetched_at), MAX(fetched_at), COUNT(*) FROM captures"
        ).fetchone()
    finally:
        conn.close()
    assert history["start"] == first and history["start"] + len(history["rates"]) * history["step"] >= last
    assert any(history["rates"]) and sum(history["rates"][:-1]) * history["step"] <= captures

    with Dashboard(Site(finished), port=0).beside() as server:
        page = await browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(server.url)
        await page.wait_for_function("document.getElementById('live').dataset.state === 'finished'")
        await page.wait_for_function("document.querySelector('#live-chart polyline').getAttribute('points')")
        # live.js has taken over the cards: the rate is still the crawl's, not the 0 of a crawl not running
        assert await page.text_content("#pages-per-second") == f"{overview['pages_per_second']:.1f}"
        assert await page.text_content("#rate-label") == "pages/s on average"
        assert await page.text_content("#captures") == f"{overview['captures']:,}"
        assert await _points(page) == len(history["rates"])
        assert "whole crawl" in (await page.text_content(".live-scale") or "")
        assert errors == []


@pytest.mark.slow
async def test_a_running_crawl_s_cards_and_status_line_move_together(tmp_path: Path, browser: Browser) -> None:
    async with SiteServer(pages=1500, calendar=False, delay=0.03) as site:
        crawler = Crawler(fast_config(site.url, tmp_path))
        crawl = asyncio.create_task(crawler.run())
        async with dashboard(tmp_path) as client:
            before = await until(client, lambda s: s["live"] and s["crawl"]["captures"] >= 20)
        history = await _history(tmp_path)
        assert sum(history["rates"]) > 0  # the store has the crawl's history before any page is open
        with Dashboard(Site(tmp_path), port=0).beside() as server:
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            await page.goto(server.url)
            await page.wait_for_function("document.getElementById('live').dataset.state === 'running'")
            await page.wait_for_function("document.querySelector('#live-chart polyline').getAttribute('points')")
            assert await _points(page) >= 1
            first = {name: await page.text_content(f"#{name}") for name in ("done", "captures", "elapsed", "bytes")}
            assert int((first["captures"] or "0").replace(",", "")) >= before["crawl"]["captures"]
            # every card moves on with the events, not only the frontier's counts
            for name in ("captures", "elapsed", "bytes"):
                await page.wait_for_function(
                    "([name, was]) => document.getElementById(name).textContent !== was", arg=[name, first[name]]
                )
            status = await page.text_content("#live-detail") or ""
            assert "pages this run" not in status and "elapsed" not in status  # the cards say those, once
            assert "in flight" in status
            assert await page.text_content("#rate-label") == "pages/s"
            assert errors == []
        async with dashboard(tmp_path) as client:
            await client.post("/api/control/stop", headers={"X-Webtrawl-Control": "1"})
        await asyncio.wait_for(crawl, 30)


async def _history(directory: Path) -> dict:
    async with dashboard(directory) as client:
        return (await client.get("/api/history")).json()
