"""Partition leases against a real Redis: fencing, takeover, expiry margin and balancing."""

from __future__ import annotations

import random
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
    assert sync.hget(KEYS.counters(0), "done") == b"1"  # one result, from the node that held the lease


async def test_a_lease_not_renewed_within_ttl_minus_margin_starts_no_fetch(redis_clients) -> None:
    _client, sync = redis_clients
    leases = Leases("node-01", KEYS, 1, ttl=3)
    assert leases.acquire(Scripts(sync), 0)
    assert leases.usable() == {0: leases.token(0)}
    assert leases.usable(time.monotonic() + 3 - leases.margin + 0.01) == {}


def balance(leases: Leases, sync: object, live: list[str], partitions: int = 8, running_here=lambda p: 0) -> None:
    leases.balance(Scripts(sync), read_partitions(sync, KEYS, partitions), live, running_here)


def work_held(sync: object, leases: Leases, partitions: int = 8) -> int:
    states = read_partitions(sync, KEYS, partitions)
    return sum(states[p].work > 0 for p in leases.held)


async def test_work_spreads_to_a_joining_node_and_every_partition_has_a_holder(redis_clients) -> None:
    client, sync = redis_clients
    layout = Layout(partitions=8)
    a, b = Leases("node-01", KEYS, 8, ttl=30), Leases("node-02", KEYS, 8, ttl=30)
    front = frontier(client, a, layout)
    await front.add([new(f"http://h{i}.test/") for i in range(64)])
    assert all(state.waiting for state in read_partitions(sync, KEYS, 8))
    balance(a, sync, ["node-01"])
    assert a.held == list(range(8))  # alone, a node takes every partition
    balance(b, sync, ["node-01", "node-02"])  # a second node joins: nothing is free yet
    assert b.held == [] and b.unsettled  # short of its share, it beats again soon
    balance(a, sync, ["node-01", "node-02"])  # node-01 sees it: drains what is beyond its share
    assert a.unsettled and len(a.held) == 8
    balance(a, sync, ["node-01", "node-02"])  # nothing of them runs here: given back
    balance(b, sync, ["node-01", "node-02"])
    assert len(a.held) == len(b.held) == 4 and not set(a.held) & set(b.held)
    assert (a.unsettled, b.unsettled, a._draining, a._short, b._short) == (False, False, frozenset(), False, False)
    for p in b.held:  # node-02's partitions run out of work: it keeps them, so new URLs there are claimed at once
        sync.hset(KEYS.counters(p), mapping={"waiting": 0, "running": 0})
    balance(b, sync, ["node-01", "node-02"])
    assert len(b.held) == 4


async def test_a_draining_partition_is_given_back_only_once_nothing_of_it_runs_here(redis_clients) -> None:
    client, sync = redis_clients
    a, b = Leases("node-01", KEYS, 4, ttl=30), Leases("node-02", KEYS, 4, ttl=30)
    await frontier(client, a, Layout(partitions=4)).add([new(f"http://h{i}.test/") for i in range(32)])
    balance(a, sync, ["node-01"], 4)
    balance(a, sync, ["node-01", "node-02"], 4)  # two to drain
    draining = set(range(4)) - set(a.usable())
    assert len(draining) == 2  # no new fetch starts there, but the leases are still held
    balance(a, sync, ["node-01", "node-02"], 4, running_here=lambda p: 1)
    assert set(a.held) == set(range(4))  # their URLs still run here: nobody else may take them yet
    balance(b, sync, ["node-01", "node-02"], 4)
    assert b.held == []
    balance(a, sync, ["node-01", "node-02"], 4)
    balance(b, sync, ["node-01", "node-02"], 4)
    assert set(b.held) == draining


@pytest.mark.parametrize("nodes", [3, 5])
async def test_every_node_holds_its_share_of_the_partitions_with_work_and_of_all(redis_clients, nodes) -> None:
    """A node holding its share plus one keeps it, unless another node is short and nothing is free."""
    client, sync = redis_clients
    names = [f"node-{i:02d}" for i in range(1, nodes + 1)]
    leases = [Leases(name, KEYS, 16, ttl=30) for name in names]
    urls = [new(f"http://h{i}.test/") for i in range(400)]
    await frontier(client, leases[0], Layout(partitions=16)).add(urls)
    idle = {p for p in range(16) if p % 3 == 0}  # a third of the partitions have no work
    for p in idle:
        sync.hset(KEYS.counters(p), mapping={"waiting": 0, "running": 0})
    busy = 16 - len(idle)
    balance(leases[0], sync, names[:1], 16)  # the first node starts alone
    for _round in range(4):  # then every node beats, in turn, until nothing moves
        for node in leases:
            balance(node, sync, names, 16)
    assert not any(node.unsettled for node in leases)
    for node in leases:
        assert busy // nodes - 1 <= work_held(sync, node, 16) <= -(-busy // nodes) + 1, names
        assert 16 // nodes - 1 <= len(node.held) <= -(-16 // nodes) + 1
    held = [p for node in leases for p in node.held]
    assert sorted(held) == list(range(16))  # every partition has one holder


async def test_a_partition_is_not_given_up_while_a_url_claimed_under_its_lease_runs(redis_clients) -> None:
    """The node's own books may not know yet of a claim Redis already ran (its reply still on the way): Redis
    decides."""
    client, sync = redis_clients
    a = Leases("node-01", KEYS, 1, ttl=30)
    scripts = Scripts(sync)
    assert a.acquire(scripts, 0)
    front = frontier(client, a, Layout(partitions=1))
    await front.add([new("http://a.test/page")])
    [entry] = await front.claim(10)
    assert not a.give(scripts, 0) and a.held == [0]
    await front.complete([Completion(entry=entry, verdict="done")], {})
    assert a.give(scripts, 0) and a.held == []
    assert sync.get(KEYS.lease(0)) is None


@pytest.mark.parametrize("nodes", [2, 3])
async def test_partitions_whose_work_comes_and_goes_stay_where_they_are(redis_clients, nodes: int) -> None:
    """Four partitions run out of work and get some again, at random (hosts' queues emptied, then refilled by
    links from elsewhere): the count of partitions with work changes at nearly every beat, and nothing is to
    move for it while no node holds two more than another."""
    client, sync = redis_clients
    names = [f"node-{i:02d}" for i in range(1, nodes + 1)]
    leases = [Leases(name, KEYS, 16, ttl=30) for name in names]
    await frontier(client, leases[0], Layout(partitions=16)).add([new(f"http://h{i}.test/") for i in range(400)])
    rng = random.Random(7)
    moves = 0
    for beat in range(60):
        for p in range(4):
            sync.hset(KEYS.counters(p), mapping={"waiting": rng.randint(0, 1), "running": 0})
        for node in leases:
            held = list(node.held)
            balance(node, sync, names, 16)
            moves += beat >= 10 and node.held != held
    assert moves <= 16, moves  # the rule before this one moved 34 (2 nodes) and 54 (3 nodes) times here
