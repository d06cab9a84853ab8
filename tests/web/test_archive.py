"""Archived copies served by the dashboard, from a real crawl of the local test site with page requisites.

One crawl serves the module (it is read only); tests that damage or move files work on a copy of it.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pytest
from selectolax.lexbor import LexborHTMLParser
from starlette.exceptions import StarletteDeprecationWarning

from tests.crawls import fast_config
from tests.sites import Href, Route, Site, SiteServer
from tests.sites.specials import PNG
from webtrawl.config import ScopeConfig
from webtrawl.crawler import Crawler
from webtrawl.web.app import create_app
from webtrawl.web.rewrite import Rewriter
from webtrawl.web.site import Site as DashboardSite

with warnings.catch_warnings():
    # The test client prefers httpx2 to httpx (installed): a test tool's deprecation, not ours.
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

PAGE = "/archive-test/"
PAGE_HTML = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Archive &lt;script&gt;window.titleRan = 1&lt;/script&gt; test</title>
<link rel="stylesheet" href="style.css">
<style>h1 { background: url('/files/logo.png') }</style>
</head><body>
<h1 id="top" style="background-image: url(/files/logo.png)">Archive test</h1>
<img src="/files/logo.png" srcset="/files/logo.png 1x, /files/logo.png?big 2x" alt="logo">
<ul>
<li><a href="/">home</a></li>
<li><a href="/docs">docs</a></li>
<li><a href="/private/">private</a></li>
<li><a href="http://example.invalid/away">away</a></li>
<li><a href="/based/">based</a></li>
<li><a href="odd">odd</a></li>
<li><a href="#top">top</a></li>
<li><a href="mailto:webmaster@example.invalid">mail</a></li>
</ul>
<form action="/search"><input name="q"></form>
<script>window.pwned = 1;</script>
</body></html>
"""
ODD = "a|b/?q={x}"
"""Where /archive-test/odd redirects: characters a normalized URL keeps, which escaping would change."""
STYLE_CSS = b"body { background: url(paper.png) }\n@import 'more.css';\n"
URL_ATTRIBUTES = ("href", "src", "srcset", "action", "style")


@dataclass(frozen=True)
class Crawl:
    out: Path
    site: Site

    def capture(self, path: str) -> tuple[int, float]:
        """The id and fetch time of the latest archived capture of `path` on the test site."""
        conn = sqlite3.connect(f"file:{self.out / 'crawl.db'}?mode=ro", uri=True)
        try:
            row = conn.execute(
                "SELECT id, fetched_at FROM captures WHERE url = ? AND warc_file IS NOT NULL ORDER BY id DESC LIMIT 1",
                (self.site.url(path),),
            ).fetchone()
        finally:
            conn.close()
        assert row is not None, f"{path} was not archived"
        return row

    def stamp(self, path: str) -> str:
        return datetime.fromtimestamp(self.capture(path)[1], UTC).strftime("%Y%m%d%H%M%S")


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Crawl:
    """A crawl from PAGE to depth 1: "/", /docs (→ /docs/, sent gzipped), /based/, odd (→ ODD), and PAGE's
    requisites."""
    out = tmp_path_factory.mktemp("archive")

    async def run() -> Site:
        async with SiteServer(pages=20, calendar=False) as server:
            site = server.site
            site.routes[PAGE] = Route(200, body=PAGE_HTML)
            site.routes[PAGE + "style.css"] = Route(200, "text/css; charset=utf-8", STYLE_CSS)
            site.routes[PAGE + "odd"] = Route(302, redirect=Href(ODD, site.url(PAGE + ODD)))
            site.routes[PAGE + "a|b/"] = Route(200, body=b"<!doctype html><title>Odd</title><p>Odd characters.")
            config = fast_config(site.url(PAGE), out, scope=ScopeConfig(max_depth=1, page_requisites=True))
            await Crawler(config).run()
            return site

    return Crawl(out, asyncio.run(run()))


def client_for(directory: Path, token: str | None = None) -> TestClient:
    return TestClient(create_app(DashboardSite(directory, token=token)))


@pytest.fixture
def client(crawl: Crawl) -> Iterator[TestClient]:
    with client_for(crawl.out) as client:
        yield client


@pytest.fixture
def copied(crawl: Crawl, tmp_path: Path) -> Path:
    """A copy of the crawl directory, free to damage."""
    return Path(shutil.copytree(crawl.out, tmp_path / "crawl"))


