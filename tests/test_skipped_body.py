"""A response whose body is not downloaded (not a page, without --fetch-non-html): the archive keeps what was
received without posing as a copy, and the index says the body was not downloaded."""

from __future__ import annotations

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

REPORT = b"%PDF-1.7 " + b"x" * 5852  # 5,861 bytes


@pytest.fixture
async def site() -> AsyncIterator[str]:
    async def home(_request: web.Request) -> web.Response:
        return web.Response(text='<a href="/report">r</a> <a href="/go">g</a>', content_type="text/html")

    async def report(_request: web.Request) -> web.Response:
        return web.Response(body=REPORT, content_type="application/pdf")

    async def go(_request: web.Request) -> web.Response:  # a redirect whose body is not a page either
        return web.Response(status=302, text="moved", headers={"Location": "/"})

    app = web.Application()
    app.router.add_get("/", home)
    app.router.add_get("/report", report)
    app.router.add_get("/go", go)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def records(out: Path) -> list[tuple[str, str, bytes, dict[str, str]]]:
    found = []
    for file in sorted((out / "warc").glob("*.warc.gz")):
        with file.open("rb") as stream:
            for record in ArchiveIterator(stream):
                headers = dict(record.rec_headers.headers)
                found.append((record.rec_type, headers.get("WARC-Target-URI", ""), record.raw_stream.read(), headers))
    return found


async def test_a_skipped_body_is_a_metadata_record_and_the_index_says_not_downloaded(site: str, tmp_path: Path) -> None:
    await Crawler(fast_config(site, tmp_path)).run()
    assert check_warcs(tmp_path) >= 2  # the page and the redirect; every digest checks out

    kinds = [(kind, headers) for kind, url, _block, headers in records(tmp_path) if url == f"{site}/report"]
    assert sorted(kind for kind, _headers in kinds) == ["metadata", "request"]
    (block,) = [block for kind, url, block, _h in records(tmp_path) if kind == "metadata" and url == f"{site}/report"]
    fields = block.decode().splitlines()
    assert fields[0].startswith("body-not-downloaded: not an HTML page")
    assert fields[1] == "http-status-line: HTTP/1.1 200 OK"
    assert "http-header: Content-Length: 5861" in fields and "http-header: Content-Type: application/pdf" in fields

    redirect = [headers for kind, url, _b, headers in records(tmp_path) if kind == "response" and url == f"{site}/go"]
    assert [headers.get("WARC-Truncated") for headers in redirect] == ["unspecified"]  # still replays as a redirect

    rows = io.StringIO()
    export([source_of(connect(tmp_path), "default")], "jsonl", rows)
    by_url = {row["url"]: row for row in map(json.loads, rows.getvalue().splitlines())}
    assert (by_url[f"{site}/report"]["status"], by_url[f"{site}/report"]["size"]) == (200, 0)
    assert by_url[f"{site}/report"]["truncated"] == "not-downloaded" and by_url[f"{site}/report"]["warc_file"] is None
    assert by_url[f"{site}/go"]["truncated"] == "not-downloaded" and by_url[f"{site}/go"]["warc_file"]

    cdxj = io.StringIO()
    export([source_of(connect(tmp_path), "default")], "cdxj", cdxj)
    assert "/report" not in cdxj.getvalue()
    warcs = [str(path) for path in sorted((tmp_path / "warc").glob("*.warc.gz"))]
    indexed = subprocess.run(
        [sys.executable, "-m", "cdxj_indexer.main", *warcs], capture_output=True, text=True, check=True
    ).stdout
    assert "/report" not in indexed and "/go" in indexed  # replay tools find no copy of the file to serve

    code, _out, err = await webtrawl("show", str(tmp_path), f"{site}/report")
    assert code == 2 and "body not downloaded" in err
