"""A distributed crawl end to end: a coordinator and workers as real processes, a real Redis, real sites.

Twenty test sites (each its own host key: 127.0.0.1 on its own port) are crawled by a coordinator that
fetches too and two workers; the coordinator's `crawl.db` must end up as an embedded crawl's would.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.redis_servers import RedisServer
from tests.sites import SiteServer

SITES = 20
PAGES = 110
PER_HOST = 2
NAME = "dist"


class Sites:
    """`SITES` test sites served from a thread."""

    def __init__(self) -> None:
        self.servers: list[SiteServer] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)

    async def _serve(self) -> None:
        for seed in range(SITES):
            self.servers.append(await SiteServer(pages=PAGES, seed=seed, calendar=False).start())
        self._ready.set()
        while not self._stop.is_set():
            await asyncio.sleep(0.05)
        for server in self.servers:
            await server.aclose()

    def __enter__(self) -> Sites:
        self._thread.start()
        assert self._ready.wait(20)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


@pytest.fixture(scope="module")
def sites() -> Iterator[Sites]:
    with Sites() as served:
        yield served


def webtrawl(*args: str | Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "webtrawl", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(process: subprocess.Popen[str], timeout: float = 180) -> tuple[int, str, str]:
    stdout, stderr = process.communicate(timeout=timeout)
    return process.returncode, stdout, stderr


def wait_for_crawl(url: str, name: str) -> None:
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 20
    while not client.exists(f"{{{name}:meta}}"):
        assert time.monotonic() < deadline, "the coordinator did not create the crawl"
        time.sleep(0.1)
    client.close()


def coordinator(sites: Sites, url: str, out: Path, *extra: str) -> subprocess.Popen[str]:
    seeds = [server.url for server in sites.servers]
    return webtrawl(
        "crawl", *seeds, "--redis", url, "--name", NAME, "--out", out, "--delay", "0", "--per-host", PER_HOST,
        "--concurrency", "16", "--partitions", "16", "--lease-ttl", "5", "-q", *extra,
    )  # fmt: skip


@pytest.mark.slow
def test_a_coordinator_and_two_workers_crawl_every_page_once(sites: Sites, tmp_path: Path) -> None:
    with RedisServer() as server:
        coord = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_crawl(server.url, NAME)
        workers = [
            webtrawl("worker", "--redis", server.url, "--name", NAME, "--out", tmp_path / f"w{i}", "-q")
            for i in range(2)
        ]
        code, stdout, stderr = finish(coord)
        assert code == 0, stderr
        assert stdout.startswith("finished: "), stdout
        results = [finish(worker) for worker in workers]
        for code, _out, err in results:
            assert code == 0, err

    db = sqlite3.connect(tmp_path / "coord" / "crawl.db")
    expected = {server.site.url(path) for server in sites.servers for path in server.site.expected_fetched()}
    assert db.execute("SELECT COUNT(*) FROM urls WHERE state NOT IN (2, 3)").fetchone() == (0,)
    captures = dict(db.execute("SELECT url, COUNT(*) FROM captures GROUP BY url").fetchall())
    assert set(captures) == expected
    once = {url for (url,) in db.execute("SELECT url FROM captures WHERE status < 500")}
    assert all(captures[url] == 1 for url in once)  # fetched once: only 5xx pages are asked again
    for server in sites.servers:  # every request the sites saw has its capture, and no capture is counted twice
        asked = Counter(
            server.site.url(r.path) for r in server.log if r.path != "/robots.txt" and "sitemap" not in r.path
        )
        assert asked == {url: n for url, n in captures.items() if url.startswith(server.site.origin + "/")}
        assert max(server.max_in_flight.values()) <= PER_HOST
    nodes = {node for (node,) in db.execute("SELECT DISTINCT node FROM captures")}
    assert nodes == {"node-01", "node-02", "node-03"}  # every node got work
