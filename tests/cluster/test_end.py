"""The coordinator's view of a crawl: the end decided only when nothing waits or runs anywhere for a grace
period (a node alone cannot tell), from Redis's counters alone."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.crawls import fast_config
from tests.redis_servers import blocking_client
from tests.sites import SiteServer
from webtrawl.cluster import coordinator as coordinating
from webtrawl.cluster import node as node_module
from webtrawl.cluster.coordinator import watch_for_end
from webtrawl.cluster.frontier import RedisFrontier
from webtrawl.cluster.keys import Keys
from webtrawl.cluster.layout import Layout
from webtrawl.cluster.leases import Leases
from webtrawl.cluster.redisconn import connect
from webtrawl.cluster.runs import run_coordinator, run_worker
from webtrawl.cluster.scripts import Scripts
from webtrawl.config import PolitenessConfig
from webtrawl.fetch.robots import ALLOW_ALL
from webtrawl.models import Completion, NewURL
from webtrawl.politeness import Politeness
from webtrawl.urls import fingerprint, origin

KEYS = Keys("end-test")
LAYOUT = Layout(partitions=4)


def new(path: str, depth: int) -> NewURL:
    url = f"http://a.test{path}"
    return NewURL(url=url, fp=fingerprint(url), host=origin(url), depth=depth, kind="seed" if depth == 0 else "link")


@dataclass
class Held:
    """A crawl whose every partition this test holds as node-01."""

    client: Any
    frontier: RedisFrontier
    politeness: Politeness


@asynccontextmanager
async def holding_every_partition(redis_url: str) -> AsyncIterator[Held]:
    client = await connect(redis_url)
    sync = blocking_client(redis_url)
    try:
        leases = Leases("node-01", KEYS, LAYOUT.partitions, ttl=60)
        for p in range(LAYOUT.partitions):
            assert leases.acquire(Scripts(sync), p)
        politeness = Politeness(PolitenessConfig(per_host=10, delay=0), robots=ALLOW_ALL)
        yield Held(client, RedisFrontier(client, KEYS, LAYOUT, leases, politeness), politeness)
    finally:
        await client.aclose()
        sync.close()


async def test_the_crawl_ends_once_nothing_waits_or_runs(redis_any: str, monkeypatch) -> None:
    monkeypatch.setattr(coordinating, "GRACE", 0.3)
    async with holding_every_partition(redis_any) as held:
        client, frontier, politeness = held.client, held.frontier, held.politeness
        await frontier.add([new("/", 0)])
        end = asyncio.create_task(watch_for_end(client, KEYS, LAYOUT.partitions))

        [seed] = await frontier.claim(10)
        await asyncio.sleep(0.8)
        assert not end.done()  # a URL runs
        await frontier.complete([Completion(entry=seed, verdict="done", children=[new("/a", 1), new("/b", 1)])], {})
        politeness.release(seed.host)
        await asyncio.sleep(0.8)
        assert not end.done()  # its children wait
        children = await frontier.claim(10)
        await frontier.complete([Completion(entry=child, verdict="done") for child in children], {})
        await asyncio.wait_for(end, timeout=3)
        counts = await frontier.counts()
        assert (counts.waiting, counts.running, counts.done) == (0, 0, 3)


async def test_the_coordinators_own_node_ends_when_told_the_end_not_at_its_next_heartbeat(
    redis_url: str, tmp_path: Path, monkeypatch
) -> None:
    """Heartbeats an hour apart (leases as long, since heartbeats renew them): a node that waited for a
    heartbeat to read the end would still be crawling. The node runs here as the coordinator starts it
    (`cluster.ownnode`), reading a pipe (in a directory of its own: a coordinator that does not fetch holds
    its directory's lock); the test writes on the other end what `OwnNode.tell` writes once the
    coordinator has declared the end. (Without it, this test fails at its 120 s bound.)"""
    monkeypatch.setattr(node_module, "HEARTBEAT", 3600.0)
    beats = []
    beat = node_module.Heartbeat.beat
    monkeypatch.setattr(node_module.Heartbeat, "beat", lambda self: (beats.append(1), beat(self))[1])
    keys = Keys("told")
    read, write = os.pipe()
    try:
        client = await connect(redis_url)
        async with SiteServer(pages=20, calendar=False) as server:
            config = fast_config(server.url, tmp_path, name="told")
            layout = Layout(partitions=4, lease_ttl=3600.0)
            coordinating_task = asyncio.create_task(run_coordinator(config, redis_url, layout, fetch=False))
            while not await client.hexists(keys.meta, "layout"):
                await asyncio.sleep(0.05)
            node = asyncio.create_task(
                run_worker(redis_url, "told", out=tmp_path / "node", concurrency=4, coordinator_pipe=read)
            )
            while await client.get(keys.control) != b"finished":
                assert not node.done(), node  # failed
                await asyncio.sleep(0.05)
            os.write(write, b"finished\n")
            report, nodes = await asyncio.wait_for(coordinating_task, 120)
            _node_id, node_report = await asyncio.wait_for(node, 120)
            expected = {server.site.url(path) for path in server.site.expected_fetched()}
    finally:
        os.close(write)
        os.close(read)
        await client.aclose()
    assert report.outcome == "finished" and node_report.outcome == "finished"
    assert list(nodes) == ["node-01"] and nodes["node-01"]["outcome"] == "finished"
    conn = sqlite3.connect(tmp_path / "node" / "node.db")  # the node's shard
    assert {url for (url,) in conn.execute("SELECT url FROM captures")} == expected
    assert len(beats) == 2  # both at the node's start: before its first claim, and as its thread starts


async def test_a_failing_coordinator_has_its_node_give_its_partitions_back(redis_url: str, tmp_path: Path) -> None:
    """A coordinator that fails (here: cancelled mid-crawl, as its task group cancels it when a watcher fails)
    tells its node to leave: with leases of an hour, only a node that gave its partitions back leaves none
    held, and it says it left."""
    keys, layout = Keys("failing"), Layout(partitions=4, lease_ttl=3600.0)
    client = await connect(redis_url)
    try:
        async with SiteServer(pages=300, calendar=False, delay=0.02) as server:
            config = fast_config(server.url, tmp_path, name="failing")
            coordinating_task = asyncio.create_task(run_coordinator(config, redis_url, layout))
            while len(server.log) < 20:  # crawling
                await asyncio.sleep(0.05)
            coordinating_task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await coordinating_task
            held = [await client.get(keys.lease(p)) for p in range(layout.partitions)]
            nodes = {node.decode(): json.loads(info) for node, info in (await client.hgetall(keys.nodes)).items()}
    finally:
        await client.aclose()
    assert held == [None] * layout.partitions
    assert [info["state"] for info in nodes.values()] == ["left"]
