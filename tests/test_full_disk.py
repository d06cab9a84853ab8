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
from warcio.archiveiterator import ArchiveIterator

from tests.crawls import check_warcs, fetched_depths
from tests.sites import SiteServer
from tests.test_cli import one_line_error, webtrawl
from tests.test_warc import outcome
from webtrawl.errors import StoreError
from webtrawl.store.warc import WarcWriter


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
    for warc in (out / "warc").glob("*.warc.gz"):  # valid as they are, before any resume cuts them back
        subprocess.run(["gzip", "-t", str(warc)], check=True)

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


def test_a_write_that_fills_the_disk_leaves_only_whole_records(small_disk: Path) -> None:
    """No crawl may ever run again in this directory (a node whose machine is gone): its files must be valid
    as they are, not only once a resumed crawl cuts them back."""
    writer = WarcWriter(small_disk / "warc", prefix="full", max_size=10**9, software="test", committed={})
    body = os.urandom(20_000)  # does not compress: the disk fills within a few dozen records
    written = 0
    with pytest.raises(StoreError, match="full"):
        for i in range(1_000):
            writer.write(outcome(f"http://a.test/{i}", body=body))
            written += 1
            if i % 3 == 0:
                writer.flush()
    writer.close()
    [path] = (small_disk / "warc").iterdir()
    subprocess.run(["gzip", "-t", str(path)], check=True)
    with path.open("rb") as stream:
        records = [(r.rec_type, r.content_stream().read()) for r in ArchiveIterator(stream, check_digests="raise")]
    responses = [block for kind, block in records if kind == "response"]
    assert 0 < len(responses) <= written
    assert all(block.endswith(body) for block in responses)
    assert [kind for kind, _block in records] == ["warcinfo"] + ["response", "request"] * len(responses)
