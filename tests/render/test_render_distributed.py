"""A distributed rendered crawl: `--render` is part of the crawl's settings in Redis, and each of two workers
renders with its own browser; the coordinator's index holds what the scripts wrote and what was archived."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.cluster.processes import NAME, Process, crawl_rows, wait_for_crawl, worker
from tests.crawls import path_of
from tests.sites.jsapp import JsSite

pytestmark = pytest.mark.slow


async def test_two_workers_render_one_crawl(redis_url: str, tmp_path: Path) -> None:
    async with JsSite() as site:
        allow = site.origin.replace(".", r"\.") + r"/(article/\d+)?$"
        coordinator = Process(
            tmp_path / "logs", "coordinator",
            "crawl", site.url, "--redis", redis_url, "--name", NAME, "--out", tmp_path / "coordinator",
            "--no-fetch", "--partition-by", "url", "--partitions", "4", "--lease-ttl", "3", "--delay", "0",
            "--render", "--render-timeout", "5", "--allow", allow, "-q",
        )  # fmt: skip
        await asyncio.to_thread(wait_for_crawl, redis_url)
        workers = [worker(redis_url, tmp_path / f"node-{n}") for n in (1, 2)]
        for process in (coordinator, *workers):
            code, _out, err = await asyncio.to_thread(process.finish, 180)
            assert code == 0, err
    out = tmp_path / "coordinator"  # read as its readers read it: every worker's shard
    titles = {
        path_of(url): title for url, title in crawl_rows(out, "SELECT url, title FROM captures WHERE crawl_id = ?")
    }
    assert titles == {"/": "JS Home", **{f"/article/{n}": f"Article {n}" for n in range(1, 6)}}
    nodes = {node for (node,) in crawl_rows(out, "SELECT node FROM resources WHERE crawl_id = ?")}
    assert len(nodes) == 2, "both workers rendered pages and their records are in their shards"
    doms = {
        path_of(url.removeprefix("urn:dom:"))
        for (url,) in crawl_rows(out, "SELECT url FROM resources WHERE crawl_id = ? AND url LIKE 'urn:dom:%'")
    }
    assert doms == set(titles)
    agents = {request.user_agent for request in site.requests}
    assert len(agents) == 1 and agents.pop().startswith("webtrawl/")
