"""A rendered crawl of the project's JS site (`tests/sites/jsapp.py`), as a user sees it: what only scripts
build is crawled, found and archived, and every request the pages made went through webtrawl.

One crawl serves the module (Chromium is started once); its site is stopped before the tests look at it.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.crawls import check_warcs, connect, fast_config, path_of
from tests.sites.jsapp import JsSite, Req
from webtrawl import Crawler
from webtrawl.config import RenderConfig
from webtrawl.stats import CrawlReport

pytestmark = pytest.mark.slow

TIMEOUT = 15.0
"""Seconds a page's rendering may take in these tests: the 100,000-node page took more than 8 on a loaded
2-core machine."""


@dataclass
class Rendered:
    out: Path
    report: CrawlReport
    requests: list[Req]
    origin: str


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    out = tmp_path_factory.mktemp("rendered")

    async def crawl() -> Rendered:
        async with JsSite() as site:
            config = replace(fast_config(site.url, out), render=RenderConfig(mode="all", timeout=TIMEOUT))
            report = await Crawler(config).run()
            return Rendered(out, report, list(site.requests), site.origin)

    return asyncio.run(crawl())


@pytest.fixture(scope="module")
def db(rendered: Rendered) -> sqlite3.Connection:
    return connect(rendered.out)


def done_paths(db: sqlite3.Connection) -> set[str]:
    return {path_of(url) for (url,) in db.execute("SELECT url FROM urls WHERE state = 2")}


def served(rendered: Rendered) -> Counter[str]:
    return Counter(request.path for request in rendered.requests)


def test_links_written_by_a_script_from_a_json_call_are_crawled(rendered: Rendered, db: sqlite3.Connection) -> None:
    assert rendered.report.outcome == "finished"
    assert {f"/article/{n}" for n in range(1, 6)} | {"/feed", "/player", "/dialogs"} <= done_paths(db)
    (depth,) = db.execute("SELECT depth FROM urls WHERE url LIKE '%/article/5'").fetchone()
    assert depth == 1, "a link found on the rendered home page is one level down, like any link"


def test_titles_and_text_set_by_script_are_indexed_and_searchable(db: sqlite3.Connection) -> None:
    titles = dict(db.execute("SELECT url, title FROM captures WHERE url LIKE '%/article/%'").fetchall())
    assert sorted(titles.values()) == [f"Article {n}" for n in range(1, 6)]
    hits = db.execute(
        "SELECT c.url FROM captures_fts f JOIN captures c ON c.id = f.rowid WHERE captures_fts MATCH 'scriptword3'"
    ).fetchall()
    assert [path_of(url) for (url,) in hits] == ["/article/3"]


def test_infinite_scroll_is_followed_until_the_page_stops_growing(rendered: Rendered, db: sqlite3.Connection) -> None:
    assert {f"/api/feed?page={k}" for k in range(1, 5)} <= set(served(rendered))
    assert {f"/item/{k}" for k in range(1, 41)} <= done_paths(db)


def test_a_click_to_play_player_is_started(rendered: Rendered) -> None:
    assert served(rendered)["/api/player.json"] >= 1
    assert served(rendered)["/media/track.mp3"] >= 1


def test_every_request_went_through_the_crawler(rendered: Rendered) -> None:
    """The browser reached nothing by itself: each request the site got carries the crawl's User-Agent."""
    agents = {request.user_agent for request in rendered.requests}
    assert len(agents) == 1 and agents.pop().startswith("webtrawl/")


def test_robots_txt_applies_to_a_page_s_own_requests(rendered: Rendered, db: sqlite3.Connection) -> None:
    assert "/api/secret" not in served(rendered)
    assert db.execute("SELECT reason FROM dropped WHERE url LIKE '%/api/secret'").fetchall() == [("robots.txt",)]


def test_a_request_to_a_private_address_is_refused_and_recorded(db: sqlite3.Connection) -> None:
    drops = dict(db.execute("SELECT url, reason FROM dropped WHERE reason = 'private-address'").fetchall())
    assert drops == {
        "http://10.255.255.1/tracker.gif": "private-address",
        "http://192.168.255.1/beacon": "private-address",
    }
    assert "/after-private" in done_paths(db)


