"""Every node takes its share: partitions move to a node that joins a running crawl, so adding a machine adds
its throughput (a real site, real processes, a real Redis)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from tests.cluster.processes import KEYS, NAME, Process, Sites, crawl_rows, wait_for_crawl, worker
from tests.redis_servers import RedisServer

PAGES = 700
PARTITIONS = 64
LEASE_TTL = 6.0
NODES = 3


class Holdings(threading.Thread):
    """Reads, until stopped, when (by Redis' clock) each node first published a heartbeat and first held its
    share of the partitions."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.client = redis.Redis.from_url(url)
        self.joined: dict[str, int] = {}
        self.at_share: dict[str, int] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.05):
            seconds, micros = self.client.time()
            now = seconds * 1000 + micros // 1000
            live = [node.decode() for node, info in self.client.hgetall(KEYS.nodes).items()
                    if json.loads(info)["state"] == "running"]  # fmt: skip
            for node in live:
                self.joined.setdefault(node, now)
            tokens = self.client.mget([KEYS.lease(p) for p in range(PARTITIONS)])
            held = Counter(token.decode().rsplit(":", 1)[0] for token in tokens if token)
            for node in live:
                if held[node] >= PARTITIONS // len(live) - 1:
                    self.at_share.setdefault(node, now)

    def stop(self) -> None:
        self.halt.set()
        self.join(10)
        self.client.close()


def wait_for_nodes(url: str, count: int) -> None:
    with redis.Redis.from_url(url) as client:
        deadline = time.monotonic() + 60
        while client.hlen(KEYS.nodes) < count:
            assert time.monotonic() < deadline, f"fewer than {count} nodes joined the crawl"
            time.sleep(0.05)


@pytest.mark.slow
def test_nodes_joining_a_running_crawl_take_their_share_of_it(tmp_path: Path) -> None:
    """The coordinator's node starts the crawl (its seed page in flight) and holds every partition; two workers
    join half a second apart, and the site answers once all three are in, so that how fast a process starts
    on a loaded machine does not decide what each fetches."""
    # Each response 0.1 s late, so that a node's fetch slots, not its CPU, bound its speed: what a node
    # fetches follows what it holds.
    with Sites(pages=PAGES, delay=0.1, count=1, held=True) as sites, RedisServer() as server:
        [site] = sites.servers
        coord = Process(
            tmp_path / "logs", "coordinator",
            "crawl", site.url, "--redis", server.url, "--name", NAME, "--out", tmp_path / "coord",
            "--partition-by", "url", "--partitions", PARTITIONS, "--lease-ttl", LEASE_TTL, "--per-host", "64",
            "--delay", "0", "--concurrency", "2", "--retries", "1", "-q",
        )  # fmt: skip
        wait_for_crawl(server.url)
        holdings = Holdings(server.url)
        holdings.start()
        workers = []
        for i in range(NODES - 1):  # started half a second apart, while the coordinator's node crawls
            time.sleep(0.5)
            workers.append(worker(server.url, tmp_path / f"w{i}"))
        wait_for_nodes(server.url, NODES)
        sites.release()
        code, _out, err = coord.finish()
        assert code == 0, err
        for process in workers:
            assert process.finish()[0] == 0
        holdings.stop()
        hits = Counter(site.site.url(r.path) for r in site.log if r.path != "/robots.txt" and "sitemap" not in r.path)
        expected = {site.site.url(path) for path in site.site.expected_fetched()}

    fetched = crawl_rows(tmp_path / "coord", "SELECT url, node FROM captures WHERE crawl_id = ?")
    captured = Counter(url for url, _node in fetched)
    assert set(captured) == expected
    assert hits == captured  # partitions moved, and no URL ran twice (only a server error is asked again)
    per_node = Counter(node for _url, node in fetched)
    assert len(per_node) == NODES
    assert min(per_node.values()) >= len(captured) / 4, per_node
    assert set(holdings.joined) == set(per_node)
    for node, joined in holdings.joined.items():  # each held its share within one lease TTL of joining
        at_share = holdings.at_share.get(node)
        assert at_share is not None, (node, holdings.at_share)
        assert at_share - joined <= LEASE_TTL * 1000, (node, holdings.joined, holdings.at_share)
