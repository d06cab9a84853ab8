"""Waiting URLs in Redis as compact records: many URLs in one partition (its index split many times), URLs
moved closer to the seeds, and what a waiting URL costs in memory; a crawl of the earlier form is refused."""

from __future__ import annotations

import json
from collections import Counter

import redis

from tests.test_cli import one_line_error, webtrawl
from webtrawl.cluster.frontier import RedisFrontier
from webtrawl.cluster.keys import Keys
from webtrawl.cluster.layout import Layout
from webtrawl.cluster.leases import Leases
from webtrawl.cluster.redisconn import connect
from webtrawl.cluster.scripts import Scripts
from webtrawl.config import PolitenessConfig
from webtrawl.fetch.robots import ALLOW_ALL
from webtrawl.models import NewURL
from webtrawl.politeness import Politeness
from webtrawl.urls import fingerprint, origin

KEYS = Keys("queues")
HOSTS = 5
URLS = 6_000
MOVED = 600


def new(url: str, depth: int, referrer: str | None = None) -> NewURL:
    referrer_fp = fingerprint(referrer) if referrer else None
    return NewURL(url=url, fp=fingerprint(url), host=origin(url), depth=depth, referrer_fp=referrer_fp)


def links(depth: int) -> list[NewURL]:
    return [
        new(f"http://www.site{i % HOSTS}.example/articles/{i // 7}/page-{i}.html", depth, "http://a.example/")
        for i in range(URLS)
    ]


async def test_thousands_of_urls_in_one_partition_are_each_claimed_once_closest_first(redis_url: str) -> None:
    client = await connect(redis_url)
    sync = redis.Redis.from_url(redis_url)
    try:
        leases = Leases("node-01", KEYS, 1, ttl=60)
        assert leases.acquire(Scripts(sync), 0)
        politeness = Politeness(PolitenessConfig(per_host=10_000, delay=0), robots=ALLOW_ALL)
        frontier = RedisFrontier(client, KEYS, Layout(partitions=1), leases, politeness)
        urls = links(depth=3)
        assert await frontier.add(urls) == URLS
        moved = links(depth=1)[:MOVED]  # found again, closer to the seeds
        assert await frontier.add(moved) == MOVED
        assert await frontier.add(links(depth=2)[:MOVED]) == 0  # found again, further: nothing moves

        prefix = KEYS.partition(0)
        counters = sync.hgetall(KEYS.counters(0))
        assert int(counters[b"waiting"]) == URLS
        index = [key for key in sync.scan_iter(f"{prefix}:w:*")]
        assert len(index) > URLS // 64  # the index split as it grew …
        assert {sync.object("encoding", key) for key in index} == {b"listpack"}  # … so every bucket stays compact
        waiting_keys = [*index, *sync.scan_iter(f"{prefix}:q:*"), *sync.scan_iter(f"{prefix}:d:*")]
        per_url = sum(sync.memory_usage(key, samples=0) for key in waiting_keys) / URLS
        assert per_url <= 120, per_url  # a waiting URL's record, queue and index entry

        claimed = []
        while batch := await frontier.claim(1_000):
            claimed += batch
        assert Counter(entry.url for entry in claimed) == Counter(u.url for u in urls)  # each once
        depths = {entry.url: entry.depth for entry in claimed}
        assert {depths[u.url] for u in moved} == {1} and Counter(depths.values()) == {1: MOVED, 3: URLS - MOVED}
        for host in {u.host for u in urls}:  # per host, the moved URLs first, in the order they came
            order = [entry.url for entry in claimed if entry.host == host]
            firsts = [u.url for u in moved if u.host == host]
            assert order[: len(firsts)] == firsts
        assert all(entry.referrer_fp == fingerprint("http://a.example/") for entry in claimed)
        counters = sync.hgetall(KEYS.counters(0))
        assert int(counters[b"waiting"]) == 0 and int(counters[b"running"]) == URLS
        assert list(sync.scan_iter(f"{prefix}:q:*")) == []  # stale records went with their queues
    finally:
        await client.aclose()
        sync.close()


async def test_a_crawl_created_in_the_earlier_form_is_refused_with_what_to_do(redis_url: str) -> None:
    layout = {"partitions": 4, "dedup": "bloom", "incarnation": "abc"}  # as an earlier webtrawl wrote it
    with redis.Redis.from_url(redis_url) as admin:
        admin.hset(Keys("old").meta, mapping={"config": json.dumps({"seeds": []}), "layout": json.dumps(layout)})
    code, _out, err = await webtrawl("worker", "--redis", redis_url, "--name", "old", "--out", "/tmp/unused")
    assert code == 2
    one_line_error(err, "crawl 'old' in Redis was created by another version of webtrawl", "rebuilds the crawl")
