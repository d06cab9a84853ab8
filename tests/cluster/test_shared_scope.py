"""A seed that redirects to another host brings that host in scope for the whole distributed crawl: every node,
a node that joins later, and the index the coordinator keeps (the usual `example.org` → `www.example.org`)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import redis
from aiohttp import web

from tests.cluster.processes import (
    NAME,
    Process,
    captures,
    crawl_rows,
    node_of,
    unfinished,
    wait_for_crawl,
    wait_for_done,
    worker,
)
from tests.redis_servers import RedisServer
from tests.sites import SiteServer
from webtrawl.cluster.coordinator import create_or_join
from webtrawl.cluster.frontier import RedisFrontier
from webtrawl.cluster.keys import Keys
from webtrawl.cluster.layout import Layout
from webtrawl.cluster.leases import Leases
from webtrawl.cluster.redisconn import connect
from webtrawl.cluster.scopehosts import SharedScope
from webtrawl.config import CrawlConfig, PolitenessConfig, ScopeConfig
from webtrawl.errors import CrawlGone
from webtrawl.fetch.robots import ALLOW_ALL
from webtrawl.politeness import Politeness
from webtrawl.scope import Scope
from webtrawl.urls import host_key

PAGES = 300
DELAY = 0.02
"""Seconds each page of the target site takes: the crawl lasts long enough for every node to take part."""
TARGET = "127.0.0.2"


class RedirectedSite:
    """A seed host on 127.0.0.1 whose `/` answers 301 to a generated site on 127.0.0.2, served from a thread."""

    def __init__(self) -> None:
        self.target: SiteServer
        self.seed = ""
        self.answer = threading.Event()
        """The seed's redirect waits for it: the test decides which nodes have joined before the redirect."""
        self._ready, self._stop = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)

    async def _serve(self) -> None:
        async with SiteServer(pages=PAGES, calendar=False, delay=DELAY, address=TARGET) as target:
            self.target = target

            async def redirect(request: web.Request) -> web.Response:
                if request.path == "/":
                    await asyncio.to_thread(self.answer.wait, 60)
                    raise web.HTTPMovedPermanently(target.url)
                raise web.HTTPNotFound()

            app = web.Application()
            app.router.add_get("/{tail:.*}", redirect)
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            self.seed = f"http://127.0.0.1:{runner.addresses[0][1]}/"
            self._ready.set()
            while not self._stop.is_set():
                await asyncio.sleep(0.05)
            await runner.cleanup()

    def __enter__(self) -> RedirectedSite:
        self._thread.start()
        assert self._ready.wait(20)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def expected(self) -> set[str]:
        return {self.target.site.url(path) for path in self.target.site.expected_fetched()}


def coordinator(site: RedirectedSite, url: str, out: Path, *extra: str) -> Process:
    return Process(
        out.parent / "logs", "coordinator",
        "crawl", site.seed, "--redis", url, "--name", NAME, "--out", out, "--allow-private", f"{TARGET}/32",
        "--delay", "0", "--per-host", "4", "--concurrency", "8", "--partitions", "16", "--lease-ttl", "3",
        "--retries", "1", "-q", *extra,
    )  # fmt: skip


def out_of_scope_on_target(out: Path, site: RedirectedSite) -> list[str]:
    """URLs of the redirect's target host the index records as dropped for being out of scope."""
    rows = crawl_rows(out, "SELECT url FROM dropped WHERE crawl_id = ? AND reason = 'out-of-scope'")
    return [url for (url,) in rows if url.startswith(site.target.site.origin + "/")]


def extra_hosts(out: Path) -> list[str]:
    """The hosts the crawl's shards say its scope gained."""
    rows = crawl_rows(out, "SELECT extra_hosts FROM crawls WHERE id = ?")
    return sorted({host for (hosts,) in rows for host in json.loads(hosts)})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("partition_by", "sitemaps"),
    [("host", "--sitemaps"), ("url", "--sitemaps"), ("url", "--no-sitemaps")],
)
def test_every_node_crawls_the_host_a_seed_redirected_to(tmp_path: Path, partition_by: str, sitemaps: str) -> None:
    """A node learns the new host before it reads the host's sitemaps, or else before it drops a link to it."""
    with RedirectedSite() as site, RedisServer() as server:
        coord = coordinator(site, server.url, tmp_path / "coord", "--partition-by", partition_by, sitemaps)
        wait_for_crawl(server.url)
        workers = [worker(server.url, tmp_path / f"w{i}", "--concurrency", "4") for i in range(2)]
        for process in workers:
            node_of(server.url, process.pid)  # joined, and read the crawl's hosts: none yet
        site.answer.set()  # every node learns of the new host as the crawl goes
        code, _out, err = coord.finish()
        assert code == 0, err
        for process in workers:
            assert process.finish()[0] == 0
        gathered = captures(tmp_path / "coord")
        expected = site.expected()
    assert expected <= set(gathered), f"{len(expected - set(gathered))} of {len(expected)} pages missing"
    assert out_of_scope_on_target(tmp_path / "coord", site) == []
    assert unfinished(tmp_path / "coord") == 0
    assert extra_hosts(tmp_path / "coord") == [host_key(site.target.url)]


