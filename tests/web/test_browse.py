"""The browsing views over a real crawl: the generated test site plus a small hostile site of script injections.

One crawl serves the whole module (it only reads the crawl directory afterwards); the app runs in process.
"""

from __future__ import annotations

import asyncio
import html
import re
import sqlite3
import warnings
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from aiohttp import web
from starlette.exceptions import StarletteDeprecationWarning

from tests.crawls import fast_config
from tests.sites import Site as GeneratedSite
from tests.sites import SiteServer
from webtrawl import Crawler
from webtrawl.models import Capture, WarcLocation
from webtrawl.store.browse import Filters, QueryError
from webtrawl.store.crawls import open_crawl
from webtrawl.store.db import connect
from webtrawl.store.index import capture_row, drop_counts, failure_counts, insert_captures
from webtrawl.store.listing import list_pages_of
from webtrawl.store.search import fts_query, search, segments
from webtrawl.store.shards import Source, Sources
from webtrawl.web.app import create_app
from webtrawl.web.site import Site

with warnings.catch_warnings():
    # The test client prefers httpx2 to httpx (installed): a test tool's deprecation, not ours.
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

EVIL_TITLE = "<script>window.pwned=1</script> Evil home"
EVIL_TEXT = "<b>bold</b> xylophonic \ue000marked\ue001 words"
QUOTE_PATH = "/it's'onmouseover='alert(1)'"
SCRIPT_PATH = "/%3Cscript%3Ealert(2)%3C/script%3E"


def _evil_page(title: str, text: str, *links: str) -> web.Response:
    items = "".join(f'<li><a href="{html.escape(href)}">{html.escape(href)}</a></li>' for href in links)
    body = f"<!doctype html><title>{html.escape(title)}</title><p>{html.escape(text)}</p><ul>{items}</ul>"
    return web.Response(text=body, content_type="text/html")


async def _evil(request: web.Request) -> web.StreamResponse:
    """A site whose title, text and URLs carry markup: every view must show them as text."""
    if request.raw_path == "/":
        return _evil_page(EVIL_TITLE, EVIL_TEXT, QUOTE_PATH, SCRIPT_PATH)
    if request.raw_path == QUOTE_PATH:
        return _evil_page("<img src=x onerror=alert(3)> quote", "a page behind a quoted URL", "/")
    if request.raw_path == SCRIPT_PATH:
        return _evil_page("script path", "a page behind a script URL", "/")
    raise web.HTTPNotFound()


@dataclass(frozen=True)
class Crawled:
    out: Path
    site: GeneratedSite
    evil_origin: str