def update(directory: Path, sql: str, *params: object) -> None:
    conn = sqlite3.connect(directory / "crawl.db")
    try:
        with conn:
            conn.execute(sql, params)
    finally:
        conn.close()


def assert_copy_headers(response) -> None:  # type: ignore[no-untyped-def]
    assert response.headers["content-security-policy"] == (
        "sandbox; default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; font-src 'self'; "
        "media-src 'self'; frame-ancestors 'self'"
    )
    assert response.headers["x-frame-options"] == "SAMEORIGIN"  # the banner frames it; no other site may
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"


def attributes(html: str) -> dict[str, str]:
    """`tag.attribute:text` (or the alt text) → value, for every URL-carrying attribute of the document."""
    found = {}
    for node in LexborHTMLParser(html).css("[href],[src],[srcset],[action],[style]"):
        for name in URL_ATTRIBUTES:
            if (value := node.attributes.get(name)) is not None:
                found[f"{node.tag}.{name}:{node.text().strip() or node.attributes.get('alt') or ''}"] = value
    return found


def test_raw_copy_is_the_page_as_crawled_decoded(crawl: Crawl, client: TestClient) -> None:
    site = crawl.site
    assert site.routes["/docs/"].gzip  # sent with Content-Encoding: gzip, archived as received
    capture_id, _ = crawl.capture("/docs/")

    source = client.get(f"/archive/{capture_id}/source")
    assert source.status_code == 200
    assert source.content == site.routes["/docs/"].body
    assert source.headers["content-type"] == "text/plain; charset=utf-8"
    assert_copy_headers(source)

    raw = client.get(f"/archive/{capture_id}/raw")
    assert raw.status_code == 200
    assert raw.headers["content-type"] == "text/html; charset=utf-8"
    assert_copy_headers(raw)
    copy, original = LexborHTMLParser(raw.text), LexborHTMLParser(site.routes["/docs/"].body.decode())
    assert copy.css_first("title").text() == original.css_first("title").text() == site.pages["/docs/"].title
    assert copy.body.text() == original.body.text()
    assert len(copy.css("a")) == len(original.css("a")) == len(site.routes["/docs/"].links)
    # only the links differ: /docs/ is at the depth limit, so what it links to was not fetched
    assert [a.attributes["href"] for a in copy.css("a")] == [
        "/archive/not-archived?url=" + quote(link.url, safe="") for link in site.routes["/docs/"].links
    ]


def test_links_point_into_the_archive_and_never_to_the_live_web(crawl: Crawl, client: TestClient) -> None:
    site = crawl.site
    capture_id, _ = crawl.capture(PAGE)
    raw = client.get(f"/archive/{capture_id}/raw")
    assert raw.status_code == 200
    stamp = crawl.stamp(PAGE)
    archived = f"/archive/url/{stamp}/"
    logo = archived + site.url("/files/logo.png")
    found = attributes(raw.text)

    assert found["a.href:home"] == archived + site.url("/")
    assert found["a.href:docs"] == archived + site.url("/docs")
    assert found["a.href:based"] == archived + site.url("/based/")
    assert found["link.href:"] == archived + site.url(PAGE + "style.css")
    assert found["img.src:logo"] == logo
    assert found["img.srcset:logo"] == f"{logo} 1x, {logo}?big 2x"
    assert found["h1.style:Archive test"] == f'background-image: url("{logo}")'
    assert f'url("{logo}")' in LexborHTMLParser(raw.text).css_first("style").text()
    # robots.txt kept /private/ out, example.invalid is out of scope, no page links /search: none was fetched
    assert found["a.href:private"] == "/archive/not-archived?url=" + quote(site.url("/private/"), safe="")
    assert found["a.href:away"] == "/archive/not-archived?url=" + quote("http://example.invalid/away", safe="")
    assert found["form.action:"] == "/archive/not-archived?url=" + quote(site.url("/search"), safe="")
    assert found["a.href:top"] == "#top"
    assert found["a.href:mail"] == "mailto:webmaster@example.invalid"
    for key, value in found.items():
        if not key.startswith(("a.href:top", "a.href:mail")):
            assert value.startswith(("/archive/url/", "/archive/not-archived?")) or 'url("/archive/url/' in value


