"""One big site spread over every node (`--partition-by url`): the work is shared, the site's limits hold
across the cluster, and its robots.txt is fetched once."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.cluster.processes import NAME, Process, crawl_rows, wait_for_crawl, worker
from tests.redis_servers import RedisServer
from tests.sites import SiteServer

PAGES = 2000
PER_HOST = 3
DELAY = 0.005
"""Seconds between request starts on the site, across the cluster: at most 200 requests a second."""
NODES = 3


def serve(pages: int, ready: threading.Event, stop: threading.Event, servers: list[SiteServer]) -> None:
    async def run() -> None:
        async with SiteServer(pages=pages, calendar=False) as server:
            servers.append(server)
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    asyncio.run(run())


@pytest.mark.slow
def test_one_site_is_crawled_by_every_node_within_its_limits(tmp_path: Path) -> None:
    ready, stop, servers = threading.Event(), threading.Event(), []
    thread = threading.Thread(target=serve, args=(PAGES, ready, stop, servers), daemon=True)
    thread.start()
    assert ready.wait(20)
    site = servers[0]
    try:
        with RedisServer() as server:
            coord = Process(
                tmp_path / "logs", "coordinator",
                "crawl", site.url, "--redis", server.url, "--name", NAME, "--out", tmp_path / "coord",
                "--partition-by", "url", "--per-host", PER_HOST, "--delay", DELAY, "--concurrency", "8",
                "--partitions", "16", "--lease-ttl", "3", "--retries", "1", "-q",
            )  # fmt: skip
            wait_for_crawl(server.url)
            workers = [worker(server.url, tmp_path / f"w{i}") for i in range(NODES - 1)]
            code, _out, err = coord.finish()
            assert code == 0, err
            for process in workers:
                assert process.finish()[0] == 0
        log = list(site.log)
        in_flight = max(site.max_in_flight.values())
    finally:
        stop.set()
        thread.join(10)

    fetched = crawl_rows(tmp_path / "coord", "SELECT url, node FROM captures WHERE crawl_id = ?")
    captured = Counter(url for url, _node in fetched)
    assert set(captured) == {site.site.url(path) for path in site.site.expected_fetched()}
    per_node = Counter(node for _url, node in fetched)
    assert len(per_node) == NODES
    assert min(per_node.values()) >= len(captured) / (2 * NODES), per_node
    assert [r.path for r in log].count("/robots.txt") == 1  # fetched by one node, shared with the others
    assert in_flight <= PER_HOST
    starts = sorted(r.time for r in log)
    window = 1.0
    busiest = max(sum(1 for t in starts[i:] if t < start + window) for i, start in enumerate(starts))
    assert busiest <= window / DELAY + PER_HOST, busiest  # rate × window + a burst