async def crawl_with_evil_site(
    out: Path,
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]] | None = None,
    extra: tuple[str, ...] = (),
) -> Crawled:
    """Crawl the generated site and the hostile one (served by `handler`, `_evil` by default), seeded with
    its home page and the `extra` paths."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler or _evil)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        evil = f"http://127.0.0.1:{runner.addresses[0][1]}"
        async with SiteServer() as server:
            config = fast_config(server.url, out, max_depth=server.site.deepest)
            seeds = (server.url, evil + "/", *(evil + path for path in extra))
            report = await Crawler(replace(config, seeds=seeds)).run()
            assert report.outcome == "finished"
            return Crawled(out, server.site, evil)
    finally:
        await runner.cleanup()


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    return asyncio.run(crawl_with_evil_site(tmp_path_factory.mktemp("browse")))


@pytest.fixture(scope="module")
def client(crawled: Crawled) -> Iterator[TestClient]:
    with TestClient(create_app(Site(crawled.out))) as client:
        yield client


@pytest.fixture(scope="module")
def db(crawled: Crawled) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{crawled.out / 'crawl.db'}?mode=ro", uri=True)
    yield conn
    conn.close()


def walk(client: TestClient, url: str) -> list[dict]:
    """Every row of a paged /api list, following its next_url."""
    rows: list[dict] = []
    next_url: str | None = url
    while next_url:
        page = client.get(next_url)
        assert page.status_code == 200, page.text
        rows += page.json()["rows"]
        next_url = page.json()["next_url"]
    return rows


def _ids(db: sqlite3.Connection, where: str = "1", *params: object) -> list[int]:
    return sorted(
        i
        for (i,) in db.execute(
            f"SELECT c.id FROM captures c LEFT JOIN urls u ON u.fp = c.fp LEFT JOIN hosts h ON h.id = u.host_id "
            f"WHERE {where}",
            params,
        )
    )


# -- overview ----------------------------------------------------------------------------------------


def test_overview_counts_match_the_store(client: TestClient, db: sqlite3.Connection) -> None:
    got = client.get("/api/overview").json()
    states = dict(db.execute("SELECT state, COUNT(*) FROM urls GROUP BY state").fetchall())
    assert [got["waiting"], got["running"], got["done"], got["failed"]] == [states.get(s, 0) for s in range(4)]
    assert got["done"] > 300 and got["failed"] > 0
    assert (got["captures"], got["bytes"]) == db.execute("SELECT COUNT(*), SUM(size) FROM captures").fetchone()
    statuses = dict(db.execute("SELECT IFNULL(status, 0), COUNT(*) FROM captures GROUP BY 1").fetchall())
    assert {int(k): v for k, v in got["statuses"].items()} == statuses
    assert got["failures"] == failure_counts(db, 1) and got["failures"]
    assert got["drops"] == drop_counts(db, 1) and got["drops"]
    assert got["waiting_by_depth"] == {}  # finished
    assert got["state"] == "finished"
    assert got["elapsed"] > 0 and got["pages_per_second"] > 0

    page = client.get("/").text
    for name in ("done", "waiting", "running", "failed"):
        assert re.search(rf'id="{name}">{got[name]:,}<', page), name
    assert 'id="pages-per-second"' in page
    assert '<section id="live"></section>' in page and '<div id="controls"></div>' in page
    for reason in got["failures"]:
        assert f">{reason}</a></td>" in page


# -- pages -------------------------------------------------------------------------------------------


SORT_KEYS = {
    "fetched": lambda r: (r["fetched_at"], r["id"]),
    "url": lambda r: (r["url"], r["id"]),
    "size": lambda r: (r["size"], r["id"]),
    "status": lambda r: (r["status"] or 0, r["fetched_at"], r["id"]),
}


@pytest.mark.parametrize("sort", list(SORT_KEYS))
@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_pagination_walks_every_capture_once_in_order(
    client: TestClient, db: sqlite3.Connection, sort: str, direction: str
) -> None:
    rows = walk(client, f"/api/pages?sort={sort}&dir={direction}&limit=13")
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    assert sorted(ids) == _ids(db)
    keys = [SORT_KEYS[sort](r) for r in rows]
    assert keys == sorted(keys, reverse=direction == "desc")


def test_html_pages_paginate_through_next_links(client: TestClient, db: sqlite3.Connection) -> None:
    seen: list[int] = []
    url: str | None = "/pages?limit=40"
    while url:
        page = client.get(url).text
        seen += [int(i) for i in re.findall(r'href="/page/(\d+)"', page)]
        found = re.search(r'id="next" rel="next" href="([^"]+)"', page)
        url = found and found[1].replace("&amp;", "&")
    assert sorted(seen) == _ids(db) and len(seen) == len(set(seen))


@pytest.mark.parametrize(
    ("query", "where"),
    [
        ("status=200", "c.status = 200"),
        ("status=4xx", "c.status BETWEEN 400 AND 499"),
        ("status=500", "c.status = 500"),
        ("status=none", "c.status IS NULL"),
        ("type=text/plain", "c.content_type = 'text/plain'"),
        ("depth=2", "u.depth = 2"),
        ("status=200&depth=1&type=text/html", "c.status = 200 AND u.depth = 1 AND c.content_type = 'text/html'"),
    ],
)
def test_filters(client: TestClient, db: sqlite3.Connection, query: str, where: str) -> None:
    for sort in ("fetched", "size"):
        assert sorted(r["id"] for r in walk(client, f"/api/pages?{query}&sort={sort}&limit=50")) == _ids(db, where)


def test_host_filter(client: TestClient, db: sqlite3.Connection, crawled: Crawled) -> None:
    host = crawled.evil_origin.removeprefix("http://")
    rows = walk(client, f"/api/pages?host={host}")
    assert sorted(r["id"] for r in rows) == _ids(db, "h.host = ?", crawled.evil_origin)
    assert walk(client, f"/api/pages?host={crawled.evil_origin}/") == rows
    assert len(rows) == 3 and all(r["url"].startswith(crawled.evil_origin) for r in rows)
    assert walk(client, "/api/pages?host=nowhere.example") == []


@pytest.mark.parametrize(
    "query", ["status=abc", "status=6xx", "depth=x", "sort=colour", "after=!!!", "after=WzEsMl0&sort=url"]
)
def test_bad_filters_get_a_message(client: TestClient, query: str) -> None:
    page = client.get(f"/pages?{query}")
    assert page.status_code == 200
    assert 'id="message"' in page.text
    api = client.get(f"/api/pages?{query}")
    assert api.status_code in (400, 422)


@pytest.mark.parametrize("sort", ["fetched", "status", "url"])
def test_a_filtered_page_out_of_time_reads_on_from_where_it_stopped(
    crawled: Crawled, db: sqlite3.Connection, sort: str
) -> None:
    conn = connect(crawled.out / "crawl.db", readonly=True)
    sources = Sources.of(Source(0, conn, 1, crawled.out))
    try:
        for filters, where, params in [
            (Filters(status="4xx"), "c.status BETWEEN 400 AND 499", ()),
            (Filters(host=crawled.evil_origin), "h.host = ?", (crawled.evil_origin,)),
        ]:
            seen, partial, after = [], 0, None
            while True:  # no time at all: each page reads one window of 7 captures
                page = list_pages_of(sources, filters, sort=sort, after=after, limit=3, window=7, budget=0)  # type: ignore[arg-type]
                seen += [row.id for row in page.rows]
                partial += page.partial
                if page.next is None:
                    break
                after = page.next
            assert sorted(seen) == _ids(db, where, *params) and len(seen) == len(set(seen))
            assert partial > 10
    finally:
        conn.close()


@pytest.mark.parametrize(("sort", "descending"), [("fetched", False), ("status", True), ("url", False)])
@pytest.mark.parametrize("filtered", [False, True])
def test_previous_cursors_walk_back_through_the_same_pages(
    crawled: Crawled, sort: str, descending: bool, filtered: bool
) -> None:
    conn = connect(crawled.out / "crawl.db", readonly=True)
    filters = Filters(status="200", depth=2) if filtered else Filters()
    sources = Sources.of(Source(0, conn, 1, crawled.out))
    try:
        forward, after = [], None
        while True:
            page = list_pages_of(sources, filters, sort=sort, descending=descending, after=after, limit=7)  # type: ignore[arg-type]
            forward.append([row.id for row in page.rows])
            if page.next is None:
                break
            after = page.next
        assert page.previous is not None and len(forward) > 3
        backward, before = [], page.previous
        while before is not None:
            page = list_pages_of(sources, filters, sort=sort, descending=descending, before=before, limit=7)  # type: ignore[arg-type]
            backward.append([row.id for row in page.rows])
            before = page.previous
        again = list_pages_of(sources, filters, sort=sort, descending=descending, after=page.next, limit=7)  # type: ignore[arg-type]
    finally:
        conn.close()
    assert backward == forward[-2::-1]  # every page before the last, each as it was shown going forwards
    assert [row.id for row in again.rows] == forward[1]


def test_a_search_out_of_time_reads_on_from_where_it_stopped(crawled: Crawled, db: sqlite3.Connection) -> None:
    conn = connect(crawled.out / "crawl.db", readonly=True)
    try:
        seen, partial, after = [], 0, None
        while True:
            result = search(conn, 1, "page", Filters(status="200", depth=2), after=after, limit=3, budget=0)
            seen += [hit.page.id for hit in result.hits]
            partial += result.partial
            if result.next is None:
                break
            after = result.next
    finally:
        conn.close()
    expected = (
        "c.status = 200 AND u.depth = 2 AND c.id IN (SELECT rowid FROM captures_fts WHERE captures_fts MATCH 'page')"
    )
    assert sorted(seen) == _ids(db, expected) and len(seen) == len(set(seen)) and seen
    assert partial


def test_pages_rows_link_original_archive_and_detail(client: TestClient, crawled: Crawled) -> None:
    page = client.get(f"/pages?host={crawled.site.host}&depth=0").text
    (row_id,) = set(re.findall(r'href="/page/(\d+)"', page))
    assert f'href="/archive/{row_id}"' in page
    assert f'<a href="{crawled.site.origin}/" rel="noreferrer noopener" target="_blank">' in page


# -- search ------------------------------------------------------------------------------------------


def test_search_finds_the_one_page_with_a_word(client: TestClient, crawled: Crawled) -> None:
    path, info = next((p, i) for p, i in crawled.site.pages.items() if i.depth is not None and p != "/")
    got = client.get("/api/search", params={"q": info.word}).json()
    assert got["error"] is None
    assert [hit["page"]["url"] for hit in got["hits"]] == [crawled.site.url(path)]
    marked = [s["text"] for s in got["hits"][0]["snippet"] + got["hits"][0]["title"] if s["match"]]
    assert marked and all(m.lower() == info.word.lower() for m in marked)

    page = client.get("/search", params={"q": info.word}).text
    assert f"<mark>{info.word}</mark>" in page
    assert page.count('class="browse-title"') == 1


def test_search_paginates_and_filters(client: TestClient, db: sqlite3.Connection, crawled: Crawled) -> None:
    expected = _ids(db, "c.id IN (SELECT rowid FROM captures_fts WHERE captures_fts MATCH 'page')")
    assert len(expected) > 30
    hits, url = [], "/api/search?q=page&limit=7"
    while url:
        got = client.get(url).json()
        hits += got["hits"]
        url = got["next_url"]
    assert sorted(h["page"]["id"] for h in hits) == expected
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores)
    host = crawled.evil_origin.removeprefix("http://")
    filtered = client.get("/api/search", params={"q": "page", "host": host}).json()["hits"]
    assert {h["page"]["url"] for h in filtered} == {crawled.evil_origin + QUOTE_PATH, crawled.evil_origin + SCRIPT_PATH}


@pytest.mark.parametrize("q", ['"unbalanced', "AND", "*", "foo AND", "(foo", "NOT", "OR bar", "a NOT", '"x" * ""'])
def test_malformed_queries_get_a_friendly_message(client: TestClient, q: str) -> None:
    page = client.get("/search", params={"q": q})
    assert page.status_code == 200
    assert re.search(r'<p class="error" id="message">[^<]+</p>', page.text)
    api = client.get("/api/search", params={"q": q})
    assert api.status_code == 200 and api.json()["error"] and api.json()["hits"] == []


def test_words_on_too_many_pages_list_them_in_capture_order(crawled: Crawled, db: sqlite3.Connection) -> None:
    conn = connect(crawled.out / "crawl.db", readonly=True)
    try:
        seen, after = [], None
        while True:
            result = search(conn, 1, "page", Filters(), after=after, limit=7, rank_at_most=10)
            assert not result.ranked and all(hit.score is None for hit in result.hits)
            seen += [hit.page.id for hit in result.hits]
            if result.next is None:
                break
            after = result.next
        assert search(conn, 1, "page", Filters(), rank_at_most=10_000).ranked
    finally:
        conn.close()
    assert seen == _ids(db, "c.id IN (SELECT rowid FROM captures_fts WHERE captures_fts MATCH 'page')")


def test_a_search_with_a_bad_filter_gets_a_message(client: TestClient) -> None:
    assert 'id="message"' in client.get("/search", params={"q": "page", "depth": "deep"}).text
    assert 'id="message"' in client.get("/search", params={"q": "page", "after": "WyJ4Il0"}).text
    got = client.get("/api/search", params={"q": "page", "status": "teapot"})
    assert got.status_code == 200 and "teapot" in got.json()["error"] and got.json()["hits"] == []


def test_words_are_quoted_for_fts() -> None:
    assert fts_query("crawl AND web") == '"crawl" AND "web"'
    assert fts_query('"a phrase" pre* OR (NEAR x) and') == '"a phrase" "pre"* OR ( "NEAR" "x" ) "and"'
    assert fts_query('title:x "quoted"* -y') == '"title:x" "quoted"* "-y"'
    assert fts_query("  ") == ""
    for bad in ('"open', "*", "a **"):
        with pytest.raises(QueryError):
            fts_query(bad)


def test_snippet_marks_out_of_turn_are_dropped() -> None:
    marks = o, c = "<<", ">>"
    assert [(s.text, s.match) for s in segments(f"a {o}b{c} {c}c{o}{o}d{c}", marks)] == [
        ("a ", False),
        ("b", True),
        (" c", False),
        ("d", True),
    ]
    assert [(s.text, s.match) for s in segments(f"{o}open", marks)] == [("open", True)]


# -- escaping ----------------------------------------------------------------------------------------


def test_crawled_markup_is_escaped_everywhere(client: TestClient, db: sqlite3.Connection, crawled: Crawled) -> None:
    host = crawled.evil_origin.removeprefix("http://")
    (home,) = _ids(db, "c.url = ?", crawled.evil_origin + "/")
    (quoted,) = _ids(db, "c.url = ?", crawled.evil_origin + QUOTE_PATH)
    views = [
        "/",
        f"/pages?host={host}",
        "/pages?sort=url&dir=desc&limit=500",
        "/search?q=pwned",
        "/search?q=xylophonic",
        "/search?q=onmouseover",
        f"/page/{home}",
        f"/page/{quoted}",
    ]
    for view in views:
        page = client.get(view).text
        assert "<script>" not in page, view
        assert "<img" not in page and "<b>" not in page, view
        assert "'onmouseover" not in page, view  # no quote of a crawled URL closes an attribute
    assert "&lt;script&gt;window.<mark>pwned</mark>=1&lt;/script&gt; Evil home" in client.get("/search?q=pwned").text
    snippet = client.get("/search?q=xylophonic").text
    assert "&lt;b&gt;bold&lt;/b&gt; <mark>xylophonic</mark> \ue000marked\ue001 words" in snippet  # no forged marks
    detail = client.get(f"/page/{quoted}").text
    assert "&lt;img src=x onerror=alert(3)&gt; quote" in detail
    assert "&#39;onmouseover=&#39;alert(1)&#39;" in detail


# -- detail ------------------------------------------------------------------------------------------


def test_detail_shows_links_both_ways(client: TestClient, db: sqlite3.Connection, crawled: Crawled) -> None:
    (home,) = _ids(db, "c.url = ?", crawled.site.url("/"))
    got = client.get(f"/api/page/{home}").json()
    fp = db.execute("SELECT fp FROM captures WHERE id = ?", (home,)).fetchone()[0]
    out = {
        u for (u,) in db.execute("SELECT u.url FROM links l JOIN urls u ON u.fp = l.dst_fp WHERE l.src_fp = ?", (fp,))
    }
    assert {link["url"] for link in got["out_links"]} == out and got["out_total"] == len(out)
    inbound = {
        u for (u,) in db.execute("SELECT u.url FROM links l JOIN urls u ON u.fp = l.src_fp WHERE l.dst_fp = ?", (fp,))
    }
    assert {link["url"] for link in got["in_links"]} == inbound and inbound
    assert got["page"]["depth"] == 0 and got["kind"] == "seed" and got["state"] == "done"
    assert got["warc_here"] and got["warc_file"] and got["warc_offset"] is not None
    assert got["ttfb"] is not None and got["elapsed"] is not None
    assert any(name.lower() == "content-type" for name, _ in got["response_headers"])
    assert any(name.lower() == "user-agent" for name, _ in got["request_headers"])

    child = next(link for link in got["out_links"] if link["detail"])
    child_capture = int(child["detail"].rsplit("/", 1)[1])
    assert db.execute("SELECT url FROM captures WHERE id = ?", (child_capture,)).fetchone()[0] == child["url"]
    page = client.get(f"/page/{home}").text
    assert f'<a href="/page/{child_capture}">' in page
    assert f'href="/archive/{home}"' in page
    child_page = client.get(child["detail"]).text
    assert f'<a href="/page/{home}">{crawled.site.url("/")}</a>' in child_page  # an in-link back home


def test_detail_of_a_redirect_and_a_failure(client: TestClient, db: sqlite3.Connection) -> None:
    redirect_id, location = db.execute(
        "SELECT id, location FROM captures WHERE location IS NOT NULL ORDER BY id LIMIT 1"
    ).fetchone()
    got = client.get(f"/api/page/{redirect_id}").json()
    assert got["location"]["url"] == location
    assert location in client.get(f"/page/{redirect_id}").text
    failed_id, reason = db.execute(
        "SELECT c.id, u.reason FROM captures c JOIN urls u ON u.fp = c.fp WHERE u.state = 3 ORDER BY c.id LIMIT 1"
    ).fetchone()
    assert client.get(f"/api/page/{failed_id}").json()["reason"] == reason
    assert reason in client.get(f"/page/{failed_id}").text


def test_unknown_capture_is_404(client: TestClient) -> None:
    assert client.get("/api/page/999999").status_code == 404
    page = client.get("/page/999999")
    assert page.status_code == 404 and "no capture 999999" in page.text


def test_a_warc_on_another_node_says_where_it_is(tmp_path: Path) -> None:
    conn = connect(tmp_path / "crawl.db")
    crawl_id, _ = open_crawl(conn, "default", {})
    capture = Capture(
        fp=1,
        url="http://a.example/",
        fetched_at=1.7e9,
        status=200,
        content_type="text/html",
        size=10,
        warc=WarcLocation(file="default-node-02-20261130000000-00001.warc.gz", offset=1234, length=99),
    )
    insert_captures(conn, crawl_id, [capture_row(capture, node="node-02", ingest_key="p1:1-0")])
    conn.close()
    with TestClient(create_app(Site(tmp_path))) as client:
        got = client.get("/api/page/1").json()
        assert (got["node"], got["warc_here"], got["warc_offset"]) == ("node-02", False, 1234)
        page = client.get("/page/1").text
        assert "on node node-02's disk" in page and "default-node-02-20261130000000-00001.warc.gz" in page
        assert "offset 1234" in page
        assert client.get("/api/overview").json()["captures"] == 1 and client.get("/").status_code == 200
        assert [row["id"] for row in client.get("/api/pages?status=404").json()["rows"]] == []


# -- API description ---------------------------------------------------------------------------------


def test_openapi_describes_the_json_api(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    for path in ("/api/overview", "/api/pages", "/api/search", "/api/page/{capture_id}"):
        assert "get" in spec["paths"][path], path
    schemas = spec["components"]["schemas"]
    assert {"OverviewOut", "PagesOut", "SearchOut", "DetailOut"} <= set(schemas)
    assert "detail" in schemas["PageOut"]["properties"] and "archive" in schemas["PageOut"]["properties"]
    params = {p["name"] for p in spec["paths"]["/api/pages"]["get"]["parameters"]}
    assert {"status", "type", "host", "depth", "sort", "dir", "after", "limit"} <= params
    assert "/pages" not in spec["paths"]  # the HTML views are not part of the API
