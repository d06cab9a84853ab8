"""A rendered page's requests on its capture's dashboard page, in Chromium: the POST its script sent, with
its status, and a request robots.txt refused, with why (tests/sites/players.py's `/apps`, robots.txt
disallowing the keyed API)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.render.test_sniffer import Sniffed, sniff
from webtrawl.web.serve import Dashboard
from webtrawl.web.site import Site

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Sniffed:
    return asyncio.run(sniff(tmp_path_factory.mktemp("requests-view"), "/apps", disallow="/api/keyed/"))


@pytest.fixture(scope="module")
def base_url(apps: Sniffed) -> Iterator[str]:
    with Dashboard(Site(apps.out), port=0).beside() as server:
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
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == []


def capture_id(out: Path, url: str) -> int:
    conn = sqlite3.connect(out / "crawl.db")
    try:
        (found,) = conn.execute("SELECT id FROM captures WHERE url = ?", (url,)).fetchone()
    finally:
        conn.close()
    return int(found)


def test_a_page_s_post_is_listed_with_its_status(apps: Sniffed, page: Page) -> None:
    page.goto(f"/page/{capture_id(apps.out, apps.origin + '/app/posted')}")
    row = page.locator("#requests tr", has_text="/api/graphql")
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(0)).to_have_text("POST")
    expect(row.locator("td").nth(2)).to_have_text("200")
    expect(row.locator("td").nth(3)).to_have_text("application/json")


def test_a_refused_request_stays_listed_with_its_reason(apps: Sniffed, page: Page) -> None:
    page.goto(f"/page/{capture_id(apps.out, apps.origin + '/app/keyed')}")
    row = page.locator("#requests tr.refused", has_text="/api/keyed/7")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("refused: robots.txt")


def test_the_api_gives_a_page_s_requests(apps: Sniffed, page: Page) -> None:
    answer = page.request.get(f"/api/page/{capture_id(apps.out, apps.origin + '/app/posted')}")
    requests = {row["url"]: row for row in answer.json()["requests"]}
    posted = requests[apps.origin + "/api/graphql"]
    assert (posted["method"], posted["status"], posted["refused"]) == ("POST", 200, None)
    assert posted["record_bytes"] > 0
    hub = page.request.get(f"/api/page/{capture_id(apps.out, apps.origin + '/apps')}").json()
    assert hub["requests"] == []  # /apps, rendered too, made no request of its own


def test_the_archived_copy_of_a_page_shows_what_its_post_brought(apps: Sniffed, page: Page) -> None:
    """The archive view replays a rendered page as its scripts left it (no script runs there): the address
    its POST was answered with is in it, pointing into the archive."""
    copy = page.request.get(f"/archive/{capture_id(apps.out, apps.origin + '/app/posted')}/raw")
    assert copy.status == 200
    assert "media%2F8.mp3%3Fexpires" in copy.text()  # the <audio>'s address, rewritten into the archive
