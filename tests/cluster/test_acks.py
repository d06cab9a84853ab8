"""A batch's completion acknowledged in Redis, so a node's shard holds what Redis accepted, however the call
went: run again after its reply was lost, it reports nothing skipped; a lease lost refuses it whole."""

from __future__ import annotations

import redis

from webtrawl.cluster.bloom import fp_bytes
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

KEYS = Keys("acks")


async def test_a_completion_run_again_counts_what_it_completed_the_first_time(redis_url: str) -> None:
    client = await connect(redis_url)
    sync = redis.Redis.from_url(redis_url)
    try:
        leases = Leases("node-01", KEYS, 1, ttl=60)
        assert leases.acquire(Scripts(sync), 0)
        politeness = Politeness(PolitenessConfig(per_host=100, delay=0), robots=ALLOW_ALL)
        frontier = RedisFrontier(client, KEYS, Layout(partitions=1), leases, politeness)
        urls = [f"http://a.example/{i}" for i in range(3)]
        await frontier.add([NewURL(url=u, fp=fingerprint(u), host=origin(u), depth=1) for u in urls])
        claimed = await frontier.claim(10)
        assert len(claimed) == 3
        complete = Scripts(client).complete
        token = leases.token(0)
        args = [token, "node-01", "7"]
        for entry in claimed:
            args += [fp_bytes(entry.fp), "done", 0]
        keys = [KEYS.counters(0)]
        first = await complete(keys=keys, args=args)
        again = await complete(keys=keys, args=args)  # its reply lost, the call is made again
        assert first == [3, []]
        assert again == [0, []]  # nothing skipped: the node settles all three in its shard
        acked = sync.hget(KEYS.acks(0), "node-01/")
        assert sync.hget(KEYS.acks(0), "node-01") == b"7"
        assert {acked[i : i + 8] for i in range(0, 24, 8)} == {fp_bytes(e.fp) for e in claimed}
        assert int(sync.hget(KEYS.counters(0), "done")) == 3  # counted once
        other = await complete(keys=keys, args=[token, "node-01", "8", *args[3:]])  # another batch: not ours
        assert other == [0, [fp_bytes(e.fp) for e in claimed]]
        assert await complete(keys=keys, args=["node-02:99", "node-02", "9", *args[3:]]) is None  # no lease
    finally:
        await client.aclose()
        sync.close()
