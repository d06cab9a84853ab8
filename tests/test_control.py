"""`webtrawl control` on a crawl directory: a running embedded crawl pauses, resumes and stops, and says so."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.sites import SiteServer
from tests.test_cli import one_line_error, webtrawl

pytestmark = pytest.mark.slow


async def wait_for_requests(server: SiteServer, count: int) -> None:
    async with asyncio.timeout(30):
        while len(server.log) < count:
            await asyncio.sleep(0.05)


async def test_control_pauses_resumes_and_stops_a_crawl_in_its_directory(tmp_path: Path) -> None:
    async with SiteServer(pages=300, calendar=False, delay=0.05) as server:
        crawl = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "webtrawl", "crawl", server.url, "--out", str(tmp_path), "--name", "bar",
            "--delay", "0", "--per-host", "2", "-q",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        await wait_for_requests(server, 10)

        code, out, err = await webtrawl("control", "pause", str(tmp_path))  # the directory's only crawl: no --name
        assert code == 0, err
        assert out == f"crawl 'bar' in {tmp_path}: paused\n"
        await asyncio.sleep(1)  # what was in flight when it obeyed ends (each response takes 0.05 s)
        paused_at = len(server.log)
        await asyncio.sleep(2)
        assert len(server.log) == paused_at, "nothing is fetched while paused"

        code, out, err = await webtrawl("control", "resume", str(tmp_path), "--name", "bar")
        assert (code, out) == (0, f"crawl 'bar' in {tmp_path}: running\n"), err
        await wait_for_requests(server, paused_at + 5)

        code, out, err = await webtrawl("control", "stop", str(tmp_path))
        assert code == 0, err
        assert out in (f"crawl 'bar' in {tmp_path}: stopping\n", f"crawl 'bar' in {tmp_path}: stopped\n")
        stdout, stderr = await asyncio.wait_for(crawl.communicate(), 60)
        assert crawl.returncode == 0, stderr
        assert stdout.decode().startswith("stopped: "), stdout

    code, _out, err = await webtrawl("control", "pause", str(tmp_path))
    assert code == 2
    one_line_error(err, f"crawl 'bar' in {tmp_path} is not running")
    code, _out, err = await webtrawl("control", "pause", str(tmp_path), "--name", "foo")
    assert code == 2
    one_line_error(err, "no crawl named 'foo' here (crawls: bar)")
    code, out, err = await webtrawl("export", str(tmp_path))  # no --name either
    assert code == 0, err
    assert out.count("\n") > 10
    code, out, err = await webtrawl("status", str(tmp_path))
    assert code == 0, err
    assert out.startswith(f"crawl 'bar' in {tmp_path}")
