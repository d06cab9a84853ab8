"""The dashboard in a real browser: search to an archived copy, crawled markup that must stay text, paging.

One crawl (the generated test site plus the hostile site of `test_browse`, with one more page carrying live
scripts of its own) and one dashboard on a loopback port serve the module; Chromium opens a fresh context
per test. Every test fails on a script error in any page and on any dialog: an injected `alert` that ran.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiohttp import web
from playwright.sync_api import Browser, Dialog, Page, expect, sync_playwright

from tests.web.test_browse import EVIL_TITLE, QUOTE_PATH, SCRIPT_PATH, Crawled, _evil, _ids, crawl_with_evil_site
from webtrawl.web.serve import Dashboard
from webtrawl.web.site import Site

pytestmark = pytest.mark.slow

SCRIPTED_PATH = "/scripted"
SCRIPTED_PAGE = """<!doctype html><title>Scripted page</title>
<script>window.pwned = 1; alert("the archived page's script ran")</script>
<p>A page whose own scripts must stay asleep in the archive.</p>
<img src="missing.png" onerror="window.pwned = 2; alert('the archived page\\'s onerror ran')">
"""
PAGE_SIZE = 40


async def _scripted_or_evil(request: web.Request) -> web.StreamResponse:
    if request.raw_path == SCRIPTED_PATH:
        return web.Response(text=SCRIPTED_PAGE, content_type="text/html")
    return await _evil(request)


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    return asyncio.run(crawl_with_evil_site(tmp_path_factory.mktemp("browser"), _scripted_or_evil, (SCRIPTED_PATH,)))


@pytest.fixture(scope="module")
def db(crawled: Crawled) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{crawled.out / 'crawl.db'}?mode=ro", uri=True)
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def base_url(crawled: Crawled) -> Iterator[str]:
    with Dashboard(Site(crawled.out), port=0).beside() as server:
        yield server.url.rstrip("/")


@pytest.fixture(scope="module")
def browser(base_url: str) -> Iterator[Browser]:
    """Chromium, started once the crawl is done: sync Playwright keeps an event loop running in this thread."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--headless"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, base_url: str) -> Iterator[Page]:
    """A page of a fresh context on the dashboard; script errors and dialogs fail the test."""
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    dialogs: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))

    def dialog(shown: Dialog) -> None:
        dialogs.append(f"{page.url}: {shown.type} {shown.message!r}")
        shown.dismiss()

    page.on("dialog", dialog)
    yield page
    context.close()
    assert errors == [], "script errors"
    assert dialogs == [], "an injected script ran"


def _capture_id(db: sqlite3.Connection, url: str) -> int:
    (capture_id,) = _ids(db, "c.url = ?", url)
    return capture_id


# -- search to an archived copy ----------------------------------------------------------------------


def test_a_word_found_on_one_page_leads_to_its_archived_copy(
    page: Page, crawled: Crawled, db: sqlite3.Connection
) -> None:
    path, info = next((p, i) for p, i in crawled.site.pages.items() if i.depth == 2)
    url = crawled.site.url(path)
    page.goto("/")
    page.fill("header input[name=q]", info.word)
    page.press("header input[name=q]", "Enter")
    page.wait_for_url(re.compile(r"/search\?q="))

    hits = page.locator("#hits > li")
    expect(hits).to_have_count(1)
    expect(hits.locator(".url")).to_have_text(url)
    marks = hits.locator("mark").all_inner_texts()
    assert marks and all(mark.lower() == info.word.lower() for mark in marks)
    expect(hits.locator(".browse-snippet")).to_contain_text(info.word)

    capture_id = _capture_id(db, url)
    (fetched_at,) = db.execute("SELECT fetched_at FROM captures WHERE id = ?", (capture_id,)).fetchone()
    hits.locator("a.browse-title").click()
    page.wait_for_url(f"**/archive/{capture_id}")
    banner = page.locator(".archive-banner")
    expect(banner).to_contain_text(f"Archived copy of {url} · {info.title}")
    expect(banner).to_contain_text(datetime.fromtimestamp(fetched_at, UTC).strftime("Fetched %Y-%m-%d %H:%M:%S UTC"))
    expect(banner).to_contain_text("status 200")
    copy = page.frame_locator("iframe.archive-frame")
    expect(copy.locator("h1")).to_have_text(info.title)
    expect(copy.locator("p")).to_contain_text(info.word)


