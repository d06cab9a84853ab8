"""Partition leases against a real Redis: fencing, takeover, expiry margin and balancing."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
import redis
import redis.cluster

from tests.redis_servers import blocking_client
from webtrawl.cluster.frontier import RedisFrontier
from webtrawl.cluster.keys import Keys
from webtrawl.cluster.layout import Layout
from webtrawl.cluster.leases import Leases, read_partitions
from webtrawl.cluster.redisconn import connect
from webtrawl.cluster.scripts import Scripts
from webtrawl.config import PolitenessConfig
from webtrawl.fetch.robots import ALLOW_ALL
from webtrawl.models import Completion, NewURL
from webtrawl.politeness import Politeness
from webtrawl.urls import fingerprint, origin

KEYS = Keys("lease-test")


def new(url: str, depth: int = 1) -> NewURL:
    return NewURL(url=url, fp=fingerprint(url), host=origin(url), depth=depth)


@pytest.fixture
async def redis_clients(redis_any: str) -> AsyncIterator[tuple[object, redis.Redis | redis.cluster.RedisCluster]]:
    client = await connect(redis_any)
    sync = blocking_client(redis_any)
    yield client, sync
    await client.aclose()
    sync.close()


def frontier(client: object, leases: Leases, layout: Layout) -> RedisFrontier:
    return RedisFrontier(
        client, KEYS, layout, leases, Politeness(PolitenessConfig(per_host=5, delay=0), robots=ALLOW_ALL)
    )


async def test_a_node_that_lost_its_lease_completes_nothing_and_its_url_runs_again(redis_clients) -> None:
    client, sync = redis_clients
    layout = Layout(partitions=1)
    scripts = Scripts(sync)
    a, b = Leases("node-01", KEYS, 1, ttl=30), Leases("node-02", KEYS, 1, ttl=30)
    assert a.acquire(scripts, 0)
    front_a = frontier(client, a, layout)
    await front_a.add([new("http://a.test/page")])
    [entry] = await front_a.claim(10)
    assert not b.acquire(scripts, 0)  # held
    sync.delete(KEYS.lease(0))  # node-01 stalled past its TTL: the lease expired
    assert b.acquire(scripts, 0)
    assert a.renew(scripts) == [0]  # node-01 wakes up and learns it lost the partition
    await front_a.complete([Completion(entry=entry, verdict="done")], {})
    assert sync.hget(KEYS.counters(0), "done") in (None, b"0")  # fenced: nothing completed
    front_b = frontier(client, b, layout)
    [again] = await front_b.claim(10)  # back to waiting under the new epoch
    assert again.url == entry.url
    await front_b.complete([Completion(entry=again, verdict="done")], {})
    assert sync.hget(KEYS.counters(0), "done") == b"1"
    assert sync.xlen(KEYS.stream(0)) == 1  # one result for the coordinator, from the node that held the lease


async def test_a_lease_not_renewed_within_ttl_minus_margin_starts_no_fetch(redis_clients) -> None:
    _client, sync = redis_clients
    leases = Leases("node-01", KEYS, 1, ttl=3)
    assert leases.acquire(Scripts(sync), 0)
    assert leases.usable() == {0: leases.token(0)}
    assert leases.usable(time.monotonic() + 3 - leases.margin + 0.01) == {}


async def test_work_spreads_to_a_joining_node_and_empty_partitions_are_given_up(redis_clients) -> None:
    client, sync = redis_clients
    layout = Layout(partitions=8)
    scripts = Scripts(sync)
    a, b = Leases("node-01", KEYS, 8, ttl=30), Leases("node-02", KEYS, 8, ttl=30)
    front = frontier(client, a, layout)
    await front.add([new(f"http://h{i}.test/") for i in range(64)])
    with_work = {p for p, state in enumerate(read_partitions(sync, KEYS, 8)) if state.waiting}
    a.balance(scripts, read_partitions(sync, KEYS, 8), 1, lambda p: 0)
    assert set(a.held) == with_work  # alone, a node takes every partition with work
    a.balance(scripts, read_partitions(sync, KEYS, 8), 2, lambda p: 0)  # a second node is live now
    a.balance(scripts, read_partitions(sync, KEYS, 8), 2, lambda p: 0)  # drained partitions are released
    b.balance(scripts, read_partitions(sync, KEYS, 8), 2, lambda p: 0)
    assert b.held and not set(a.held) & set(b.held)
    assert abs(len(a.held) - len(b.held)) <= 2
    for p in b.held:  # node-02's partitions run out of work: it gives them up
        sync.hset(KEYS.counters(p), mapping={"waiting": 0, "running": 0})
    b.balance(scripts, read_partitions(sync, KEYS, 8), 2, lambda p: 0)
    assert b.held == []
