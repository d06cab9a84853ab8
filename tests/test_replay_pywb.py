"""The crawl's WARC files replay in pywb: a page, a redirect and a revisit, as pywb serves them.

pywb pins libraries webtrawl needs newer (redis 2), so it lives in a virtualenv of its own, made on first
use in `.venv-pywb` (or `$WEBTRAWL_PYWB_VENV`) and kept for later runs.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.crawls import connect, fast_config
from tests.sites import SiteServer
from webtrawl import Crawler
from webtrawl.config import RevisitConfig

pytestmark = pytest.mark.slow

VENV = Path(os.environ.get("WEBTRAWL_PYWB_VENV", Path(__file__).parents[1] / ".venv-pywb"))
PYWB = "pywb==2.10.0"


@pytest.fixture(scope="module")
def pywb_bin() -> Path:
    """The bin directory of a virtualenv with pywb, made when missing."""
    bin_dir = VENV / "bin"
    if not (bin_dir / "wayback").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(bin_dir / "pip"), "install", "-q", PYWB], check=True, timeout=900)
    return bin_dir


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    opener = urllib.request.build_opener(_NoRedirects)
    try:
        with opener.open(url, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:  # 3xx and 4xx come back as errors without following
        return error.code, dict(error.headers), error.read()


@pytest.fixture
def wayback(pywb_bin: Path, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A pywb collection directory and the replay server's URL of collection `crawl`."""
    root = tmp_path / "pywb"
    root.mkdir()
    subprocess.run([str(pywb_bin / "wb-manager"), "init", "crawl"], cwd=root, check=True, capture_output=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    yield root, f"http://127.0.0.1:{port}/crawl"
    # the server is started by the test once the WARC files are added (see `serve`)


def serve(pywb_bin: Path, root: Path, url: str) -> subprocess.Popen[bytes]:
    port = url.split(":")[2].split("/")[0]
    server = subprocess.Popen(
        [str(pywb_bin / "wayback"), "-p", port, "-b", "127.0.0.1"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):  # it imports gevent and the collection's index first
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", int(port))) == 0:
                return server
        if server.poll() is not None:
            raise RuntimeError("pywb's wayback server exited")
        time.sleep(0.1)
    server.kill()
    raise RuntimeError("pywb's wayback server did not start")


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
