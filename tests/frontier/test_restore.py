"""A Redis frontier restored from an index (a crawl Redis lost): ended URLs seen and counted but not queued,
waiting ones queued with what their last fetch left; on a standalone Redis and a Cluster, with either dedup."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.redis_servers import blocking_client
from webtrawl.cluster.coordinator import create_or_join
from webtrawl.cluster.frontier import RedisFrontier
from webtrawl.cluster.keys import Keys
from webtrawl.cluster.layout import Layout
from webtrawl.cluster.leases import Leases
from webtrawl.cluster.redisconn import connect
from webtrawl.cluster.scripts import Scripts
from webtrawl.config import CrawlConfig, PolitenessConfig
from webtrawl.errors import CrawlGone
from webtrawl.fetch.robots import ALLOW_ALL
from webtrawl.models import Entry, NewURL, Previous, State
from webtrawl.politeness import Politeness
from webtrawl.urls import fingerprint, origin


def entry(path: str, depth: int = 1, kind: str = "link", previous: Previous | None = None) -> Entry:
    url = f"http://a.test{path}"
    return Entry(
        url=url, fp=fingerprint(url), host=origin(url), depth=depth, kind=kind, referrer_fp=None, attempts=0,
        previous=previous,
    )  # type: ignore[arg-type]  # fmt: skip


def as_new(e: Entry, kind: str = "link") -> NewURL:
    return NewURL(url=e.url, fp=e.fp, host=e.host, depth=e.depth, kind=kind)  # type: ignore[arg-type]


@asynccontextmanager
async def frontier_on(url: str, dedup: str) -> AsyncIterator[RedisFrontier]:
    keys, layout = Keys("restore"), Layout(partitions=4, dedup=dedup)
    sync, client = blocking_client(url), await connect(url)
    leases = Leases("node-01", keys, layout.partitions, ttl=60)
    scripts = Scripts(sync)
    for p in range(layout.partitions):
        assert leases.acquire(scripts, p)
    politeness = Politeness(PolitenessConfig(per_host=10, delay=0.0), robots=ALLOW_ALL)
    try:
        yield RedisFrontier(client, keys, layout, leases, politeness)
    finally:
        await client.aclose()
        sync.close()


@pytest.mark.parametrize("server", ["redis_url", "redis_cluster_url"])
@pytest.mark.parametrize("dedup", ["bloom", "exact"])
async def test_a_restored_frontier_queues_what_waited_and_knows_what_ended(
    request: pytest.FixtureRequest, server: str, dedup: str
) -> None:
    seed = entry("/", depth=0)  # as the index may have it: a page linking to the seed came first
    fetched = entry("/fetched")
    broken = entry("/broken")
    again = entry("/again", previous=Previous(fetched_at=1.0, etag='"v1"'))
    fresh = entry("/fresh", depth=2)
    rows = [(seed, State.DONE), (fetched, State.DONE), (broken, State.FAILED), (again, State.WAITING),
            (fresh, State.RUNNING)]  # fmt: skip
    async with frontier_on(request.getfixturevalue(server), dedup) as frontier:
        assert await frontier.restore(rows) == 5
        counts = await frontier.counts()
        assert (counts.waiting, counts.running, counts.done, counts.failed) == (2, 0, 2, 1)

        # The seeds are added again as a coordinator starts; pages find the other URLs again.
        assert await frontier.add([as_new(seed, kind="seed")]) == 0
        assert await frontier.add([as_new(e) for e, _ in rows]) == 0
        assert await frontier.restore(rows) == 0, "a restore cut short can run again"

        claimed = {e.url: e for e in await frontier.claim(10)}
        assert sorted(claimed) == [again.url, fresh.url]
        assert claimed[again.url].previous == again.previous, "the re-fetch stays conditional"
        assert claimed[fresh.url].depth == 2


async def test_a_node_of_a_crawl_redis_lost_writes_nothing_into_it_nor_into_the_crawl_rebuilt_there(
    redis_url: str, tmp_path: Path
) -> None:
    """Its partitions refuse every call (CrawlGone), so what it still adds cannot stay queued, taken as seen,
    in a crawl rebuilt from the index."""
    keys = Keys("reborn")
    config = CrawlConfig(seeds=("http://a.test/",), out=tmp_path, name=keys.name)
    client = await connect(redis_url)
    politeness = Politeness(PolitenessConfig(per_host=10, delay=0.0), robots=ALLOW_ALL)
    done = entry("/done")
    try:
        _config, first = await create_or_join(client, keys, config, Layout(partitions=4))
        lost = RedisFrontier(client, keys, first, Leases("node-01", keys, 4, ttl=60), politeness)
        assert await lost.add([as_new(entry("/before"))]) == 1
        await client.flushall()
        with pytest.raises(CrawlGone, match="crawl 'reborn' is no longer in Redis"):
            await lost.add([as_new(done)])
        assert await client.keys("{reborn:*") == [], "nothing was written into the empty Redis"

        _config, second = await create_or_join(client, keys, config, Layout(partitions=4))
        assert second.incarnation != first.incarnation
        rebuilt = RedisFrontier(client, keys, second, Leases("coordinator", keys, 4, ttl=1), politeness)
        assert await rebuilt.restore([(done, State.DONE)]) == 1
        with pytest.raises(CrawlGone):
            await lost.add([as_new(done), as_new(entry("/new"))])
        counts = await rebuilt.counts()
        assert (counts.waiting, counts.done) == (0, 1), "the restore won: the page the index had stays ended"
    finally:
        await client.aclose()
