"""A node of a distributed crawl that fetches nothing, for `scale_bench.py`: it joins the crawl as `webtrawl worker`
does (registers, holds leases through the real heartbeat, claims and completes through the real Redis frontier)
but makes each page it claims up at once: a page of text and links as the benchmark site's are. The shared
parts (Redis, the coordinator) then get pages as fast as the nodes can make them, with no network in the way.

    .venv/bin/python benchmarks/synthetic_node.py --redis URL --name NAME --pages 20000

Page i of the synthetic site is `http://h{i mod hosts}.synthetic.invalid/p/{i}.html`; it links `--links`
pages drawn at random (the seed of the draw is the page's number, so every node makes the same page), so
every page is reached within a few levels and the crawl ends once all `--pages` are done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import sys
import threading
import time
from pathlib import Path

from webtrawl.cluster.coordinator import load_crawl
from webtrawl.cluster.frontier import RedisFrontier
from webtrawl.cluster.keys import Keys
from webtrawl.cluster.leases import Leases
from webtrawl.cluster.node import Heartbeat, register
from webtrawl.cluster.redisconn import open_clients
from webtrawl.config import PolitenessConfig
from webtrawl.fetch.robots import ALLOW_ALL
from webtrawl.models import Capture, Completion, Entry, NewURL, WarcLocation
from webtrawl.politeness import Politeness
from webtrawl.urls import fingerprint, origin

CLAIM = 256
"""URLs claimed at a time."""
PER_HOST = 4
"""Requests at once per host, as a crawl's politeness allows a few: a claim then takes URLs of many hosts, as a
node's does, rather than all it asks for from the first host it finds."""
BATCH = 512
"""Pages completed together, as a node's archiver batches them (`crawler.UNCOMMITTED`)."""
WORDS = [f"w{n:x}ord" for n in range(5_000)]


def page_url(number: int, hosts: int) -> str:
    return f"http://h{number % hosts}.synthetic.invalid/p/{number}.html"


def page_number(url: str) -> int:
    return int(url.rsplit("/", 1)[1].split(".", 1)[0])


class Pages:
    """The synthetic site: what page i says and links."""

    def __init__(self, pages: int, hosts: int, links: int, text_bytes: int) -> None:
        self.pages, self.hosts, self.links, self.text_bytes = pages, hosts, links, text_bytes

    def completion(self, entry: Entry, offset: int) -> Completion:
        number = page_number(entry.url)
        rng = random.Random(number)
        text = " ".join(rng.choices(WORDS, k=self.text_bytes // 8))[: self.text_bytes]
        children = []
        for target in rng.sample(range(self.pages), self.links):
            url = page_url(target, self.hosts)
            children.append(NewURL(url=url, fp=fingerprint(url), host=origin(url), depth=entry.depth + 1,
                                   referrer_fp=entry.fp))  # fmt: skip
        capture = Capture(
            fp=entry.fp,
            url=entry.url,
            fetched_at=time.time(),
            status=200,
            content_type="text/html; charset=utf-8",
            size=len(text) + 8_000,
            title=f"Page {number}",
            text=text,
            response_headers=[("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(text)))],
            request_headers=[("User-Agent", "webtrawl-synthetic")],
            ip="127.0.0.1",
            ttfb=0.001,
            elapsed=0.002,
            warc=WarcLocation(file="synthetic.warc.gz", offset=offset, length=6_000, payload_digest="sha1:SYNTHETIC"),
            payload_digest=f"sha1:{number:032d}",
            simhash=rng.getrandbits(63),
        )
        return Completion(entry=entry, verdict="done", capture=capture, children=children)


async def crawl(url: str, name: str, pages: Pages) -> int:
    client, sync = await open_clients(url)
    keys = Keys(name)
    _config, layout = await load_crawl(client, keys, out=Path("."))
    node = register(sync, keys)
    leases = Leases(node, keys, layout.partitions, ttl=layout.lease_ttl)
    politeness = Politeness(PolitenessConfig(per_host=PER_HOST, delay=0), robots=ALLOW_ALL)
    frontier = RedisFrontier(client, keys, layout, leases, politeness)
    finished = threading.Event()
    done = 0
    info = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}

    def on_control(command: str) -> None:
        if command == "finished":
            finished.set()

    heartbeat = Heartbeat(
        sync,
        keys,
        leases,
        layout,
        stats=lambda: {**info, "pages": done},
        on_control=on_control,
        on_gone=finished.set,
        running_in=frontier.running_in,
    )
    heartbeat.beat()
    heartbeat.start()
    offset = 0
    batch: list[Completion] = []
    try:
        while not finished.is_set():
            entries = await frontier.claim(CLAIM)
            for entry in entries:
                batch.append(pages.completion(entry, offset))
                offset += 6_000
            if batch and (not entries or len(batch) >= BATCH):
                await frontier.complete(batch, {})
                for item in batch:
                    politeness.release(item.entry.host)
                done += len(batch)
                batch = []
            elif not entries:
                await asyncio.sleep(0.01)
        # The final report a node leaves, which the coordinator waits for before it ends (as `Node.run` does).
        elapsed = time.time() - info["started"]
        report = {**info, "pages": done, "bytes": 0, "elapsed": round(elapsed, 2), "outcome": "finished"}
        await client.hset(keys.report, node, json.dumps(report))
    finally:
        await asyncio.to_thread(heartbeat.stop)
        await client.aclose()
        sync.close()
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--hosts", type=int, default=1_000)
    parser.add_argument("--links", type=int, default=40)
    parser.add_argument("--text-bytes", type=int, default=12_000)
    args = parser.parse_args()
    done = asyncio.run(crawl(args.redis, args.name, Pages(args.pages, args.hosts, args.links, args.text_bytes)))
    print(f"synthetic node {os.getpid()}: {done} pages", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
