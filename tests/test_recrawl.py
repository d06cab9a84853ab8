"""Re-crawls of a site whose pages change between runs: conditional requests, revisit records, history."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from email.utils import formatdate
from pathlib import Path

from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from tests.crawls import check_warcs, fast_config
from tests.test_cli import one_line_error, webtrawl
from webtrawl import Crawler
from webtrawl.config import CrawlConfig, PolitenessConfig, RevisitConfig
from webtrawl.models import Previous
from webtrawl.revisits import next_interval
from webtrawl.stats import CrawlReport

REVISIT = RevisitConfig(recrawl=True, min_interval=0.2, max_interval=100)


@dataclass
class Page:
    body: str
    etag: str | None = None
    modified: float | None = None
    status: int = 200


class ChangingSite:
    """Pages whose content the test changes between runs; validators honoured as a real server does."""

    def __init__(self) -> None:
        self.pages: dict[str, Page] = {}
        self.requests: list[tuple[str, dict[str, str], int]] = []
        self.url = ""

    def set(self, path: str, text: str, *, links: tuple[str, ...] = (), etag: str | None = None,
            modified: float | None = None, status: int = 200, title: str | None = None) -> None:  # fmt: skip
        anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
        body = f"<!doctype html><title>{title or path}</title><p>{text}</p>{anchors}"
        self.pages[path] = Page(body, etag, modified, status)

    async def handle(self, request: web.Request) -> web.Response:
        page = self.pages.get(request.path)
        status = 404 if page is None else page.status
        headers = {}
        if page is not None and status == 200:
            if page.etag:
                headers["ETag"] = page.etag
            if page.modified:
                headers["Last-Modified"] = formatdate(page.modified, usegmt=True)
            if (page.etag and request.headers.get("If-None-Match") == page.etag) or (
                not page.etag and page.modified and request.headers.get("If-Modified-Since") == headers["Last-Modified"]
            ):
                status = 304
        self.requests.append((request.path, dict(request.headers), status))
        if status == 304:
            return web.Response(status=304, headers=headers)
        if page is None or status != 200:
            return web.Response(status=status, text="gone")
        return web.Response(text=page.body, content_type="text/html", headers=headers)

    def last_run(self, since: int) -> dict[str, tuple[dict[str, str], int]]:
        return {
            path: (headers, status)
            for path, headers, status in self.requests[since:]
            if path not in ("/robots.txt", "/sitemap.xml")
        }


@asynccontextmanager
async def serving(site: ChangingSite) -> AsyncIterator[ChangingSite]:
    app = web.Application()
    app.router.add_get("/{tail:.*}", site.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        site.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        yield site
    finally:
        await runner.cleanup()


async def crawl(config: CrawlConfig) -> CrawlReport:
    report = await Crawler(config).run()
    assert report.outcome == "finished"
    return report


def rows(out: Path, sql: str, *args: object) -> list[tuple]:
    """The rows `sql` gives in the crawl database in directory `out` (or in the database `out` names)."""
    conn = sqlite3.connect(out if out.suffix == ".db" else out / "crawl.db")
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def warc_types(out: Path) -> dict[str, list[tuple[str, str | None]]]:
    """Target path → (record type, revisit profile) of its response-like records, in order."""
    found: dict[str, list[tuple[str, str | None]]] = {}
    for file in sorted((out / "warc").glob("*.warc.gz")):
        with file.open("rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type in ("response", "revisit"):
                    path = "/" + record.rec_headers.get_header("WARC-Target-URI").split("/", 3)[3]
                    profile = record.rec_headers.get_header("WARC-Profile")
                    found.setdefault(path, []).append((record.rec_type, profile and profile.rsplit("/", 1)[1]))
    return found


async def test_a_recrawl_asks_conditionally_stores_revisits_and_keeps_history(tmp_path: Path) -> None:
    site = ChangingSite()
    site.set("/", "home", links=("/same", "/plain", "/changes", "/gone", "/withdrawn"), etag='"home-1"')
    site.set("/same", "never changes", etag='"same-1"')
    site.set("/plain", "no validators and no change")
    site.set("/changes", "first version aardvark", modified=1_700_000_000)
    site.set("/gone", "about to disappear", etag='"gone-1"')
    site.set("/withdrawn", "to be withdrawn for good", modified=1_700_000_000)
    async with serving(site):
        config = replace(fast_config(site.url + "/", tmp_path), revisit=replace(REVISIT, recrawl=False))
        await crawl(config)
        await asyncio.sleep(0.25)  # every page is due again

        site.set("/", "home", links=("/same", "/plain", "/changes", "/gone", "/withdrawn", "/new"), etag='"home-2"')
        site.set("/changes", "second version zebra", modified=1_700_000_100)
        site.pages["/gone"].status = 404
        site.pages["/withdrawn"].status = 410
        site.set("/new", "a page added since", etag='"new-1"')
        before = len(site.requests)
        report = await crawl(replace(config, revisit=REVISIT))
        second = site.last_run(before)

    assert second["/same"] == (second["/same"][0], 304) and second["/same"][0]["If-None-Match"] == '"same-1"'
    assert second["/changes"][0]["If-Modified-Since"] == "Tue, 14 Nov 2023 22:13:20 GMT"
    assert "If-None-Match" not in second["/plain"][0] and "If-Modified-Since" not in second["/plain"][0]
    assert {path: status for path, (_h, status) in second.items()} == {
        "/": 200, "/same": 304, "/plain": 200, "/changes": 200, "/gone": 404, "/withdrawn": 410, "/new": 200,
    }  # fmt: skip
    assert report.statuses[304] == 1

    records = warc_types(tmp_path)
    assert records["/same"] == [("response", None), ("revisit", "server-not-modified")]
    assert records["/plain"] == [("response", None), ("revisit", "identical-payload-digest")]
    assert records["/changes"] == [("response", None), ("response", None)]
    assert records["/new"] == [("response", None)]
    check_warcs(tmp_path)

    history = rows(tmp_path, "SELECT url, status, unchanged, payload_digest FROM captures ORDER BY id")
    by_path: dict[str, list[tuple[int, int, str]]] = {}
    for url, status, unchanged, digest in history:
        by_path.setdefault("/" + url.split("/", 3)[3], []).append((status, unchanged, digest))
    assert [(s, u) for s, u, _d in by_path["/same"]] == [(200, 0), (304, 1)]
    assert by_path["/same"][0][2] == by_path["/same"][1][2]  # the revisit keeps the content's digest
    assert [(s, u) for s, u, _d in by_path["/changes"]] == [(200, 0), (200, 0)]
    assert by_path["/changes"][0][2] != by_path["/changes"][1][2]
    for path, status in (("/gone", 404), ("/withdrawn", 410)):
        assert [s for s, _u, _d in by_path[path]] == [200, status]  # the removal is recorded, the history kept
        ((state, reason),) = rows(tmp_path, "SELECT state, reason FROM urls WHERE url = ?", site.url + path)
        assert (state, reason) == (3, f"HTTP {status}")
    # search finds the current text of a changed page, not the old one; unchanged pages stay searchable
    assert search(tmp_path, "zebra") == [site.url + "/changes"]
    assert search(tmp_path, "aardvark") == []
    assert search(tmp_path, "never") == [site.url + "/same"]


def search(out: Path, word: str) -> list[str]:
    from webtrawl.store.index import index_captures

    conn = sqlite3.connect(out / "crawl.db")
    try:
        while index_captures(conn):
            pass
        return [
            url
            for (url,) in conn.execute(
                "SELECT c.url FROM captures_fts f JOIN captures c ON c.id = f.rowid WHERE captures_fts MATCH ?",
                (word,),
            )
        ]
    finally:
        conn.close()


async def test_intervals_shorten_for_pages_that_change_and_lengthen_for_those_that_do_not(tmp_path: Path) -> None:
    site = ChangingSite()
    site.set("/", "home", links=("/flux", "/still"), etag='"home"')
    site.set("/still", "the same every time", etag='"still"')
    revisit = RevisitConfig(recrawl=True, min_interval=0.1, max_interval=100)
    intervals: list[dict[str, float]] = []
    async with serving(site):
        config = replace(fast_config(site.url + "/", tmp_path), revisit=revisit)
        for run in range(4):
            site.set("/flux", f"version {run}")
            await crawl(config)
            found = rows(
                tmp_path, "SELECT url, interval, next_due FROM urls WHERE url LIKE '%/flux' OR url LIKE '%/still'"
            )
            intervals.append({url.rsplit("/", 1)[1]: interval for url, interval, _due in found})
            await asyncio.sleep(0.5)  # longer than any interval reached: everything is due again
    assert [i["flux"] for i in intervals] == [0.1, 0.1, 0.1, 0.1]  # changed every time: the shortest
    assert [round(i["still"], 3) for i in intervals] == [0.1, 0.14, 0.196, 0.274]  # ×1.4 per unchanged visit


async def test_every_revisit_refers_to_the_capture_that_holds_the_content(tmp_path: Path) -> None:
    site = ChangingSite()
    site.set("/", "home", links=("/same", "/plain"), etag='"home"')
    site.set("/same", "never changes", etag='"same"')
    site.set("/plain", "no validators and no change")
    async with serving(site):
        config = replace(fast_config(site.url + "/", tmp_path), revisit=REVISIT)
        for _run in range(3):
            await crawl(config)
            await asyncio.sleep(0.5)  # every page is due again (an unchanged one's interval grows to 0.28 s)
    for path in ("/same", "/plain"):
        records = []
        for file in sorted((tmp_path / "warc").glob("*.warc.gz")):
            with file.open("rb") as stream:
                records += [
                    (r.rec_type, r.rec_headers.get_header("WARC-Date"), r.rec_headers.get_header("WARC-Refers-To-Date"))
                    for r in ArchiveIterator(stream)
                    if r.rec_type in ("response", "revisit")
                    and r.rec_headers.get_header("WARC-Target-URI").endswith(path)
                ]
        [(kind, content_date, _none), *revisits] = records
        assert kind == "response" and len(revisits) == 2, path
        assert [(k, refers) for k, _date, refers in revisits] == [("revisit", content_date)] * 2, path


def test_an_interval_stays_within_its_bounds() -> None:
    config = RevisitConfig(min_interval=60, max_interval=3600)
    assert next_interval(config, None, changed=True) == 60
    assert next_interval(config, Previous(fetched_at=0, interval=3000), changed=False) == 3600
    assert next_interval(config, Previous(fetched_at=0, interval=70), changed=True) == 60
    assert next_interval(config, Previous(fetched_at=0, interval=1000), changed=True) == 800


async def test_importance_order_fetches_a_page_many_link_to_before_its_equally_deep_siblings(tmp_path: Path) -> None:
    site = ChangingSite()
    sections = tuple(f"/s{i}" for i in range(8))
    site.set("/", "home", links=sections)
    for i, section in enumerate(sections):
        site.set(section, "a section", links=(f"/leaf{i}", "/hub"))  # the hub comes second on every page
        site.set(f"/leaf{i}", "linked once")
    site.set("/hub", "linked from every section")
    orders = {}
    async with serving(site):
        for order in ("bfs", "importance"):
            start = len(site.requests)
            config = replace(
                fast_config(site.url + "/", tmp_path / order),
                politeness=PolitenessConfig(per_host=1, delay=0),
                concurrency=1,
                order=order,
            )
            await crawl(config)
            orders[order] = [path for path, _h, _s in site.requests[start:] if path in ("/hub", "/leaf0", "/leaf1")]
    assert orders["bfs"][0] == "/leaf0"  # arrival order: the first section's leaf was found first
    assert orders["importance"][0] == "/hub"  # eight in-links: more importance than any leaf's one


async def test_exact_and_near_duplicates_are_flagged_and_near_ones_not_followed(tmp_path: Path) -> None:
    site = ChangingSite()
    words = " ".join(f"word{i}" for i in range(3000))
    site.set("/", "home", links=("/a", "/copy", "/near", "/other"))
    site.set("/a", words, links=("/from-a",))
    site.set("/copy", words, links=("/from-a",))
    site.pages["/copy"].body = site.pages["/a"].body  # the same bytes under another URL
    site.set("/near", words.replace("word1500", "changed"), links=("/from-near",))
    site.set("/other", " ".join(f"other{i}" for i in range(3000)))
    site.set("/from-a", "a")
    site.set("/from-near", "reached only through the near-duplicate")
    async with serving(site):
        config = replace(fast_config(site.url + "/", tmp_path), concurrency=1, skip_near_duplicates=True)
        config = replace(config, politeness=PolitenessConfig(per_host=1, delay=0))
        await crawl(config)
    found = {
        "/" + url.split("/", 3)[3]: (dup, near)
        for url, dup, near in rows(tmp_path, "SELECT url, duplicate_of, near_duplicate_of FROM captures")
    }
    (a_fp,) = rows(tmp_path, "SELECT fp FROM urls WHERE url = ?", site.url + "/a")[0]
    assert found["/copy"][0] == a_fp and found["/a"] == (None, None)
    (copy_fp,) = rows(tmp_path, "SELECT fp FROM urls WHERE url = ?", site.url + "/copy")[0]
    assert found["/near"][0] is None and found["/near"][1] in (a_fp, copy_fp)  # a twin of either
    assert found["/other"] == (None, None)
    assert "/from-near" not in found  # the near-duplicate's links were not followed


async def test_status_shows_what_is_due_and_bad_schedule_flags_get_one_line(tmp_path: Path) -> None:
    site = ChangingSite()
    site.set("/", "home", links=("/a",))
    site.set("/a", "a page")
    async with serving(site):
        code, _out, err = await webtrawl("crawl", site.url + "/", "--out", str(tmp_path), "-q", "--min-interval", "2h")
        assert code == 0, err
    code, shown, err = await webtrawl("status", str(tmp_path))
    assert code == 0, err
    assert re.search(r"revisits +0 due now, 0 within an hour, 2 within a day, 0 later; next at ", shown), shown
    for flags, fragment in [
        (["--every", "6h"], "--every repeats re-crawls: give --recrawl with it"),
        (["--recrawl", "--min-interval", "2d", "--max-interval", "1d"], "must not exceed max-interval"),
    ]:
        code, _out, err = await webtrawl("crawl", "http://127.0.0.1:9/", "--out", str(tmp_path / "x"), *flags)
        assert code == 2
        one_line_error(err, fragment)
    code, _out, err = await webtrawl("crawl", "http://127.0.0.1:9/", "--out", str(tmp_path), "--every", "soon")
    assert code == 2 and "'soon' is not a duration" in err