# -- crawled markup stays text -----------------------------------------------------------------------


def _assert_nothing_ran(page: Page, view: str) -> None:
    assert page.evaluate("typeof window.pwned") == "undefined", view
    for frame in page.frames[1:]:
        assert frame.evaluate("typeof window.pwned") == "undefined", f"{view}: frame {frame.url}"


def test_injected_scripts_in_titles_urls_and_text_never_run(
    page: Page, crawled: Crawled, db: sqlite3.Connection
) -> None:
    evil = crawled.evil_origin
    home, quoted, scripted_url = (_capture_id(db, evil + p) for p in ("/", QUOTE_PATH, SCRIPT_PATH))
    views = [
        "/",
        "/pages",
        f"/pages?host={evil.removeprefix('http://')}",
        "/pages?sort=url&dir=desc&limit=500",
        "/search?q=pwned",
        "/search?q=xylophonic",
        "/search?q=onmouseover",
        "/search?q=script",
        f"/page/{home}",
        f"/page/{quoted}",
        f"/page/{scripted_url}",
        f"/archive/{home}",
        f"/archive/{quoted}",
        f"/archive/{scripted_url}",
    ]
    for view in views:
        response = page.goto(view)
        assert response is not None and response.ok, view
        for link in page.locator(f'a[href^="{evil}"]').all():
            link.hover()  # a quote of the URL that closed the attribute would have added onmouseover
        _assert_nothing_ran(page, view)

    page.goto("/search?q=pwned")
    expect(page.locator("a.browse-title")).to_have_text(EVIL_TITLE)
    expect(page.locator("a.browse-title mark")).to_have_text("pwned")
    page.goto(f"/page/{home}")
    expect(page.locator("#title")).to_have_text(EVIL_TITLE)
    page.goto(f"/page/{quoted}")
    expect(page.locator("#title")).to_have_text("<img src=x onerror=alert(3)> quote")
    expect(page.locator("#original")).to_have_text(evil + QUOTE_PATH)


def test_an_archived_page_s_own_scripts_stay_asleep(page: Page, crawled: Crawled, db: sqlite3.Connection) -> None:
    capture_id = _capture_id(db, crawled.evil_origin + SCRIPTED_PATH)
    page.goto(f"/archive/{capture_id}")
    frame = page.locator("iframe.archive-frame")
    assert frame.get_attribute("sandbox") == ""  # no allow-scripts, no allow-same-origin
    copy = page.frame_locator("iframe.archive-frame")
    expect(copy.locator("p")).to_have_text("A page whose own scripts must stay asleep in the archive.")
    expect(copy.locator("script")).to_have_count(1)  # there, and inert
    _assert_nothing_ran(page, "banner")

    # opened on its own, without the banner's iframe, the copy is sandboxed by its response header
    response = page.goto(f"/archive/{capture_id}/raw")
    assert response is not None and response.ok
    assert response.headers["content-security-policy"].startswith("sandbox;")
    expect(page.locator("p")).to_have_text("A page whose own scripts must stay asleep in the archive.")
    _assert_nothing_ran(page, "raw copy")


# -- paging ------------------------------------------------------------------------------------------


def _rows(page: Page) -> list[tuple[str, str]]:
    """(URL, details address) of each row shown."""
    return [
        (url, detail)
        for url, detail in page.locator("#pages tbody tr").evaluate_all(
            """rows => rows.map(row => [
                row.querySelector("td.url > a").textContent,
                row.querySelector('a[href^="/page/"]').getAttribute("href"),
            ])"""
        )
    ]


