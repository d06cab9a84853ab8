"""A full disk while crawling: the crawl stops with a clear message and later resumes without loss.

The crawl directory is a small tmpfs (this needs root, as CI and the development machines run); after the
failure the tmpfs is enlarged, as a user would free space, and the same command resumes.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crawls import check_warcs, fetched_depths
from tests.sites import SiteServer
from tests.test_cli import one_line_error, webtrawl


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs and must run as root (as CI does)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


async def test_full_disk_stops_cleanly_then_resumes(site_server: SiteServer, small_disk: Path) -> None:
    site = site_server.site
    out = small_disk / "crawl"
    args = [
        "crawl",
        site_server.url,
        "--out",
        str(out),
        "--max-depth",
        str(site.deepest),
        "--delay",
        "0",
        "--per-host",
        "4",
        "-q",
    ]
    code, _out, err = await webtrawl(*args)
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("webtrawl: error:")]
    one_line_error(lines[0], "full", "run the same command again")
    # The disk filled once the crawl was under way, not while its database was being created.
    assert any(warc.stat().st_size for warc in (out / "warc").glob("*.warc.gz"))
    assert "Traceback" not in err

    subprocess.run(["mount", "-o", "remount,size=50m", str(small_disk)], check=True)
    code, out_text, err = await webtrawl(*args)
    assert code == 0, err
    assert out_text.startswith("finished")
    assert fetched_depths(out) == site.expect(max_depth=site.deepest).fetched
    check_warcs(out)


async def test_a_disk_too_full_for_the_database_says_what_to_do(site_server: SiteServer, small_disk: Path) -> None:
    subprocess.run(["mount", "-o", "remount,size=120k", str(small_disk)], check=True)
    code, _out, err = await webtrawl("crawl", site_server.url, "--out", str(small_disk / "crawl"), "-q")
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("webtrawl: error:")]
    one_line_error(lines[0], "full", "run the same command again")
    assert "Traceback" not in err
