"""Sitemaps: reading the files (tables of odd inputs), and crawls of small sites that have them."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import brotli
import pytest
from aiohttp import web

from tests.crawls import connect, fast_config
from tests.test_crawl_features import Handler, page, serve
from webtrawl import Crawler, PolitenessConfig, ScopeConfig
from webtrawl.parse.sitemap import CHUNK, SitemapError, decoded_chunks, parse_sitemap

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*locs: str, ns: str = NS) -> bytes:
    entries = "".join(f"<url><loc>{loc}</loc><lastmod>2026-01-01</lastmod></url>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {ns}>{entries}</urlset>'.encode()


def index(*locs: str) -> bytes:
    entries = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f"<?xml version='1.0'?><sitemapindex {NS}>{entries}</sitemapindex>".encode()


def entries(data: bytes, encoding: str | None = None, limit: int = 10**9) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for batch in parse_sitemap(decoded_chunks(data, encoding, limit)):
        found.extend(batch)
    return found


# -- reading files ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (urlset("http://a/1", "http://a/2"), [("url", "http://a/1"), ("url", "http://a/2")]),
        (urlset(" \n http://a/1\t", ns=""), [("url", "http://a/1")]),  # no namespace; spaces around
        (urlset("http://a/?x=1&amp;y=2"), [("url", "http://a/?x=1&y=2")]),
        (urlset("<![CDATA[http://a/c]]>"), [("url", "http://a/c")]),
        (
            index("http://a/s1.xml", "http://a/s2.xml.gz"),
            [("sitemap", "http://a/s1.xml"), ("sitemap", "http://a/s2.xml.gz")],
        ),
        (
            b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
            b'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
            b"<url><loc>http://a/p</loc><image:image><image:loc>http://a/i.jpg</image:loc></image:image></url>"
            b"</urlset>",
            [("url", "http://a/p")],  # extensions' own <loc>s are not pages
        ),
        (b"<urlset><url><loc></loc></url><sitemap><loc>http://a/x</loc></sitemap></urlset>", []),
        (b"\xef\xbb\xbf<urlset><url><loc>http://a/bom</loc></url></urlset>", [("url", "http://a/bom")]),
    ],
)
def test_entries_are_read_from_urlsets_and_indexes(data: bytes, expected: list[tuple[str, str]]) -> None:
    assert entries(data) == expected


def test_chunk_boundaries_do_not_matter() -> None:
    data = urlset(*(f"http://a/{n}" for n in range(50)))
    whole = entries(data)
    for size in (1, 7, 64):
        pieces = [data[i : i + size] for i in range(0, len(data), size)]
        assert [e for batch in parse_sitemap(pieces) for e in batch] == whole


@pytest.mark.parametrize(
    ("data", "kept", "error"),
    [
        (b"<html><body>Not found</body></html>", 0, "not a sitemap: <html>"),
        (b"User-agent: *\nDisallow:\n", 0, "bad XML"),
        (b"", 0, "bad XML"),
        (urlset("http://a/1", "http://a/2")[:-62], 1, "bad XML"),  # cut off: what came before is kept
        (urlset("http://a/1").replace(b"</urlset>", b"<url><loc>x</url></urlset>"), 1, "bad XML"),
    ],
)
def test_a_broken_file_raises_after_the_entries_before_the_fault(data: bytes, kept: int, error: str) -> None:
    found: list[tuple[str, str]] = []
    with pytest.raises(SitemapError, match=error):
        for batch in parse_sitemap(decoded_chunks(data, None, 10**9)):
            found.extend(batch)
    assert len(found) == kept


def test_a_dtd_is_refused_before_any_entity_is_expanded() -> None:
    laughs = b'<!ENTITY a "aaaaaaaaaa">' + b"".join(
        b'<!ENTITY %c "%s">' % (ord("b") + n, (b"&%c;" % (ord("a") + n)) * 10) for n in range(8)
    )
    bomb = b'<?xml version="1.0"?><!DOCTYPE urlset [' + laughs + b"]><urlset><url><loc>&i;</loc></url></urlset>"
    with pytest.raises(SitemapError, match="DTD"):
        entries(bomb)


XML = urlset(*(f"http://a/page/{n}" for n in range(3000)))


@pytest.mark.parametrize(
    ("body", "encoding"),
    [
        pytest.param(gzip.compress(XML), None, id="xml.gz"),
        pytest.param(gzip.compress(XML), "gzip", id="content-encoding-gzip"),
        pytest.param(gzip.compress(gzip.compress(XML)), "gzip", id="xml.gz-sent-gzipped"),
        pytest.param(gzip.compress(XML[:5000]) + gzip.compress(XML[5000:]), None, id="two-gzip-members"),
        pytest.param(XML, "gzip", id="labelled-gzip-but-plain"),
        pytest.param(brotli.compress(XML), "br", id="brotli"),
        pytest.param(zlib.compress(XML), "deflate", id="deflate"),
        pytest.param(brotli.compress(gzip.compress(XML)), "br", id="xml.gz-sent-as-brotli"),
    ],
)
def test_compressed_sitemaps_are_read(body: bytes, encoding: str | None) -> None:
    assert entries(body, encoding) == entries(XML)


def test_a_gzip_file_inside_a_gzip_coding_is_found_from_tiny_first_chunks() -> None:
    inner = gzip.compress(XML)
    # a stream whose first members inflate to one byte each: the magic number arrives in two pieces
    body = gzip.compress(inner[:1]) + gzip.compress(inner[1:2]) + gzip.compress(inner[2:])
    assert entries(body, "gzip") == entries(XML)


def test_decompression_stops_at_the_limit_a_chunk_at_a_time() -> None:
    bomb = gzip.compress(b"<urlset>" + b" " * (40 * 1024 * 1024), compresslevel=9)  # 40 MB from ~40 KB
    limit = 3 * 1024 * 1024
    sizes = [len(chunk) for chunk in decoded_chunks(bomb, None, limit)]
    assert sum(sizes) == limit and max(sizes) <= CHUNK
    with pytest.raises(SitemapError, match="bad XML"):  # cut before its end: the XML is incomplete
        entries(bomb, None, limit)


# -- crawls of sites with sitemaps ------------------------------------------------------------------


def xml(body: bytes, **headers: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, headers={"Content-Type": "application/xml", **headers})

    return handler


def robots(text: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=text)

    return handler


def from_sitemaps(out: Path) -> dict[str, tuple[int, int]]:
    """URL → (depth, state) of every URL the sitemaps brought in."""
    rows = connect(out).execute("SELECT url, depth, state FROM urls WHERE kind = 'sitemap'")
    return {url: (depth, state) for url, depth, state in rows}


async def crawl(routes: dict[str, Handler | str], tmp_path: Path, **settings: object):
    async with serve(routes) as (url, log):
        report = await Crawler(fast_config(url, tmp_path, **settings)).run()  # type: ignore[arg-type]
    return url, [path for _, path in log], report


async def test_sitemaps_named_in_robots_txt_bring_in_pages_no_link_leads_to(tmp_path: Path) -> None:
    routes: dict[str, Handler | str] = {
        "/": page("/linked"),
        "/linked": page(),
        "/orphan": page("/orphan-child"),
        "/orphan-child": page(),
    }
    async with serve(routes) as (url, log):
        routes["/maps/pages.xml"] = xml(urlset(f"{url}orphan", f"{url}linked", f"{url}"))
        # a relative Sitemap line is read as relative to robots.txt
        routes["/robots.txt"] = robots(
            f"User-agent: *\nDisallow: /private/\nSitemap: /maps/pages.xml\nSitemap: {url}private/map.xml\n"
        )
        report = await Crawler(fast_config(url, tmp_path)).run()
    paths = [path for _, path in log]
    assert report.outcome == "finished"
    assert "/sitemap.xml" not in paths and "/private/map.xml" not in paths  # named ones only, robots obeyed
    assert paths.count("/maps/pages.xml") == 1
    # The orphan is fetched at depth 1, its own links one further; a URL known closer keeps its depth.
    assert from_sitemaps(tmp_path) == {f"{url}orphan": (1, 2), f"{url}linked": (1, 2)}
    depth = dict(connect(tmp_path).execute("SELECT url, depth FROM urls").fetchall())
    assert depth[f"{url}orphan-child"] == 2 and depth[url] == 0


async def test_without_a_sitemap_line_sitemap_xml_is_tried(tmp_path: Path) -> None:
    routes: dict[str, Handler | str] = {"/": page(), "/hidden": page()}
    async with serve(routes) as (url, log):
        routes["/sitemap.xml"] = xml(urlset(f"{url}hidden"))
        await Crawler(fast_config(url, tmp_path)).run()
    assert from_sitemaps(tmp_path) == {f"{url}hidden": (1, 2)}
    assert [path for _, path in log][:2] == ["/robots.txt", "/sitemap.xml"]  # before any page


async def test_an_index_leads_to_its_sitemaps_gzipped_or_not(tmp_path: Path) -> None:
    routes: dict[str, Handler | str] = {"/": page()}
    async with serve(routes) as (url, _log):
        routes["/sitemap.xml"] = xml(index(f"{url}s/one.xml", f"{url}s/two.xml.gz", f"{url}s/three.xml"))
        routes["/s/one.xml"] = xml(urlset(f"{url}a", f"{url}b"))
        routes["/s/two.xml.gz"] = xml(gzip.compress(urlset(f"{url}c")), **{"Content-Type": "application/gzip"})
        routes["/s/three.xml"] = xml(gzip.compress(urlset(f"{url}d")), **{"Content-Encoding": "gzip"})
        for name in "abcd":
            routes[f"/{name}"] = page()
        await Crawler(fast_config(url, tmp_path)).run()
    assert from_sitemaps(tmp_path) == {f"{url}{name}": (1, 2) for name in "abcd"}


async def test_nested_indexes_are_followed_two_levels_deep_without_loops(tmp_path: Path) -> None:
    routes: dict[str, Handler | str] = {"/": page()}
    async with serve(routes) as (url, log):
        routes["/sitemap.xml"] = xml(index(f"{url}i1.xml", f"{url}sitemap.xml"))
        routes["/i1.xml"] = xml(index(f"{url}i2.xml", f"{url}u1.xml"))
        routes["/i2.xml"] = xml(index(f"{url}i3.xml", f"{url}u2.xml"))
        routes["/i3.xml"] = xml(index(f"{url}u3.xml"))
        for n in "123":
            routes[f"/u{n}.xml"] = xml(urlset(f"{url}p{n}"))
            routes[f"/p{n}"] = page()
        await Crawler(fast_config(url, tmp_path)).run()
    paths = [path for _, path in log]
    # sitemap.xml → i1 → u1 and i2 are read; what i2 lists would be a third level
    assert set(from_sitemaps(tmp_path)) == {f"{url}p1"}
    assert {"/i1.xml", "/i2.xml", "/u1.xml"} <= set(paths)
    assert "/i3.xml" not in paths and "/u2.xml" not in paths and paths.count("/sitemap.xml") == 1


async def test_out_of_scope_and_unwanted_entries_are_dropped_with_their_reason(tmp_path: Path) -> None:
    routes: dict[str, Handler | str] = {"/": page(), "/ok": page()}
    async with serve(routes) as (url, log):
        routes["/sitemap.xml"] = xml(
            urlset(f"{url}ok", "http://elsewhere.example/x", f"{url}file.zip", "mailto:a@b.example", "/relative")
        )
        report = await Crawler(fast_config(url, tmp_path)).run()
    assert set(from_sitemaps(tmp_path)) == {f"{url}ok", f"{url}relative"}  # resolved against the sitemap
    assert report.drops == {"out-of-scope": 1, "binary-extension": 1}
    assert "elsewhere.example" not in str(log)


async def test_broken_sitemaps_are_skipped_and_the_crawl_goes_on(tmp_path: Path) -> None:
    async def fail(request: web.Request) -> web.StreamResponse:
        return web.Response(status=500)

    names = ("html.xml", "bad.xml", "gone.xml", "fail.xml", "cut.xml.gz", "good.xml")
    routes: dict[str, Handler | str] = {"/": page("/linked"), "/linked": page(), "/fail.xml": fail}
    routes.update({f"/{name}": page() for name in ("a", "b", "c")})
    async with serve(routes) as (url, log):
        routes["/robots.txt"] = robots("".join(f"Sitemap: {url}{name}\n" for name in names))
        routes["/html.xml"] = page("/never")
        routes["/bad.xml"] = xml(b"<urlset><url><loc>%sa</loc></url><url><loc>oops</urlset>" % url.encode())
        routes["/cut.xml.gz"] = xml(gzip.compress(urlset(f"{url}never") + b" " * 100)[:30])
        routes["/good.xml"] = xml(gzip.compress(urlset(f"{url}b", f"{url}c")), **{"Content-Encoding": "gzip"})
        report = await Crawler(fast_config(url, tmp_path)).run()
    assert report.outcome == "finished"
    assert {path for _, path in log} >= {f"/{name}" for name in names}
    # /a was listed before bad.xml's fault; good.xml was read in full
    assert from_sitemaps(tmp_path) == {f"{url}{name}": (1, 2) for name in "abc"}
    assert report.done_total == 5


async def test_the_per_host_cap_is_honoured(tmp_path: Path) -> None:
    routes: dict[str, Handler | str] = {"/": page()}
    async with serve(routes) as (url, _log):
        routes["/sitemap.xml"] = xml(index(f"{url}one.xml", f"{url}two.xml"))
        routes["/one.xml"] = xml(urlset(*(f"{url}p/{n}" for n in range(30))))
        routes["/two.xml"] = xml(urlset(*(f"{url}q/{n}" for n in range(30))))
        scope = ScopeConfig(max_sitemap_urls=40)
        report = await Crawler(fast_config(url, tmp_path, scope=scope, max_pages=1)).run()
    assert report.outcome == "max-pages"
    found = set(from_sitemaps(tmp_path))
    assert found == {f"{url}p/{n}" for n in range(30)} | {f"{url}q/{n}" for n in range(10)}


async def test_sitemap_requests_keep_the_hosts_pace_and_redirects_are_followed(tmp_path: Path) -> None:
    routes: dict[str, Handler | str] = {"/": page(), "/a": page(), "/b": page()}

    async def moved(request: web.Request) -> web.StreamResponse:
        return web.Response(status=301, headers={"Location": "/wp-sitemap.xml"})

    async with serve(routes) as (url, log):
        routes["/robots.txt"] = robots("User-agent: *\nCrawl-delay: 0.2\n")
        routes["/sitemap.xml"] = moved
        routes["/wp-sitemap.xml"] = xml(index(f"{url}one.xml"))
        routes["/one.xml"] = xml(urlset(f"{url}a", f"{url}b"))
        config = fast_config(url, tmp_path)
        await Crawler(config).run()
    starts = [(at, path) for at, path in log if path != "/robots.txt"]
    assert [path for _, path in starts][:3] == ["/sitemap.xml", "/wp-sitemap.xml", "/one.xml"]
    assert len(starts) == 6
    assert min(b[0] - a[0] for a, b in pairwise(starts)) >= 0.19


async def test_no_sitemaps_when_turned_off(tmp_path: Path) -> None:
    routes: dict[str, Handler | str] = {"/": page(), "/hidden": page()}
    async with serve(routes) as (url, log):
        routes["/sitemap.xml"] = xml(urlset(f"{url}hidden"))
        await Crawler(fast_config(url, tmp_path, scope=ScopeConfig(sitemaps=False))).run()
    assert [path for _, path in log] == ["/robots.txt", "/"]


async def test_a_sitemap_on_another_origin_is_not_read(tmp_path: Path) -> None:
    async with serve({"/sitemap.xml": xml(urlset("http://127.0.0.1/x"))}, host="127.0.0.2") as (other, other_log):
        routes: dict[str, Handler | str] = {"/": page(), "/robots.txt": robots(f"Sitemap: {other}sitemap.xml\n")}
        async with serve(routes) as (url, log):
            await Crawler(fast_config(url, tmp_path)).run()
    assert other_log == []
    assert [path for _, path in log] == ["/robots.txt", "/"]


async def test_politeness_config_still_applies_to_pages(tmp_path: Path) -> None:
    """A delay between request starts holds across the sitemap and the pages."""
    routes: dict[str, Handler | str] = {"/": page("/x"), "/x": page()}
    async with serve(routes) as (url, log):
        routes["/sitemap.xml"] = xml(urlset(f"{url}y"))
        routes["/y"] = page()
        config = replace(fast_config(url, tmp_path), politeness=PolitenessConfig(per_host=2, delay=0.1))
        await Crawler(config).run()
    # One host, one queue: the sitemap's page waits its turn like the others. The spacing a delay adds is
    # the scheduler's, tested on its own clock (tests/test_politeness.py).
    assert sorted(path for _at, path in log) == ["/", "/robots.txt", "/sitemap.xml", "/x", "/y"]