@pytest.mark.slow
def test_a_worker_that_joins_after_the_redirect_has_the_new_host_in_scope(tmp_path: Path) -> None:
    """The one node that followed the redirect leaves; a node that joins afterwards crawls the rest."""
    with RedirectedSite() as site, RedisServer() as server:
        site.answer.set()
        coord = coordinator(site, server.url, tmp_path / "coord", "--no-fetch")
        wait_for_crawl(server.url)
        first = worker(server.url, tmp_path / "w0", "--concurrency", "2")
        wait_for_done(server.url, 20)  # the seed's redirect and some pages of its target
        os.kill(first.pid, signal.SIGINT)  # it finishes its fetches in flight and gives its partitions back
        assert first.finish(60)[0] == 130
        late = worker(server.url, tmp_path / "w1", "--concurrency", "4")
        code, _out, err = coord.finish()
        assert code == 0, err
        assert late.finish()[0] == 0
        gathered = captures(tmp_path / "coord")
        expected = site.expected()
    assert expected <= set(gathered), f"{len(expected - set(gathered))} of {len(expected)} pages missing"
    assert out_of_scope_on_target(tmp_path / "coord", site) == []
    by_node = Counter(
        node for (node,) in crawl_rows(tmp_path / "coord", "SELECT node FROM captures WHERE crawl_id = ?")
    )
    assert len(by_node) == 2 and min(by_node.values()) > 0, by_node  # both took part: the late one after the redirect


def scope_reads(client: redis.Redis) -> int:
    """SCARD and SMEMBERS calls this Redis answered so far."""
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("scard", "smembers"))


async def test_a_host_one_node_records_is_learned_by_another_once_read_after_the_url_was_handed_out(
    redis_url: str, tmp_path: Path
) -> None:
    keys = Keys("shared")
    config = CrawlConfig(seeds=("http://a.test/",), out=tmp_path, name=keys.name)
    client, admin = await connect(redis_url), redis.Redis.from_url(redis_url)
    politeness = Politeness(PolitenessConfig(), robots=ALLOW_ALL)
    try:
        _config, layout = await create_or_join(client, keys, config, Layout(partitions=2))

        def node(name: str) -> tuple[Scope, SharedScope]:
            scope = Scope(ScopeConfig(), ["http://a.test/"])
            frontier = RedisFrontier(client, keys, layout, Leases(name, keys, 2, ttl=60), politeness)
            return scope, SharedScope(client, keys, scope, frontier)

        (_scope_a, a), (scope_b, b) = node("node-01"), node("node-02")
        await b.learn(time.monotonic())
        assert scope_b.check("http://www.a.test/x", 1) == "out-of-scope"
        await a.record("www.a.test")
        handed_out = time.monotonic()  # a URL found through the new host is handed out after it was recorded
        await b.learn(handed_out)
        assert scope_b.check("http://www.a.test/x", 1) is None
        reads = scope_reads(admin)
        for _ in range(10):  # pages handed out before that read: it covers them, no read of their own
            await b.learn(handed_out)
        assert scope_reads(admin) == reads
        await b.learn(time.monotonic())
        assert scope_reads(admin) == reads + 1, "nothing new: the size alone is read"

        await client.flushall()  # Redis loses the crawl; a coordinator creates it anew
        await create_or_join(client, keys, config, Layout(partitions=2))
        with pytest.raises(CrawlGone):
            await a.record("lost.a.test")
        assert await client.smembers(keys.scope) == set(), "a node of the lost crawl widened the new one"
    finally:
        await client.aclose()
        admin.close()
