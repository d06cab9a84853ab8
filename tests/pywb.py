"""pywb for the tests that replay a crawl's WARC files in it (`tests/test_replay_pywb.py`, the rendered pages'
POSTs of `tests/render/test_page_requests.py`).

pywb pins libraries webtrawl needs newer (redis 2), so it lives in a virtualenv of its own, made on first
use in `.venv-pywb` (or `$WEBTRAWL_PYWB_VENV`) and kept for later runs.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

VENV = Path(os.environ.get("WEBTRAWL_PYWB_VENV", Path(__file__).parents[1] / ".venv-pywb"))
PYWB = "pywb==2.10.0"


def pywb_venv() -> Path:
    """The bin directory of a virtualenv with pywb, made when missing."""
    bin_dir = VENV / "bin"
    if not (bin_dir / "wayback").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(bin_dir / "pip"), "install", "-q", PYWB], check=True, timeout=900)
    return bin_dir


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def get(
    url: str, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """`url`'s answer, redirects not followed; a POST of `data` when given."""
    opener = urllib.request.build_opener(_NoRedirects)
    try:
        with opener.open(urllib.request.Request(url, data=data, headers=headers or {}), timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:  # 3xx and 4xx come back as errors without following
        return error.code, dict(error.headers), error.read()


def collection(pywb_bin: Path, tmp_path: Path) -> tuple[Path, str]:
    """A new pywb collection directory and the replay server's URL of collection `crawl` (the server is
    started by `serve` once the WARC files are added)."""
    root = tmp_path / "pywb"
    root.mkdir()
    subprocess.run([str(pywb_bin / "wb-manager"), "init", "crawl"], cwd=root, check=True, capture_output=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return root, f"http://127.0.0.1:{port}/crawl"


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


def add_and_serve(pywb_bin: Path, root: Path, url: str, warcs: list[Path]) -> subprocess.Popen[bytes]:
    """Add `warcs` to the collection (pywb indexes them) and start its replay server."""
    command = [str(pywb_bin / "wb-manager"), "add", "crawl", *map(str, warcs)]
    subprocess.run(command, cwd=root, check=True, capture_output=True)
    return serve(pywb_bin, root, url)
