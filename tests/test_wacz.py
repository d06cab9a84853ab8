"""`webtrawl export DIR --format wacz`: the crawl as a WACZ package that Webrecorder's validator accepts."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.crawls import connect, fast_config
from tests.sites import SiteServer
from tests.test_cli import webtrawl
from webtrawl import Crawler
from webtrawl.errors import StoreError
from webtrawl.store.shards import source_of
from webtrawl.store.wacz import export_wacz


async def crawled(server: SiteServer, out: Path) -> sqlite3.Connection:
    await Crawler(fast_config(server.url, out, max_depth=2)).run()
    return connect(out)


async def test_the_package_is_valid_and_holds_the_crawl(site_server: SiteServer, tmp_path: Path) -> None:
    conn = await crawled(site_server, tmp_path / "crawl")
    wacz = tmp_path / "crawl.wacz"
    listed = export_wacz([source_of(conn, "default")], "default", wacz)

    checked = subprocess.run(
        [sys.executable, "-m", "wacz", "validate", "-f", str(wacz)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0 and "Validation succeeded" in checked.stdout, checked.stdout
    html = {
        url
        for (url,) in conn.execute(
            "SELECT url FROM captures WHERE status = 200 AND content_type = 'text/html' AND warc_file IS NOT NULL"
        )
    }
    with zipfile.ZipFile(wacz) as package:
        names = package.namelist()
        pages = [json.loads(line) for line in package.read("pages/pages.jsonl").decode().splitlines()]
        index = gzip.decompress(package.read("indexes/index.cdx.gz")).decode().splitlines()
    warcs = {name for (name,) in conn.execute("SELECT DISTINCT warc_file FROM captures WHERE warc_file IS NOT NULL")}
    assert {name.removeprefix("archive/") for name in names if name.startswith("archive/")} == warcs
    assert pages[0]["format"] == "json-pages-1.0"
    assert sorted(page["url"] for page in pages[1:]) == sorted(html) and listed == len(html)
    indexed = {json.loads(line.split(" ", 2)[2])["url"] for line in index}
    assert html <= indexed


async def test_a_missing_warc_file_is_named(site_server: SiteServer, tmp_path: Path) -> None:
    conn = await crawled(site_server, tmp_path / "crawl")
    (first,) = conn.execute("SELECT MIN(warc_file) FROM captures").fetchone()
    (tmp_path / "crawl" / "warc" / first).unlink()
    with pytest.raises(StoreError, match=f"not in .*first: {first}"):
        export_wacz([source_of(conn, "default")], "default", tmp_path / "crawl.wacz")


async def test_the_command_writes_the_package_and_says_what_it_holds(site_server: SiteServer, tmp_path: Path) -> None:
    await crawled(site_server, tmp_path / "crawl")
    code, _out, err = await webtrawl(
        "export", str(tmp_path / "crawl"), "--format", "wacz", "-o", str(tmp_path / "c.wacz")
    )
    assert code == 0 and err.startswith(f"wrote {tmp_path / 'c.wacz'}: ") and "pages listed" in err
    assert zipfile.is_zipfile(tmp_path / "c.wacz")
    code, _out, err = await webtrawl("export", str(tmp_path / "crawl"), "--format", "wacz")
    assert code == 2 and "give -o FILE.wacz" in err and "Traceback" not in err


async def test_only_what_the_crawl_committed_is_packaged(site_server: SiteServer, tmp_path: Path) -> None:
    conn = await crawled(site_server, tmp_path / "crawl")
    (first,) = conn.execute("SELECT MIN(warc_file) FROM captures").fetchone()
    with (tmp_path / "crawl" / "warc" / first).open("ab") as warc:  # as a crawl killed mid-record leaves it
        warc.write(b"\x1f\x8b\x08\x00" + b"half a record" * 200)
    wacz = tmp_path / "crawl.wacz"
    export_wacz([source_of(conn, "default")], "default", wacz)
    checked = subprocess.run(
        [sys.executable, "-m", "wacz", "validate", "-f", str(wacz)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0 and "Validation succeeded" in checked.stdout, checked.stdout


# The wacz library leaves a spooled temporary file of its own unclosed when a WARC file is damaged.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_damaged_warc_file_is_one_error_and_leaves_no_package(site_server: SiteServer, tmp_path: Path) -> None:
    conn = await crawled(site_server, tmp_path / "crawl")
    (first, offset, length) = conn.execute(
        "SELECT warc_file, warc_offset, warc_length FROM captures WHERE warc_file IS NOT NULL ORDER BY id LIMIT 1"
    ).fetchone()
    with (tmp_path / "crawl" / "warc" / first).open("r+b") as warc:
        warc.seek(offset + 10)  # past the gzip header: the record's compressed bytes
        warc.write(bytes(range(256)) * (length // 256))
    with pytest.raises(StoreError, match="could not package the crawl"):
        export_wacz([source_of(conn, "default")], "default", tmp_path / "crawl.wacz")
    assert list(tmp_path.glob("crawl.wacz*")) == []