def test_a_page_that_never_goes_idle_still_ends(rendered: Rendered, db: sqlite3.Connection) -> None:
    assert "/after-idle" in done_paths(db)
    assert served(rendered)["/api/poll"] > 3, "its polls went on while the page was rendered"
    assert rendered.report.render["render_timeouts"] >= 1


def test_a_script_that_loops_forever_does_not_hold_the_crawl(db: sqlite3.Connection) -> None:
    state, reason = db.execute("SELECT state, reason FROM urls WHERE url LIKE '%/busy-loop'").fetchone()
    assert (state, reason) == (2, None)


def test_dialogs_popups_and_history_do_not_stop_a_page(db: sqlite3.Connection) -> None:
    titles = dict(db.execute("SELECT url, title FROM captures").fetchall())
    assert {path_of(url): t for url, t in titles.items() if path_of(url) in ("/dialogs", "/opener")} == {
        "/dialogs": "Dialogs done",
        "/opener": "Opener",
    }
    assert {"/after-dialogs", "/popup-target", "/virtual/route"} <= done_paths(db)
    assert "/blank-target" in done_paths(db), "a window opened by a link with a target is a link"


def test_a_frame_written_by_script_is_a_link_and_loads_through_the_crawler(
    rendered: Rendered, db: sqlite3.Connection
) -> None:
    assert "/frame-doc" in done_paths(db)
    (title,) = db.execute("SELECT title FROM captures WHERE url LIKE '%/framed'").fetchone()
    assert title == "Framed"
    (archived,) = db.execute("SELECT COUNT(*) FROM resources WHERE url LIKE 'http%/frame-doc'").fetchone()
    assert archived == 1, "the frame's document, as the page loaded it, is archived with the page"


def test_a_navigation_away_is_a_link_and_the_page_stays(rendered: Rendered, db: sqlite3.Connection) -> None:
    assert "/before-leaving" in done_paths(db)
    elsewhere = db.execute("SELECT reason FROM dropped WHERE url LIKE 'http://127.0.0.2:9/elsewhere'").fetchall()
    assert elsewhere == [("out-of-scope",)], "the other host's page is judged by the scope like any link"


def test_a_huge_dom_is_read(db: sqlite3.Connection) -> None:
    assert "/after-huge" in done_paths(db)
    (text,) = db.execute("SELECT text FROM captures WHERE url LIKE '%/huge-dom'").fetchone()
    assert text.startswith("row 0")


def test_subresources_are_archived_as_received_and_linked_to_their_page(rendered: Rendered) -> None:
    check_warcs(rendered.out)
    pages: dict[str, str] = {}
    resources: dict[str, str] = {}
    for file in sorted((rendered.out / "warc").glob("*.warc.gz")):
        with file.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type != "response":
                    continue
                uri = record.rec_headers.get_header("WARC-Target-URI")
                page = record.rec_headers.get_header("WARC-Page-ID")
                if page is None:
                    pages[record.rec_headers.get_header("WARC-Record-ID")] = uri
                else:
                    resources[uri] = page
    nav = rendered.origin + "/api/nav.json"
    assert pages[resources[nav]] == rendered.origin + "/"
    article = rendered.origin + "/api/article/4.json"
    assert pages[resources[article]].endswith("/article/4")
    assert rendered.origin + "/static/site.css" in resources


def test_a_static_file_shared_by_pages_is_fetched_about_once(rendered: Rendered, db: sqlite3.Connection) -> None:
    """Served from memory once archived: only pages rendered before the first one's records were written
    (two at a time, the default) fetch it again."""
    (shells,) = db.execute("SELECT COUNT(*) FROM captures WHERE title != '' AND url NOT LIKE '%/item/%'").fetchone()
    assert shells > 20
    assert 1 <= served(rendered)["/static/site.css"] <= 4
    assert 1 <= served(rendered)["/static/logo.png"] <= 4


def test_the_report_counts_rendering(rendered: Rendered, db: sqlite3.Connection) -> None:
    render = rendered.report.render
    (scripted,) = db.execute("SELECT COUNT(*) FROM captures WHERE content_type = 'text/html'").fetchone()
    assert render["rendered"] == scripted
    assert render["subresources"] > 20
    assert render["browser_restarts"] == 0
    (snap,) = db.execute("SELECT snapshot FROM crawl_live").fetchone()
    assert json.loads(snap)["render"]["rendered"] == scripted
