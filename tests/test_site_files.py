"""The robots.txt and sitemaps a crawl read are in its archive, as an archivist expects: request and response
records in the WARC, lines of the CDXJ index (the same lines a replay tool's indexer makes of the files), and
what `webtrawl show` prints."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from tests.crawls import check_warcs, connect, fast_config
from tests.test_cli import webtrawl
from webtrawl import Crawler
from webtrawl.store.export import export
from webtrawl.store.shards import source_of

ROBOTS = b"User-agent: *\nDisallow: /private\nSitemap: /sitemaps/index.xml\n"


def sitemap(*locs: str, index: bool = False) -> bytes:
    kind, item = ("sitemapindex", "sitemap") if index else ("urlset", "url")
    entries = "".join(f"<{item}><loc>{loc}</loc></{item}>" for loc in locs)
    return (
        f'<?xml version="1.0"?><{kind} xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</{kind}>'.encode()
    )


@pytest.fixture
async def site() -> AsyncIterator[str]:
    """robots.txt names a sitemap index, which redirects once and lists a gzipped sitemap of one page."""
    files: dict[str, tuple[bytes, str]] = {}

    async def serve(request: web.Request) -> web.StreamResponse:
        if request.path == "/sitemaps/index.xml":
            raise web.HTTPFound("/sitemaps/moved-index.xml")
        body, content_type = files.get(request.path, (b"", ""))
        if not content_type:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type=content_type)

    app = web.Application()
    app.router.add_get("/{path:.*}", serve)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    origin = f"http://127.0.0.1:{runner.addresses[0][1]}"
    files.update({
        "/robots.txt": (ROBOTS, "text/plain"),
        "/sitemaps/moved-index.xml": (sitemap(f"{origin}/sitemaps/pages.xml.gz", index=True), "application/xml"),
        "/sitemaps/pages.xml.gz": (gzip.compress(sitemap(f"{origin}/listed")), "application/gzip"),
        "/": (b'<a href="/private">p</a> <a href="/a">a</a>', "text/html"),
        "/a": (b"<title>a</title>", "text/html"),
        "/listed": (b"<title>listed</title>", "text/html"),
    })  # fmt: skip
    try:
        yield origin
    finally:
        await runner.cleanup()


def warc_records(out: Path) -> list[tuple[str, str, bytes]]:
    found = []
    for file in sorted((out / "warc").glob("*.warc.gz")):
        with file.open("rb") as stream:
            for record in ArchiveIterator(stream):
                found.append((record.rec_type, record.rec_headers.get_header("WARC-Target-URI") or "",
                              record.content_stream().read()))  # fmt: skip
    return found


async def test_robots_txt_and_sitemaps_are_archived_and_indexed(site: str, tmp_path: Path) -> None:
    report = await Crawler(fast_config(site, tmp_path)).run()
    assert report.outcome == "finished"
    assert check_warcs(tmp_path) >= 3  # every record's digest checks out

    records = warc_records(tmp_path)
    responses = {url: body for kind, url, body in records if kind == "response"}
    assert responses[f"{site}/robots.txt"] == ROBOTS
    assert f"{site}/sitemaps/index.xml" in responses  # the redirect
    assert b"pages.xml.gz" in responses[f"{site}/sitemaps/moved-index.xml"]
    assert gzip.decompress(responses[f"{site}/sitemaps/pages.xml.gz"]).count(b"<loc>") == 1  # as received
    site_files = [f"{site}/robots.txt", f"{site}/sitemaps/index.xml", f"{site}/sitemaps/moved-index.xml",
                  f"{site}/sitemaps/pages.xml.gz"]  # fmt: skip
    requested = [url for kind, url, _body in records if kind == "request"]
    assert all(url in requested for url in site_files)
    assert f"{site}/private" not in responses  # what robots.txt said was obeyed, and the archive shows why

    conn = connect(tmp_path)
    assert (
        conn.execute("SELECT COUNT(*) FROM captures WHERE url LIKE '%robots.txt' OR url LIKE '%sitemaps%'").fetchone()[
            0
        ]
        == 0
    )
    cdxj = io.StringIO()
    export([source_of(conn, "default")], "cdxj", cdxj)
    ours = cdxj.getvalue().splitlines()
    assert [line for line in ours if '"url": "' + site + '/robots.txt"' in line]
    warcs = [str(path) for path in sorted((tmp_path / "warc").glob("*.warc.gz"))]
    theirs = subprocess.run(
        [sys.executable, "-m", "cdxj_indexer.main", *warcs], capture_output=True, text=True, check=True
    ).stdout.splitlines()

    def keyed(lines: list[str]) -> set[tuple[str, str, str, str, str, str]]:
        fields = [(line.split(" ", 2)[0], line.split(" ", 2)[1], json.loads(line.split(" ", 2)[2])) for line in lines]
        # This indexer keeps the digest's "sha1:"; pywb's, like the export, leaves it out.
        return {(key, stamp, f["url"], f["status"], f["digest"].removeprefix("sha1:"), f["offset"])
                for key, stamp, f in fields}  # fmt: skip

    assert keyed(ours) == keyed(theirs)  # every response record the indexer finds, the export lists alike
    indexed = {json.loads(line.split(" ", 2)[2])["url"] for line in ours}
    assert set(site_files) <= indexed

    code, out, err = await webtrawl("show", str(tmp_path), f"{site}/robots.txt")
    assert code == 0, err
    assert "HTTP/1.1 200" in out and "Disallow: /private" in out

    code, out, err = await webtrawl("status", str(tmp_path))
    assert code == 0 and "subresources" not in out  # site files are not taken for a rendered page's requests
