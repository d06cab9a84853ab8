"""The crawl's WARC files replay in pywb (`tests/pywb.py`): a page, a redirect and a revisit, as pywb serves
them."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.crawls import connect, fast_config
from tests.pywb import get, serve
from tests.sites import SiteServer
from webtrawl import Crawler
from webtrawl.config import RevisitConfig

pytestmark = pytest.mark.slow


def payload(out: Path, warc_file: str, offset: int) -> bytes:
    with (out / "warc" / warc_file).open("rb") as stream:
        stream.seek(offset)
        return next(iter(ArchiveIterator(stream))).content_stream().read()


def stamp(fetched_at: float) -> str:
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(fetched_at))


async def test_a_page_a_redirect_and_a_revisit_replay_in_pywb(
    site_server: SiteServer, tmp_path: Path, pywb_bin: Path, wayback: tuple[Path, str]
) -> None:
    out = tmp_path / "crawl"
    revisit = RevisitConfig(recrawl=True, min_interval=0.5, max_interval=100)
    config = fast_config(site_server.url, out, max_depth=site_server.site.deepest, revisit=revisit)
    await Crawler(config).run()
    await asyncio.sleep(1.5)  # the re-crawl's records get a later second than the first crawl's
    await Crawler(config).run()
    conn = connect(out)
    page, page_at, file, offset = conn.execute(
        "SELECT url, fetched_at, warc_file, warc_offset FROM captures "
        "WHERE status = 200 AND content_type = 'text/html' AND unchanged = 0 ORDER BY id LIMIT 1"
    ).fetchone()
    moved, moved_at, target = conn.execute(
        "SELECT url, fetched_at, location FROM captures WHERE status IN (301, 302) AND location LIKE ? "
        "ORDER BY id LIMIT 1",
        (f"{site_server.url.rstrip('/')}/%",),
    ).fetchone()
    again, again_at = conn.execute(
        "SELECT url, fetched_at FROM captures WHERE url = ? AND unchanged = 1 ORDER BY id DESC LIMIT 1", (page,)
    ).fetchone()

    root, replay = wayback
    warcs = sorted(str(path) for path in (out / "warc").glob("*.warc.gz"))
    subprocess.run([str(pywb_bin / "wb-manager"), "add", "crawl", *warcs], cwd=root, check=True, capture_output=True)
    server = serve(pywb_bin, root, replay)
    try:
        status, _headers, body = await asyncio.to_thread(get, f"{replay}/{stamp(page_at)}id_/{page}")
        assert status == 200 and body == payload(out, file, offset)

        status, headers, _body = await asyncio.to_thread(get, f"{replay}/{stamp(moved_at)}id_/{moved}")
        # pywb answers an archived redirect with one of its own (307) to the replay of the archived target
        assert 300 <= status < 400 and headers["Location"].endswith(f"id_/{target}")

        status, _headers, body = await asyncio.to_thread(get, f"{replay}/{stamp(again_at)}id_/{again}")
        assert status == 200 and body == payload(out, file, offset)  # the revisit serves the first payload
    finally:
        server.kill()
        server.wait()
