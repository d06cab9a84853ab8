"""What the lists of the dashboard say and link to, on a real crawl: failed and dropped URLs with why (from
the overview's counts), how many each list and search holds, a page's links a page at a time.

One crawl (the generated site and the hostile one of `test_browse`) serves the module; the app runs in process.
"""

from __future__ import annotations

import asyncio
import html
import re
import sqlite3
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest

from tests.web.test_browse import Crawled, TestClient, _ids, crawl_with_evil_site, walk
from webtrawl.web.app import create_app
from webtrawl.web.site import Site


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Crawled:
    return asyncio.run(crawl_with_evil_site(tmp_path_factory.mktemp("lists")))


@pytest.fixture(scope="module")
def client(crawled: Crawled) -> Iterator[TestClient]:
    with TestClient(create_app(Site(crawled.out))) as client:
        yield client


@pytest.fixture(scope="module")
def db(crawled: Crawled) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{crawled.out / 'crawl.db'}?mode=ro", uri=True)
    yield conn
    conn.close()


def _hrefs(page: str) -> list[str]:
    return [html.unescape(href) for href in re.findall(r'href="([^"]+)"', page)]


# -- failed and dropped URLs -------------------------------------------------------------------------


def test_failed_urls_are_listed_with_their_reason_from_the_overview(client: TestClient, db: sqlite3.Connection) -> None:
    failed = {url: reason for url, reason in db.execute("SELECT url, reason FROM urls WHERE state = 3")}
    assert len(set(failed.values())) > 1, "the test site fails in more than one way"
    overview = client.get("/").text
    assert 'href="/failed"' in overview
    for reason in set(failed.values()):
        address = f"/failed?{urlencode({'reason': reason})}"
        assert address in _hrefs(overview), reason  # each count of the overview leads to its list

        page = client.get(address).text
        expected = sorted(url for url, why in failed.items() if why == reason)
        shown = re.findall(r'<tr>\s*<td class="url">([^<]+)</td>\s*<td><a [^>]+>([^<]+)</a>', page)
        assert sorted(html.unescape(url) for url, _ in shown) == expected
        assert {html.unescape(why) for _, why in shown} == {reason}
        count = len(expected)
        assert re.search(rf'id="total">{count} URLs? failed for {re.escape(html.escape(reason))}<', page)

    rows = walk(client, "/api/failed?limit=3")
    assert {row["url"]: row["reason"] for row in rows} == failed and len(rows) == len(failed)
    got = client.get("/api/failed").json()
    assert got["total"] == len(failed) and sum(got["reasons"].values()) == len(failed)
    with_capture = next(row for row in rows if row["detail"])  # an HTTP error has its capture
    assert client.get(with_capture["detail"]).status_code == 200

    # Each with the page that linked it first, as the Dropped list has it.
    linked_from = dict(
        db.execute("SELECT u.url, r.url FROM urls u LEFT JOIN urls r ON r.fp = u.referrer_fp WHERE u.state = 3")
    )
    assert {row["url"]: row["referrer"] for row in rows} == linked_from and any(linked_from.values())
    linked = next(row for row in rows if row["referrer_detail"])
    assert html.escape(linked["referrer"]) in client.get(linked["referrer_detail"]).text
    page = client.get(f"/failed?{urlencode({'reason': linked['reason']})}").text
    assert f'<a href="{linked["referrer_detail"]}">{html.escape(linked["referrer"])}</a>' in page


def test_dropped_urls_are_listed_with_their_reason_and_the_page_that_linked_them(
    client: TestClient, db: sqlite3.Connection
) -> None:
    dropped = {
        url: (reason, referrer)
        for url, reason, referrer in db.execute(
            "SELECT d.url, d.reason, r.url FROM dropped d LEFT JOIN urls r ON r.fp = d.referrer_fp "
            "WHERE NOT EXISTS (SELECT 1 FROM urls u WHERE u.fp = d.fp)"
        )
    }
    assert dropped and any(referrer for _, referrer in dropped.values())
    rows = walk(client, "/api/dropped?limit=4")
    assert {row["url"]: (row["reason"], row["referrer"]) for row in rows} == dropped and len(rows) == len(dropped)
    linked = next(row for row in rows if row["referrer_detail"])
    referrer_page = client.get(linked["referrer_detail"]).text
    assert html.escape(linked["referrer"]) in referrer_page  # the details of the page that linked it

    overview = client.get("/").text
    assert 'href="/dropped"' in overview
    for reason in {reason for reason, _ in dropped.values()}:
        address = f"/dropped?{urlencode({'reason': reason})}"
        assert address in _hrefs(overview), reason
        only = walk(client, f"/api/dropped?{urlencode({'reason': reason, 'limit': 2})}")
        assert sorted(row["url"] for row in only) == sorted(u for u, (why, _) in dropped.items() if why == reason)
        page = client.get(address).text
        for row in only[:50]:
            assert html.escape(row["url"]) in page
            if row["referrer_detail"]:
                assert f'<a href="{row["referrer_detail"]}">{html.escape(row["referrer"])}</a>' in page


