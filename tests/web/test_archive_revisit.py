"""Archived copies of unchanged captures: a re-crawl archives a page that did not change as a revisit record,
without its content, and the dashboard serves the content of the capture it repeats.

Three real crawls of a local site serve the module: a first crawl, then two re-crawls once every page is due.
Each record goes to a WARC file of its own (a tiny `warc_size`), so a test can lose the one file that holds
the content a revisit repeats.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from selectolax.lexbor import LexborHTMLParser
from starlette.exceptions import StarletteDeprecationWarning

from tests.crawls import fast_config
from tests.test_cli import webtrawl
from tests.test_recrawl import ChangingSite, crawl, serving
from tests.web.test_archive import assert_copy_headers, client_for, update
from webtrawl.config import RevisitConfig

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

REVISIT = RevisitConfig(recrawl=True, min_interval=0.2, max_interval=100)


@dataclass(frozen=True)
class Capture:
    id: int
    fetched_at: float
    status: int
    unchanged: bool
    warc_file: str

    @property
    def when(self) -> str:
        """The fetch time as the dashboard writes it."""
        return datetime.fromtimestamp(self.fetched_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    @property
    def stamp(self) -> str:
        return datetime.fromtimestamp(self.fetched_at, UTC).strftime("%Y%m%d%H%M%S")


@dataclass(frozen=True)
class Crawled:
    out: Path
    url: str

    def captures(self, path: str) -> list[Capture]:
        """The captures of `path`, oldest first."""
        conn = sqlite3.connect(f"file:{self.out / 'crawl.db'}?mode=ro", uri=True)
        try:
            found = conn.execute(
                "SELECT id, fetched_at, status, unchanged, warc_file FROM captures WHERE url = ? ORDER BY id",
                (self.url + path,),
            ).fetchall()
        finally:
            conn.close()
        return [Capture(id_, at, status, bool(unchanged), warc) for id_, at, status, unchanged, warc in found]


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    """Three runs. /same always answers 304 after the first; /later changes once (run 2), then answers 304;
    /plain has no validators and changes once (run 2), then sends the same bytes again."""
    out = tmp_path_factory.mktemp("revisits")
    site = ChangingSite()

    async def run() -> str:
        site.set("/", "home", links=("/same", "/later", "/plain"), etag='"home"')
        site.set("/same", "never changes", etag='"same-1"')
        site.set("/later", "first version aardvark", modified=1_700_000_000, title="Later, first")
        site.set("/plain", "first plain ocelot")
        async with serving(site):
            config = replace(fast_config(site.url + "/", out), warc_size=1, revisit=replace(REVISIT, recrawl=False))
            # Runs a second apart: every page is due again, and archive addresses (to the second, as
            # Wayback's are) tell the runs apart.
            await crawl(config)
            await asyncio.sleep(1.1)
            site.set("/later", "second version zebra", modified=1_700_000_100, title="Later, second")
            site.set("/plain", "second plain lynx")
            await crawl(replace(config, revisit=REVISIT))
            await asyncio.sleep(1.1)
            await crawl(replace(config, revisit=REVISIT))
        return site.url

    crawled = Crawled(out, asyncio.run(run()))
    statuses = {path: [(c.status, c.unchanged) for c in crawled.captures(path)] for path in ("/same", "/later")}
    assert statuses == {
        "/same": [(200, False), (304, True), (304, True)],
        "/later": [(200, False), (200, False), (304, True)],
    }
    assert [(c.status, c.unchanged) for c in crawled.captures("/plain")] == [(200, False), (200, False), (200, True)]
    return crawled


@pytest.fixture
def client(crawled: Crawled) -> Iterator[TestClient]:
    with client_for(crawled.out) as client:
        yield client


def banner(client: TestClient, capture: Capture) -> LexborHTMLParser:
    page = client.get(f"/archive/{capture.id}")
    assert page.status_code == 200, page.text
    tree = LexborHTMLParser(page.text)
    assert tree.css_first("iframe.archive-frame").attributes["src"] == f"/archive/{capture.id}/raw"
    return tree


def test_a_304_shows_the_last_full_copy_under_its_own_date(crawled: Crawled, client: TestClient) -> None:
    first, _again, latest = crawled.captures("/same")
    tree = banner(client, latest)
    text = tree.css_first(".archive-banner").text()
    title = " ".join(tree.css_first(".archive-banner p").text().split())
    assert title == f"Archived copy of {crawled.url}/same · /same"  # the title, from the copy it repeats
    assert f"Fetched {latest.when} · status 304 (not modified)" in " ".join(text.split())
    unchanged = " ".join(tree.css_first("#unchanged").text().split())
    assert f"Unchanged since the capture of {first.when}" in unchanged and "304 Not Modified" in unchanged
    links = {a.attributes["href"] for a in tree.css(".archive-banner a")}
    assert {f"/archive/{first.id}", f"/page/{first.id}", f"/page/{latest.id}"} <= links
    raw = client.get(f"/archive/{latest.id}/raw")
    assert raw.status_code == 200 and "never changes" in raw.text
    assert_copy_headers(raw)
    source = client.get(f"/archive/{latest.id}/source")
    assert source.status_code == 200 and "<p>never changes</p>" in source.text
    # a revisit of a revisit goes back to the full copy too
    assert "never changes" in client.get(f"/archive/{_again.id}/raw").text


def test_a_304_after_a_change_shows_the_changed_copy(crawled: Crawled, client: TestClient) -> None:
    _first, changed, latest = crawled.captures("/later")
    unchanged = " ".join(banner(client, latest).css_first("#unchanged").text().split())
    assert f"Unchanged since the capture of {changed.when}" in unchanged
    raw = client.get(f"/archive/{latest.id}/raw").text
    assert "second version zebra" in raw and "aardvark" not in raw


def test_the_same_content_again_shows_the_copy_with_that_digest(crawled: Crawled, client: TestClient) -> None:
    _first, changed, latest = crawled.captures("/plain")
    tree = banner(client, latest)
    text = " ".join(tree.css_first(".archive-banner").text().split())
    assert f"Fetched {latest.when} · status 200" in text
    assert f"Unchanged since the capture of {changed.when} (the server sent the same content again)" in text
    raw = client.get(f"/archive/{latest.id}/raw").text
    assert "second plain lynx" in raw and "ocelot" not in raw


def test_links_of_a_repeated_copy_resolve_at_the_revisit_time(crawled: Crawled, client: TestClient) -> None:
    home = crawled.captures("/")[-1]
    assert home.unchanged
    raw = client.get(f"/archive/{home.id}/raw")
    assert raw.status_code == 200
    hrefs = [a.attributes["href"] for a in LexborHTMLParser(raw.text).css("a")]
    assert hrefs == [f"/archive/url/{home.stamp}/{crawled.url}{path}" for path in ("/same", "/later", "/plain")]
    followed = client.get(hrefs[0])  # nearest to that time is a revisit of /same: served with its content
    assert followed.status_code == 200 and "never changes" in followed.text
    assert_copy_headers(followed)
    visit = client.get(hrefs[0], headers={"Sec-Fetch-Dest": "document"}, follow_redirects=False)
    assert visit.headers["location"] in {f"/archive/{c.id}" for c in crawled.captures("/same") if c.unchanged}


def test_detail_says_unchanged_and_links_the_capture_it_repeats(crawled: Crawled, client: TestClient) -> None:
    first, _again, latest = crawled.captures("/same")
    page = client.get(f"/page/{latest.id}")
    assert page.status_code == 200
    tree = LexborHTMLParser(page.text)
    said = " ".join(tree.css_first("#unchanged").text().split())
    assert said.startswith("Unchanged: the server answered 304 Not Modified")
    assert f"It repeats the capture of {first.when}." in said
    assert tree.css_first("#repeats").attributes["href"] == f"/page/{first.id}"
    assert tree.css_first("#archived").attributes["href"] == f"/archive/{latest.id}"
    api = client.get(f"/api/page/{latest.id}").json()
    assert api["unchanged"] is True
    assert api["repeats"] == {
        "id": first.id, "fetched_at": first.fetched_at, "status": 200, "warc_file": first.warc_file, "node": None,
        "warc_here": True, "detail": f"/page/{first.id}", "archive": f"/archive/{first.id}",
    }  # fmt: skip
    plain = client.get(f"/page/{crawled.captures('/plain')[-1].id}").text
    assert "the server sent the same content as before" in plain
    full = client.get(f"/api/page/{first.id}").json()
    assert (full["unchanged"], full["repeats"]) == (False, None)
    assert LexborHTMLParser(client.get(f"/page/{first.id}").text).css_first("#unchanged") is None


def test_unchanged_captures_are_listed_under_the_title_of_their_content(crawled: Crawled, client: TestClient) -> None:
    rows = {row["id"]: row["title"] for row in client.get("/api/pages?limit=100").json()["rows"]}
    assert [rows[c.id] for c in crawled.captures("/later")] == ["Later, first", "Later, second", "Later, second"]
    assert [rows[c.id] for c in crawled.captures("/same")] == ["/same"] * 3
    latest = crawled.captures("/later")[-1]
    assert LexborHTMLParser(client.get(f"/page/{latest.id}").text).css_first("#title").text() == "Later, second"
    assert client.get(f"/api/page/{latest.id}").json()["page"]["title"] == "Later, second"
    code, jsonl, err = asyncio.run(webtrawl("export", str(crawled.out)))
    assert code == 0, err
    exported = [json.loads(line) for line in jsonl.splitlines()]
    assert [row["title"] for row in exported if row["url"] == crawled.url + "/later"] == [
        "Later, first", "Later, second", "Later, second",
    ]  # fmt: skip


def test_a_lost_original_gives_a_clear_page(crawled: Crawled, tmp_path: Path) -> None:
    copied = Path(shutil.copytree(crawled.out, tmp_path / "crawl"))
    first, _again, latest = crawled.captures("/same")
    assert latest.warc_file != first.warc_file
    (copied / "warc" / first.warc_file).unlink()
    with client_for(copied) as client:
        for address in (f"/archive/{latest.id}", f"/archive/{latest.id}/raw", f"/archive/{latest.id}/source"):
            page = client.get(address)
            assert page.status_code == 404
            assert page.headers["content-type"] == "text/html; charset=utf-8"
            tree = LexborHTMLParser(page.text)
            assert tree.css_first("h1").text() == "The archived copy is missing"
            said = " ".join(tree.css_first(".archive-message").text().split())
            assert f"This capture was unchanged: its content is that of the capture fetched {first.when}" in said
            assert f"whose WARC file {first.warc_file} is missing" in said and "No full copy is left" in said
            assert tree.css_first("#repeats a").attributes["href"] == f"/page/{first.id}"
        detail = LexborHTMLParser(client.get(f"/page/{latest.id}").text)
        assert detail.css_first("#repeats").attributes["href"] == f"/page/{first.id}"
        archived = " ".join(detail.css_first("#archived").text().split())
        assert archived == (
            f"The WARC file {first.warc_file} of the capture it repeats is missing from this crawl directory: "
            "no full copy is left."
        )


def test_an_original_on_a_node_says_where_it_is(crawled: Crawled, tmp_path: Path) -> None:
    copied = Path(shutil.copytree(crawled.out, tmp_path / "crawl"))
    first, _again, latest = crawled.captures("/same")
    elsewhere = "node-02-20260101000000-00001.warc.gz"
    update(copied, "UPDATE captures SET node = 'node-02', warc_file = ? WHERE id = ?", elsewhere, first.id)
    with client_for(copied) as client:
        page = client.get(f"/archive/{latest.id}")
        assert page.status_code == 404
        tree = LexborHTMLParser(page.text)
        said = " ".join(tree.css_first("#unchanged").text().split())
        assert said == (
            f"The capture of {crawled.url}/same fetched {latest.when} was unchanged: its content is that of the "
            f"capture fetched {first.when}, below."
        )
        where = tree.css_first(".archive-where").text()
        assert "node-02" in where and elsewhere in where
        links = {a.attributes["href"] for a in tree.css(".archive-message a")}
        assert links == {f"/page/{latest.id}", f"/page/{first.id}"}


def test_no_earlier_full_capture_is_said_plainly(crawled: Crawled, tmp_path: Path) -> None:
    copied = Path(shutil.copytree(crawled.out, tmp_path / "crawl"))
    first, _again, latest = crawled.captures("/same")
    update(copied, "DELETE FROM captures WHERE id = ?", first.id)  # as if that capture had never been kept
    with client_for(copied) as client:
        page = client.get(f"/archive/{latest.id}")
        assert page.status_code == 404
        tree = LexborHTMLParser(page.text)
        assert tree.css_first("h1").text() == "No full copy of this unchanged capture"
        assert "the server answered 304 Not Modified, and this crawl has no earlier full capture" in page.text
        detail = LexborHTMLParser(client.get(f"/page/{latest.id}").text)
        assert "no earlier full capture of this URL" in detail.css_first("#unchanged").text()
        assert client.get(f"/api/page/{latest.id}").json()["repeats"] is None