def test_next_links_page_through_every_capture_once_and_back(page: Page, db: sqlite3.Connection) -> None:
    page.goto(f"/pages?limit={PAGE_SIZE}")
    shown = [_rows(page)]
    while page.locator("#next").count():
        page.click("#next")
        page.wait_for_url(re.compile(r"after="))
        shown.append(_rows(page))
        assert page.url.count("limit=40") == 1

    rows = [row for rows in shown for row in rows]
    (captures,) = db.execute("SELECT COUNT(*) FROM captures").fetchone()
    assert len(shown) == -(-captures // PAGE_SIZE) > 5
    assert all(len(rows) == PAGE_SIZE for rows in shown[:-1])
    assert len({detail for _, detail in rows}) == len(rows) == captures
    assert sorted(int(detail.rsplit("/", 1)[1]) for _, detail in rows) == _ids(db)
    # a URL fetched again (a retried 500) is listed once per capture
    assert Counter(url for url, _ in rows) == Counter(url for (url,) in db.execute("SELECT url FROM captures"))

    for back in range(2, len(shown) + 1):  # "previous" links read the list backwards to its first page
        page.click("#previous")
        page.wait_for_url(re.compile(r"before="))
        assert _rows(page) == shown[-back]
    assert page.locator("#previous").count() == 0
    page.click("#next")
    page.wait_for_url(re.compile(r"after="))
    assert _rows(page) == shown[1]
    page.go_back()
    page.go_back()
    assert _rows(page) == shown[1]
    page.click("text=first page")
    page.wait_for_url(re.compile(r"/pages\?limit=40$"))
    assert _rows(page) == shown[0]
    assert page.locator("text=first page").count() == 0


# -- framing -----------------------------------------------------------------------------------------


@contextmanager
def _other_site(body: str) -> Iterator[str]:
    """Another origin on this machine (its own port: a page of a public name may not frame a loopback one
    anyway) that answers every request with `body`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_another_site_cannot_frame_the_dashboard_or_its_archive(
    page: Page, base_url: str, db: sqlite3.Connection
) -> None:
    (capture_id,) = db.execute("SELECT MIN(id) FROM captures WHERE status = 200").fetchone()
    with _other_site("<p>framed fine</p>") as frameable:
        framed = {"overview": f"{base_url}/", "copy": f"{base_url}/archive/{capture_id}/raw", "control": frameable}
        frames = "".join(f'<iframe name="{name}" src="{src}"></iframe>' for name, src in framed.items())
        with _other_site(frames) as elsewhere:
            page.goto(elsewhere)  # returns at the load event, once every frame has loaded or failed
            control = page.frame(name="control")
            assert control is not None
            expect(control.locator("p")).to_have_text("framed fine")  # another origin's frame as such works
            for name in ("overview", "copy"):
                frame = page.frame(name=name)
                assert frame is not None
                assert frame.url == "chrome-error://chromewebdata/", f"another site framed the {name}: {frame.url}"


# -- a narrow screen ---------------------------------------------------------------------------------


def test_every_view_fits_a_400_pixel_screen(
    browser: Browser, base_url: str, crawled: Crawled, db: sqlite3.Connection
) -> None:
    (home,) = _ids(db, "c.url = ?", crawled.site.url("/"))
    context = browser.new_context(base_url=base_url, viewport={"width": 400, "height": 800})
    page = context.new_page()
    try:
        for view in ["/", "/pages", "/pages?limit=500&sort=url", "/search?q=page", f"/page/{home}", "/failed",
                     "/dropped", f"/archive/{home}"]:  # fmt: skip
            response = page.goto(view)
            assert response is not None and response.ok, view
            width = page.evaluate("document.documentElement.clientWidth")
            assert width == 400 or width < 400, view  # a scroll bar may take some
            overflow = page.evaluate(
                "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth) - "
                "document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"{view} is {overflow} px wider than the screen"
        page.goto("/pages?limit=500&sort=url")
        box = page.locator("#pages").locator("xpath=..")
        assert box.evaluate("box => getComputedStyle(box).overflowX") == "auto"
        assert box.evaluate("box => box.scrollWidth > box.clientWidth")  # the table scrolls inside its box
    finally:
        context.close()
