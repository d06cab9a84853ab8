"""Crash safety: a crawl killed at any moment resumes and loses nothing.

After each kill the test notes which URLs were in flight, i.e. requested but not committed (only those
may be fetched twice), then resumes;
at the end coverage is complete, every WARC file validates, and index and archive agree.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.crawls import check_warcs, fetched_depths, path_of, request_counts
from tests.sites import SiteServer
from tests.test_cli import webtrawl

pytestmark = pytest.mark.slow

RETRIED = "/broken/"


def crawl_args(server: SiteServer, out: Path) -> list[str]:
    return [
        "crawl",
        server.url,
        "--out",
        str(out),
        "--max-depth",
        str(server.site.deepest),
        "--delay",
        "0",
        "--per-host",
        "4",
        "--concurrency",
        "8",
        "--warc-size",
        "30000",
        "--retries",
        "1",
        "-q",
    ]


def uncommitted_paths(server: SiteServer, out: Path) -> set[str]:
    """URLs a killed crawl had requested without committing their result: the only ones it may fetch again."""
    conn = sqlite3.connect(out / "crawl.db")  # read-write: the WAL of a killed process may need recovery
    try:
        # A crawl killed while it started (a slow machine) may not have written its schema yet.
        created = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'captures'").fetchone() is not None
        committed = {path_of(url) for (url,) in conn.execute("SELECT url FROM captures")} if created else set()
    finally:
        conn.close()
    return set(request_counts(server.log)) - committed


def assert_complete(server: SiteServer, out: Path, may_repeat: set[str]) -> None:
    expected = server.site.expect(max_depth=server.site.deepest)
    assert fetched_depths(out) == expected.fetched
    repeated = {path for path, n in request_counts(server.log).items() if n > 1}
    assert repeated <= may_repeat | {RETRIED}
    check_warcs(out)


@pytest.mark.parametrize("point", ["warc-mid-record:40", "warc-rotation:3", "before-commit:3", "after-commit:5"])
async def test_named_crash_point_then_resume(site_server: SiteServer, tmp_path: Path, point: str) -> None:
    code, _out, err = await webtrawl(*crawl_args(site_server, tmp_path), env={"WEBTRAWL_CRASH_AT": point})
    assert code == -signal.SIGKILL, err
    may_repeat = uncommitted_paths(site_server, tmp_path)
    code, out, err = await webtrawl(*crawl_args(site_server, tmp_path))
    assert code == 0, err
    assert out.startswith("finished")
    assert_complete(site_server, tmp_path, may_repeat)


async def test_random_kill_9_then_resume(site_server: SiteServer, tmp_path: Path) -> None:
    rng = random.Random(20261130)
    args = [*crawl_args(site_server, tmp_path), "--delay", "0.02"]  # 300 pages: 6 s at least, whatever the speed
    may_repeat: set[str] = set()
    killed = 0
    for _ in range(4):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "webtrawl", *args, stdout=asyncio.subprocess.DEVNULL, env=os.environ.copy()
        )
        await asyncio.sleep(rng.uniform(0.8, 2.0))
        if proc.returncode is None:
            proc.kill()
        killed += await proc.wait() == -signal.SIGKILL
        may_repeat |= uncommitted_paths(site_server, tmp_path)
    assert killed >= 2, "the kills came too late to test anything"
    code, _out, err = await webtrawl(*crawl_args(site_server, tmp_path))
    assert code == 0, err
    assert_complete(site_server, tmp_path, may_repeat)