def test_archived_links_resolve_to_the_nearest_capture(crawl: Crawl, client: TestClient) -> None:
    site = crawl.site
    home_id, _ = crawl.capture("/")
    href = f"/archive/url/{crawl.stamp(PAGE)}/{site.url('/')}"

    home = client.get(href)
    assert home.status_code == 200
    assert_copy_headers(home)
    assert LexborHTMLParser(home.text).css_first("title").text() == site.pages["/"].title
    # a person opening the address gets the banner page; any time finds the one capture there is
    top = client.get(href, headers={"Sec-Fetch-Dest": "document"}, follow_redirects=False)
    assert top.status_code == 302 and top.headers["location"] == f"/archive/{home_id}"
    later = client.get(f"/archive/url/2099/{site.url('/')}", headers={"Sec-Fetch-Dest": "document"})
    assert later.status_code == 200 and f'src="/archive/{home_id}/raw"' in later.text

    # a redirect is followed inside the archive, to the copy of its target
    docs = client.get(f"/archive/url/{crawl.stamp(PAGE)}/{site.url('/docs')}", follow_redirects=False)
    assert docs.status_code == 302
    assert docs.headers["location"] == f"/archive/url/{crawl.stamp('/docs')}/{site.url('/docs/')}"
    assert_copy_headers(docs)
    assert client.get(docs.headers["location"]).text.count(site.pages["/docs/"].word) == 1
    odd = client.get(f"/archive/url/{crawl.stamp(PAGE)}/{site.url(PAGE + 'odd')}", follow_redirects=False)
    assert odd.headers["location"] == f"/archive/url/{crawl.stamp(PAGE + 'odd')}/{site.url(PAGE + ODD)}"
    assert "Odd characters." in client.get(odd.headers["location"]).text
    assert "Odd characters." in client.get(odd.headers["location"].replace("|", "%7C")).text  # as Chromium asks

    assert client.get(f"/archive/url/2026-01/{site.url('/')}").status_code == 404


def test_nearest_capture_wins(crawl: Crawl, copied: Path) -> None:
    home_id, fetched_at = crawl.capture("/")
    update(
        copied,
        "INSERT INTO captures(crawl_id, fp, url, fetched_at, status, content_type, warc_file, warc_offset, "
        "warc_length) SELECT crawl_id, fp, url, fetched_at + 86400, status, content_type, warc_file, warc_offset, "
        "warc_length FROM captures WHERE id = ?",
        home_id,
    )
    conn = sqlite3.connect(copied / "crawl.db")
    (next_day_id,) = conn.execute("SELECT MAX(id) FROM captures").fetchone()
    conn.close()
    with client_for(copied) as client:
        for when, expected in ((0, home_id), (40_000, home_id), (50_000, next_day_id), (10**6, next_day_id)):
            stamp = datetime.fromtimestamp(fetched_at + when, UTC).strftime("%Y%m%d%H%M%S")
            response = client.get(
                f"/archive/url/{stamp}/{crawl.site.url('/')}",
                headers={"Sec-Fetch-Dest": "document"},
                follow_redirects=False,
            )
            assert response.headers["location"] == f"/archive/{expected}", when


def test_links_to_uncaptured_urls_go_to_a_harmless_page(crawl: Crawl, client: TestClient) -> None:
    site = crawl.site
    private = site.url("/private/")
    page = client.get("/archive/not-archived", params={"url": private})
    assert page.status_code == 404
    assert "Not archived" in page.text and private in page.text
    assert f'href="{private}' not in page.text  # shown, never linked

    # /based/ has <base href="/base-target/">: its link "child/" means /base-target/child/, which was too deep
    capture_id, _ = crawl.capture("/based/")
    found = attributes(client.get(f"/archive/{capture_id}/raw").text)
    assert found["base.href:"] == f"/archive/url/{crawl.stamp('/based/')}/{site.url('/base-target/')}"
    assert found["a.href:child/"] == "/archive/not-archived?url=" + quote(site.url("/base-target/child/"), safe="")
    hostile = client.get("/archive/url/20260101/" + site.url("/private/"))
    assert hostile.status_code == 404 and "Not archived" in hostile.text


