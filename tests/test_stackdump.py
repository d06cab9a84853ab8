"""`kill -USR1` on a running crawl writes its threads' and tasks' stacks to stderr, and the crawl goes on."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import time
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer

from webtrawl import stackdump

LIMIT = 30.0


async def test_sigusr1_writes_where_a_crawl_waits_and_the_crawl_goes_on(tmp_path: Path) -> None:
    asked, release = asyncio.Event(), asyncio.Event()

    async def home(request: web.Request) -> web.Response:
        return web.Response(text='<a href="/slow">slow</a>', content_type="text/html")

    async def slow(request: web.Request) -> web.Response:
        asked.set()
        await release.wait()
        return web.Response(text="<title>at last</title>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", home)
    app.router.add_get("/slow", slow)
    async with TestServer(app, host="127.0.0.1") as server:
        home_url, slow_url = str(server.make_url("/")), str(server.make_url("/slow"))
        err_path = tmp_path / "err"
        with err_path.open("w") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "webtrawl", "crawl", home_url, "--out", str(tmp_path / "out"),
                "--delay", "0", "--ignore-robots", "--no-sitemaps", "-q",
                stderr=err, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        try:
            await asyncio.wait_for(asked.wait(), LIMIT)
            proc.send_signal(stackdump.SIGNAL)
            deadline = time.monotonic() + LIMIT
            while "asyncio task(s)" not in err_path.read_text():
                assert time.monotonic() < deadline, err_path.read_text()
                await asyncio.sleep(0.1)
            release.set()
            assert await asyncio.wait_for(proc.wait(), LIMIT) == 0, err_path.read_text()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    dump = err_path.read_text()
    assert stackdump.HEADER in dump
    assert "Thread 0x" in dump and "Current thread" in dump  # every thread, from faulthandler
    assert ", in fetch\n" in dump, "the task waiting on the slow page is among the stacks, down to the fetch"
    with sqlite3.connect(tmp_path / "out" / "crawl.db") as db:
        states = dict(db.execute("SELECT url, state FROM urls"))
    assert states == {home_url: 2, slow_url: 2}, "both pages done"
