"""A distributed crawl on a 3-master Redis Cluster, end to end: its partitions and global keys live on
different masters, so every pipeline, script and stream read must be routed by its key."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import redis

from tests.cluster.processes import crawl_rows, unfinished
from tests.redis_servers import RedisCluster
from tests.sites import SiteServer

SITES = 4
PAGES = 40


@pytest.mark.slow
async def test_a_coordinator_alone_crawls_every_page_once_on_a_cluster(
    redis_cluster: RedisCluster, redis_cluster_url: str, tmp_path: Path
) -> None:
    async with AsyncExitStack() as stack:
        servers = [
            await stack.enter_async_context(SiteServer(pages=PAGES, seed=seed, calendar=False)) for seed in range(SITES)
        ]
        crawl = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "webtrawl", "crawl", *(server.url for server in servers),
            "--redis", redis_cluster_url, "--name", "on-cluster", "--out", str(tmp_path), "--delay", "0",
            "--retries", "1", "-q",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stdout, stderr = await asyncio.wait_for(crawl.communicate(), timeout=120)
        assert crawl.returncode == 0, stderr.decode()
        assert stdout.decode().startswith("finished: "), stdout.decode()
    for url in redis_cluster.urls:  # the crawl's keys were spread over every master
        with redis.Redis.from_url(url) as master:
            assert master.dbsize() > 0

    fetched = crawl_rows(tmp_path, "SELECT url, status FROM captures WHERE crawl_id = ?", "on-cluster")
    captures = Counter(url for url, _status in fetched)
    not_ended = unfinished(tmp_path, "on-cluster")
    retried = {url for url, status in fetched if status is not None and status >= 500}
    assert set(captures) == {server.site.url(path) for server in servers for path in server.site.expected_fetched()}
    assert not_ended == 0
    assert all(n == 1 for url, n in captures.items() if url not in retried)  # only 5xx pages are asked again
    asked = Counter(
        server.site.url(r.path)
        for server in servers
        for r in server.log
        if r.path != "/robots.txt" and "sitemap" not in r.path
    )
    assert asked == captures  # every request the sites saw has its capture, none counted twice