def test_requisites_are_served_from_the_archive_with_their_type(crawl: Crawl, client: TestClient) -> None:
    site = crawl.site
    image_id, _ = crawl.capture("/files/logo.png")
    image = client.get(f"/archive/{image_id}/raw")
    assert image.status_code == 200
    assert image.headers["content-type"] == "image/png"
    assert image.content == PNG
    assert_copy_headers(image)
    via_link = client.get(f"/archive/url/{crawl.stamp(PAGE)}/{site.url('/files/logo.png')}")
    assert via_link.content == PNG and via_link.headers["content-type"] == "image/png"

    css = client.get(f"/archive/url/{crawl.stamp(PAGE)}/{site.url(PAGE + 'style.css')}")
    assert css.status_code == 200
    assert css.headers["content-type"] == "text/css; charset=utf-8"
    assert_copy_headers(css)
    paper = quote(site.url(PAGE + "paper.png"), safe="")
    more = quote(site.url(PAGE + "more.css"), safe="")
    assert css.text == (
        f'body {{ background: url("/archive/not-archived?url={paper}") }}\n'
        f'@import "/archive/not-archived?url={more}";\n'
    )


def test_scripts_of_crawled_pages_come_only_under_the_sandbox(crawl: Crawl, client: TestClient) -> None:
    site = crawl.site
    capture_id, _ = crawl.capture(PAGE)
    for address in (
        f"/archive/{capture_id}/raw",
        f"/archive/{capture_id}/source",
        f"/archive/url/{crawl.stamp(PAGE)}/{site.url(PAGE)}",
    ):
        response = client.get(address)
        assert "window.pwned = 1;" in response.text
        assert_copy_headers(response)
    banner = client.get(f"/archive/{capture_id}")
    assert banner.status_code == 200
    assert "window.pwned" not in banner.text
    assert f'<iframe class="archive-frame" sandbox src="/archive/{capture_id}/raw"' in banner.text
    # the crawled title carries a script: the banner shows it as text
    assert "&lt;script&gt;window.titleRan = 1&lt;/script&gt;" in banner.text
    assert "<script>window.titleRan" not in banner.text


