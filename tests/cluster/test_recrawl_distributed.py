"""Keeping a distributed crawl fresh: re-crawls re-queue due URLs into their Redis partitions, and near-duplicates
are found across nodes through Redis."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
import redis.asyncio

import webtrawl
from tests.crawls import check_warcs, fast_config
from tests.test_recrawl import REVISIT, ChangingSite, rows, serving, warc_types
from webtrawl.cluster.keys import Keys
from webtrawl.cluster.layout import Layout
from webtrawl.cluster.runs import run_coordinator, run_worker
from webtrawl.cluster.twins import RedisTwins
from webtrawl.config import CrawlConfig, PolitenessConfig
from webtrawl.stats import CrawlReport

LAYOUT = Layout(partitions=4, lease_ttl=3)


async def coordinate(config: CrawlConfig, url: str) -> CrawlReport:
    report, _nodes = await run_coordinator(config, url, LAYOUT)
    assert report.outcome == "finished"
    return report


@pytest.mark.slow
async def test_a_distributed_recrawl_asks_conditionally_and_keeps_history(tmp_path: Path, redis_url: str) -> None:
    site = ChangingSite()
    site.set("/", "home", links=("/same", "/changes", "/gone"), etag='"home-1"')
    site.set("/same", "never changes", etag='"same-1"')
    site.set("/changes", "first version aardvark", modified=1_700_000_000)
    site.set("/gone", "about to disappear", etag='"gone-1"')
    out = tmp_path / "coord"
    async with serving(site):
        config = replace(fast_config(site.url + "/", out, name="fresh"), revisit=replace(REVISIT, recrawl=False))
        await coordinate(config, redis_url)
        await asyncio.sleep(0.25)  # every page is due again

        site.set("/", "home", links=("/same", "/changes", "/gone", "/new"), etag='"home-2"')
        site.set("/changes", "second version zebra", modified=1_700_000_100)
        site.pages["/gone"].status = 404
        site.set("/new", "a page added since", etag='"new-1"')
        before = len(site.requests)
        report = await coordinate(replace(config, revisit=REVISIT), redis_url)
        second = site.last_run(before)

    assert second["/same"][0]["If-None-Match"] == '"same-1"'
    assert second["/changes"][0]["If-Modified-Since"] == "Tue, 14 Nov 2023 22:13:20 GMT"
    assert {path: status for path, (_h, status) in second.items()} == {
        "/": 200, "/same": 304, "/changes": 200, "/gone": 404, "/new": 200,
    }  # fmt: skip
    assert report.statuses[304] == 1
    records = warc_types(out)
    assert records["/same"] == [("response", None), ("revisit", "server-not-modified")]
    assert records["/changes"] == [("response", None), ("response", None)]
    check_warcs(out)

    # The crawl, as the shard of the coordinator's node (it fetched alone) holds it: history kept, the removal
    # recorded, every URL ended again, schedules set.
    shard = out / "node.db"
    history = rows(shard, "SELECT url, status, unchanged FROM captures ORDER BY id")
    by_path: dict[str, list[tuple[int, int]]] = {}
    for url, status, unchanged in history:
        by_path.setdefault("/" + url.split("/", 3)[3], []).append((status, unchanged))
    assert by_path["/same"] == [(200, 0), (304, 1)]
    assert by_path["/gone"] == [(200, 0), (404, 0)]
    assert rows(shard, "SELECT state, reason FROM urls WHERE url = ?", site.url + "/gone") == [(3, "HTTP 404")]
    assert rows(shard, "SELECT COUNT(*) FROM urls WHERE state NOT IN (2, 3) OR next_due IS NULL") == [(0,)]
    with webtrawl.open(out, "fresh") as crawl:
        assert [hit.page.url for hit in crawl.search("zebra")] == [site.url + "/changes"]
        assert crawl.search("aardvark") == []
    # Redis counts each URL once: re-queued URLs left done/failed for waiting and came back.
    async with redis.asyncio.Redis.from_url(redis_url) as client:
        keys = Keys("fresh")
        counts = [await client.hmget(keys.counters(p), "waiting", "running", "done", "failed") for p in range(4)]
    waiting, running, done, failed = (sum(int(c[i] or 0) for c in counts) for i in range(4))
    assert (waiting, running, done, failed) == (0, 0, 4, 1)


@pytest.mark.slow
async def test_a_worker_waits_between_passes_and_fetches_the_next_one(tmp_path: Path, redis_url: str) -> None:
    """With --every, a pass that has nothing left to do leaves the crawl idle: the worker stays for the next."""
    site = ChangingSite()
    site.set("/", "home", links=("/same",), etag='"home"')
    site.set("/same", "never changes", etag='"same"')
    async with serving(site):
        config = replace(
            fast_config(site.url + "/", tmp_path / "coord", name="passes"), revisit=replace(REVISIT, every=1)
        )
        await coordinate(config, redis_url)  # the first pass, crawled by the coordinator's own node
        worker = asyncio.create_task(run_worker(redis_url, "passes", out=tmp_path / "worker", concurrency=None))
        await asyncio.sleep(0.5)  # the worker joins the idle crawl; every page is due again
        assert not worker.done()
        before = len(site.requests)
        report, _nodes = await run_coordinator(config, redis_url, LAYOUT, fetch=False)
        second = site.last_run(before)
        assert report.outcome == "finished" and not worker.done()  # the pass ended; the worker waits on
        async with redis.asyncio.Redis.from_url(redis_url) as client:
            assert await client.get(Keys("passes").control) == b"idle"
            await client.set(Keys("passes").control, "stop")
        node, worked = await asyncio.wait_for(worker, 30)
    assert {path: status for path, (_headers, status) in second.items()} == {"/": 304, "/same": 304}
    assert (worked.outcome, worked.pages) == ("stopped", 2)
    assert warc_types(tmp_path / "worker") == {
        "/": [("revisit", "server-not-modified")],
        "/same": [("revisit", "server-not-modified")],
        "/robots.txt": [("response", None)],  # what the worker read before its pages, archived too
        "/sitemap.xml": [("response", None)],
    }
    # The second pass is in the shard of the worker that fetched it.
    assert (
        rows(tmp_path / "worker" / "node.db", "SELECT status, node FROM captures WHERE unchanged = 1")
        == [(304, node)] * 2
    )


@pytest.mark.slow
async def test_a_distributed_crawl_does_not_follow_near_duplicates(tmp_path: Path, redis_url: str) -> None:
    site = ChangingSite()
    words = " ".join(f"word{i}" for i in range(3000))
    site.set("/", "home", links=("/a", "/copy", "/near"))
    site.set("/a", words, links=("/from-a",))
    site.set("/copy", words, links=("/from-a",))
    site.pages["/copy"].body = site.pages["/a"].body
    site.set("/near", words.replace("word1500", "changed"), links=("/from-near",))
    site.set("/from-a", "a")
    site.set("/from-near", "reached only through the near-duplicate")
    out = tmp_path / "coord"
    shard = out / "node.db"  # the coordinator's own node fetched every page
    async with serving(site):
        config = replace(
            fast_config(site.url + "/", out, name="twins"),
            concurrency=1,
            skip_near_duplicates=True,
            politeness=PolitenessConfig(per_host=1, delay=0),
        )
        await coordinate(config, redis_url)
    found = {"/" + url.split("/", 3)[3]: (dup, near) for url, dup, near in rows(
        shard, "SELECT url, duplicate_of, near_duplicate_of FROM captures")}  # fmt: skip
    (a_fp,) = rows(shard, "SELECT fp FROM urls WHERE url = ?", site.url + "/a")[0]
    (copy_fp,) = rows(shard, "SELECT fp FROM urls WHERE url = ?", site.url + "/copy")[0]
    assert found["/copy"][0] == a_fp and found["/a"] == (None, None)
    assert found["/near"][1] in (a_fp, copy_fp)
    assert "/from-near" not in found


async def test_nodes_find_each_others_near_duplicates_in_redis(redis_url: str) -> None:
    async with redis.asyncio.Redis.from_url(redis_url) as one, redis.asyncio.Redis.from_url(redis_url) as two:
        keys = Keys("twins")
        first, second = RedisTwins(one, keys), RedisTwins(two, keys)
        page = 0x1234_5678_9ABC_DEF0
        assert await first.find(1, page, 3) is None
        assert await first.find(1, page ^ 0b101, 3) is None  # the page itself is never its own twin
        assert await second.find(2, page ^ 0b111, 3) == 1  # three bits from node one's page
        assert await second.find(3, page ^ 0x0F0F_0000_0000_0000, 3) is None  # eight bits apart
        negative = signed(page ^ (1 << 64) - 1)  # every bit flipped; hashes are signed 64-bit, as SQLite stores them
        assert await second.find(4, negative, 3) is None
        assert await first.find(5, signed(negative ^ 0b11), 3) == 4


def signed(h: int) -> int:
    return h - (1 << 64) if h >= 1 << 63 else h