def test_the_lists_page_on_through_next_links_and_refuse_a_damaged_cursor(client: TestClient) -> None:
    for list_name in ("failed", "dropped"):
        seen: list[str] = []
        url: str | None = f"/{list_name}?limit=2"
        while url:
            page = client.get(url).text
            seen += re.findall(r'<tr>\s*<td class="url">([^<]+)</td>', page)
            found = re.search(r'id="next" rel="next" href="([^"]+)"', page)
            url = found and html.unescape(found[1])
        assert sorted(seen) == sorted(html.escape(row["url"]) for row in walk(client, f"/api/{list_name}"))
        assert 'id="message"' in client.get(f"/{list_name}?after=nonsense").text
        assert client.get(f"/api/{list_name}?after=nonsense").status_code == 400
        empty = client.get(f"/api/{list_name}", params={"reason": "no such reason"}).json()
        assert (empty["rows"], empty["total"], empty["next_url"]) == ([], 0, None)


# -- counts ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "where"),
    [
        ("", "1"),
        ("status=4xx", "c.status BETWEEN 400 AND 499"),
        ("depth=1&type=text/html", "u.depth = 1 AND c.content_type = 'text/html'"),
    ],
)
def test_lists_say_how_many_pages_they_hold(client: TestClient, db: sqlite3.Connection, query: str, where: str) -> None:
    expected = len(_ids(db, where))
    assert client.get(f"/api/pages?{query}&limit=5").json()["total"] == expected
    assert f'id="total">{expected:,} pages<' in client.get(f"/pages?{query}&limit=5").text


def test_search_says_how_many_results_it_has(client: TestClient, db: sqlite3.Connection, crawled: Crawled) -> None:
    expected = len(_ids(db, "c.id IN (SELECT rowid FROM captures_fts WHERE captures_fts MATCH 'page')"))
    assert expected > 20
    assert client.get("/api/search?q=page&limit=3").json()["total"] == expected
    assert f'id="total">{expected:,} results<' in client.get("/search?q=page").text
    host = crawled.evil_origin.removeprefix("http://")
    assert client.get("/api/search", params={"q": "page", "host": host}).json()["total"] == 2
    assert 'id="total">1 result<' in client.get("/search?q=xylophonic").text


# -- a page's links ----------------------------------------------------------------------------------


def test_a_page_linked_from_hundreds_lists_its_in_links_a_page_at_a_time(
    client: TestClient, db: sqlite3.Connection
) -> None:
    fp, inbound = db.execute("SELECT dst_fp, COUNT(*) FROM links GROUP BY dst_fp ORDER BY 2 DESC LIMIT 1").fetchone()
    assert inbound > 100, "the test site has a page most others link to"
    (capture_id,) = db.execute("SELECT MAX(id) FROM captures WHERE fp = ?", (fp,)).fetchone()
    sources = {
        u for (u,) in db.execute("SELECT u.url FROM links l JOIN urls u ON u.fp = l.src_fp WHERE dst_fp = ?", (fp,))
    }

    rows = walk(client, f"/api/page/{capture_id}/in-links?limit=40")
    assert len(rows) == inbound and {row["url"] for row in rows} == sources
    first = client.get(f"/api/page/{capture_id}/in-links").json()
    assert first["total"] == inbound and len(first["rows"]) == 50

    seen: list[str] = []
    url: str | None = f"/page/{capture_id}"
    while url:
        page = client.get(url).text
        section = page[page.index('id="in-links"') : page.index("</table>", page.index('id="in-links"'))]
        listed = re.findall(r'<td class="url">(?:<a href="[^"]+">)?([^<]+)', section)
        assert 0 < len(listed) <= 50
        seen += [html.unescape(u) for u in listed]
        assert f'id="in-links-total">{inbound:,}<' in page
        found = re.search(r'id="in-links-next" rel="next" href="([^"#]+)', page)
        url = found and html.unescape(found[1])
    assert sorted(seen) == sorted(sources)
    out = client.get(f"/api/page/{capture_id}/out-links").json()
    assert out["total"] == db.execute("SELECT COUNT(*) FROM links WHERE src_fp = ?", (fp,)).fetchone()[0]
    assert client.get("/api/page/999999/in-links").status_code == 404


# -- favicon -----------------------------------------------------------------------------------------


def test_the_favicon_is_served(client: TestClient) -> None:
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.text.startswith("<svg")
    assert '<link rel="icon" href="/static/favicon.svg"' in client.get("/").text
    assert client.get("/static/favicon.svg").content == icon.content