def test_banner_says_what_and_when(crawl: Crawl, client: TestClient) -> None:
    site = crawl.site
    capture_id, fetched_at = crawl.capture("/")
    banner = client.get(f"/archive/{capture_id}")
    assert banner.status_code == 200
    assert banner.headers["content-type"] == "text/html; charset=utf-8"
    tree = LexborHTMLParser(banner.text)
    text = tree.css_first(".archive-banner").text()
    assert site.url("/") in text
    assert datetime.fromtimestamp(fetched_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") in text
    assert "status 200" in text
    links = {a.attributes["href"] for a in tree.css(".archive-banner a")}
    assert {f"/page/{capture_id}", site.url("/")} <= links
    assert tree.css_first("iframe").attributes["src"] == f"/archive/{capture_id}/raw"


def test_with_a_token_archived_addresses_carry_it(crawl: Crawl) -> None:
    """A sandboxed copy's requests are cross-site, so the browser sends no SameSite cookie: the URLs
    themselves must authenticate, and the token must not end up in the archived URL looked up."""
    site = crawl.site
    capture_id, _ = crawl.capture(PAGE)
    stamp = crawl.stamp(PAGE)
    with client_for(crawl.out, "s3 cret") as client:
        assert client.get(f"/archive/{capture_id}/raw").status_code == 401
        raw = client.get(f"/archive/{capture_id}/raw", headers={"Authorization": "Bearer s3 cret"})
        found = attributes(raw.text)
        logo = f"/archive/url/{stamp}/{site.url('/files/logo.png')}"
        assert found["img.srcset:logo"] == f"{logo}?token=s3%20cret 1x, {logo}?big&token=s3%20cret 2x"
        assert found["a.href:private"].endswith("&token=s3%20cret")

        def fetch(address: str, **options: object):  # type: ignore[no-untyped-def]
            client.cookies.clear()  # let in by its URL alone
            return client.get(address, **options)  # type: ignore[arg-type]

        assert fetch(found["img.src:logo"]).content == PNG
        assert fetch(found["a.href:private"]).status_code == 404  # the not-archived page, not a 401
        odd = fetch(found["a.href:odd"], follow_redirects=False)
        assert odd.headers["location"].endswith(f"{ODD}&token=s3%20cret")
        assert "Odd characters." in fetch(odd.headers["location"]).text


def test_unknown_capture_is_a_404_page(client: TestClient) -> None:
    response = client.get("/archive/999999")
    assert response.status_code == 404
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert "No such capture" in response.text
    assert client.get("/archive/999999/raw").status_code == 404


def test_distributed_copy_on_another_node_says_where_it_is(crawl: Crawl, copied: Path) -> None:
    home_id, _ = crawl.capture("/")
    docs_id, _ = crawl.capture("/docs/")
    elsewhere = "node-02-20260101000000-00001.warc.gz"
    update(
        copied,
        "UPDATE captures SET node = 'node-02', warc_file = ?, warc_offset = 1234 WHERE id = ?",
        elsewhere,
        home_id,
    )
    update(copied, "UPDATE captures SET node = 'node-03' WHERE id = ?", docs_id)  # its file is here: shared storage
    with client_for(copied) as client:
        for address in (f"/archive/{home_id}", f"/archive/{home_id}/raw"):
            page = client.get(address)
            assert page.status_code == 404
            where = LexborHTMLParser(page.text).css_first(".archive-where").text()
            assert "node-02" in where and elsewhere in where and "1234" in where
        shared = client.get(f"/archive/{docs_id}/raw")
        assert shared.status_code == 200 and crawl.site.pages["/docs/"].word in shared.text


def test_missing_or_damaged_warc_gives_a_clear_page(crawl: Crawl, copied: Path) -> None:
    home_id, _ = crawl.capture("/")
    docs_id, _ = crawl.capture("/docs/")
    image_id, _ = crawl.capture("/files/logo.png")
    conn = sqlite3.connect(copied / "crawl.db")
    name, offset, length = conn.execute(
        "SELECT warc_file, warc_offset, warc_length FROM captures WHERE id = ?", (docs_id,)
    ).fetchone()
    conn.close()
    with (copied / "warc" / name).open("r+b") as stream:
        stream.seek(offset + length // 2)
        stream.write(b"\0" * 16)
    update(copied, "UPDATE captures SET warc_file = 'gone.warc.gz' WHERE id = ?", home_id)
    update(copied, "UPDATE captures SET warc_file = '../crawl.db', warc_offset = 0 WHERE id = ?", image_id)
    with client_for(copied) as client:
        missing = client.get(f"/archive/{home_id}/raw")
        assert missing.status_code == 404
        assert "gone.warc.gz is missing" in missing.text
        assert client.get(f"/archive/{home_id}").status_code == 404
        damaged = client.get(f"/archive/{docs_id}/raw")
        assert damaged.status_code == 500
        assert "cannot be read" in damaged.text and f"byte {offset} of {name}" in damaged.text
        outside = client.get(f"/archive/{image_id}/raw")
        assert outside.status_code == 404 and "is missing" in outside.text


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ('<a href="x.html#part">', '<a href="/archive/url/20260101000000/http://h/d/x.html#part">'),
        (
            '<a href="gone.html" ping="http://h/ping">',
            '<a href="/archive/not-archived?url=http%3A%2F%2Fh%2Fd%2Fgone.html">',
        ),
        ('<a href="javascript:alert(1)">', '<a href="javascript:alert(1)">'),
        ('<img src="data:image/png;base64,AA==">', '<img src="data:image/png;base64,AA==">'),
        ('<a href="ftp://h/x">', '<a href="/archive/not-archived?url=ftp%3A%2F%2Fh%2Fx">'),
        (
            '<svg><a xlink:href="//h/x.html">',
            '<svg><a xlink:href="/archive/url/20260101000000/http://h/x.html"></a></svg>',
        ),
        (
            '<meta http-equiv="refresh" content="0; url=x.html">',
            '<meta http-equiv="refresh" content="0; url=/archive/url/20260101000000/http://h/d/x.html">',
        ),
        (
            '<iframe srcdoc="<a href=x.html>x</a>">',
            '<iframe srcdoc="&lt;html&gt;&lt;head&gt;&lt;/head&gt;&lt;body&gt;&lt;a '
            'href=&quot;/archive/url/20260101000000/http://h/d/x.html&quot;&gt;x&lt;/a&gt;&lt;/body&gt;&lt;/html&gt;">',
        ),
    ],
)
def test_rewriter_cases(html: str, expected: str) -> None:
    rewriter = Rewriter("20260101000000", lambda url: url in {"http://h/d/x.html", "http://h/x.html"})
    assert expected in rewriter.html(html, "http://h/d/page.html")
