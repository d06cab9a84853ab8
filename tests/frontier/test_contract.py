"""The frontier contract: every backend must pass these (see `webtrawl.frontier.base`).

A backend joins by adding a factory to `BACKENDS`: an async context manager yielding
`(frontier, reopen)` where `reopen()` closes the frontier as a dying process would and opens it again;
it takes the budgets `(max URLs per host, max URLs per template)`, None meaning no limit.

A test that needs a capability some backend lacks by design is marked `capability(NAME)`; the backends
without it are listed in `LACKS` with the reason, and report the test as skipped with that reason.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest
import redis.cluster

from tests.redis_servers import blocking_client
from webtrawl.cluster.frontier import RedisFrontier
from webtrawl.cluster.keys import Keys
from webtrawl.cluster.layout import Layout
from webtrawl.cluster.leases import Leases
from webtrawl.cluster.redisconn import connect
from webtrawl.cluster.scripts import Scripts
from webtrawl.config import PolitenessConfig
from webtrawl.fetch.robots import ALLOW_ALL
from webtrawl.frontier.base import Frontier
from webtrawl.frontier.budgets import Budgets
from webtrawl.frontier.sqlite import SqliteFrontier
from webtrawl.models import Capture, Completion, Entry, NewURL
from webtrawl.politeness import Politeness
from webtrawl.store.crawls import open_crawl
from webtrawl.store.db import Database
from webtrawl.store.index import index_captures
from webtrawl.urls import fingerprint, origin

Reopen = Callable[[], Awaitable[Frontier]]


@asynccontextmanager
async def sqlite_backend(
    tmp_path: Path,
    politeness: Politeness,
    budgets: tuple[int | None, int | None] = (None, None),
    *,
    importance: bool = False,
) -> AsyncIterator[tuple[Frontier, Reopen]]:
    dbs: list[Database] = []

    async def open_frontier() -> Frontier:
        db = await Database(tmp_path / "crawl.db").open()
        dbs.append(db)
        crawl_id, _ = await db.run(open_crawl, "test", {"seeds": []})
        return await SqliteFrontier.open(db, crawl_id, politeness, budgets=Budgets(*budgets), importance=importance)

    async def reopen() -> Frontier:
        await dbs[-1].close()  # no frontier.close(): running URLs stay running, as after a crash
        return await open_frontier()

    yield await open_frontier(), reopen
    await dbs[-1].close()


@asynccontextmanager
async def redis_backend(
    tmp_path: Path,
    politeness: Politeness,
    budgets: tuple[int | None, int | None] = (None, None),
    *,
    importance: bool = False,
    url: str = "",
) -> AsyncIterator[tuple[Frontier, Reopen]]:
    """One node holding every partition of a crawl in a Redis (standalone or Cluster) emptied for the test."""
    keys = Keys("contract")
    layout = Layout(partitions=4, max_urls_per_host=budgets[0], max_urls_per_template=budgets[1])
    sync = blocking_client(url)
    if isinstance(sync, redis.cluster.RedisCluster):  # the partitions span every master, so routing is tested
        assert len({sync.get_node_from_key(keys.counters(p)).name for p in range(layout.partitions)}) == 3
    clients = []

    async def open_frontier(node: str) -> Frontier:
        client = await connect(url)
        clients.append(client)
        leases = Leases(node, keys, layout.partitions, ttl=60)
        scripts = Scripts(sync)
        for p in range(layout.partitions):
            assert leases.acquire(scripts, p)
        return RedisFrontier(client, keys, layout, leases, politeness, importance=importance)

    async def reopen() -> Frontier:
        for p in range(layout.partitions):  # the dead node's leases expire (deleted instead of waiting)
            sync.delete(keys.lease(p))
        return await open_frontier("node-02")

    try:
        yield await open_frontier("node-01"), reopen
    finally:
        for client in clients:
            await client.aclose()
        sync.close()


BACKENDS = {"sqlite": sqlite_backend, "redis": redis_backend, "redis-cluster": redis_backend}
"""`redis` runs on a standalone server, `redis-cluster` on a 3-master Cluster: the same code, other routing."""
_NODE_ALONE = {
    "local-end": "a node cannot tell alone that a distributed crawl is over: the coordinator decides it "
    "(tested in tests/cluster/test_end.py)",
}
LACKS = {"redis": _NODE_ALONE, "redis-cluster": _NODE_ALONE}
SERVERS = {"redis": "redis_url", "redis-cluster": "redis_cluster_url"}
"""The fixture giving each Redis backend its emptied server."""


def url(path: str, host: str = "a.test", depth: int = 1, kind: str = "link") -> NewURL:
    full = f"http://{host}{path}"
    return NewURL(url=full, fp=fingerprint(full), host=origin(full), depth=depth, kind=kind)  # type: ignore[arg-type]


def done(entry: Entry, *children: NewURL, capture: bool = False) -> Completion:
    cap = (
        Capture(
            fp=entry.fp,
            url=entry.url,
            fetched_at=time.time(),
            status=200,
            content_type="text/html",
            size=10,
            title=f"title of {entry.url}",
            text="hello zebra",
        )
        if capture
        else None
    )
    return Completion(entry=entry, verdict="done", children=list(children), capture=cap)


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path):
    for mark in request.node.iter_markers("capability"):
        reason = LACKS.get(request.param, {}).get(mark.args[0])
        if reason:
            pytest.skip(f"{request.param} lacks {mark.args[0]!r} by design: {reason}")
    server = SERVERS.get(request.param)
    extra = {"url": request.getfixturevalue(server)} if server else {}

    def make(
        per_host: int = 10,
        delay: float = 0.0,
        robots_known: bool = True,
        budgets: tuple[int | None, int | None] = (None, None),
        importance: bool = False,
    ):
        politeness = Politeness(
            PolitenessConfig(per_host=per_host, delay=delay), robots=ALLOW_ALL if robots_known else None
        )
        return BACKENDS[request.param](tmp_path, politeness, budgets, importance=importance, **extra), politeness

    return make


async def claim_all(frontier: Frontier, n: int = 100) -> list[Entry]:
    return await frontier.claim(n)


async def test_add_ignores_seen_urls(backend) -> None:
    ctx, _ = backend()
    async with ctx as (frontier, _reopen):
        assert await frontier.add([url("/a"), url("/b")]) == 2
        assert await frontier.add([url("/a"), url("/c")]) == 1
        assert sorted(e.url for e in await claim_all(frontier)) == [
            "http://a.test/a",
            "http://a.test/b",
            "http://a.test/c",
        ]


async def test_waiting_url_takes_the_smaller_depth(backend) -> None:
    ctx, _ = backend()
    async with ctx as (frontier, _reopen):
        await frontier.add([url("/deep", depth=5)])
        await frontier.add([url("/deep", depth=2)])
        await frontier.add([url("/deep", depth=4)])
        [entry] = await claim_all(frontier)
        assert entry.depth == 2


async def test_per_host_smaller_depth_first(backend) -> None:
    ctx, _ = backend(per_host=1)
    async with ctx as (frontier, _reopen):
        await frontier.add([url("/d3", depth=3), url("/d1", depth=1), url("/d2", depth=2), url("/d1b", depth=1)])
        order = []
        for _ in range(4):
            [entry] = await frontier.claim(10)
            order.append(entry.url.rsplit("/", 1)[1])
            await frontier.complete([done(entry)], {})
            backend_release(frontier, entry)
        assert order == ["d1", "d1b", "d2", "d3"]


async def test_a_url_found_shallower_after_earlier_claims_goes_before_the_deeper_ones(backend) -> None:
    """Claims may read a host's next URLs ahead of handing them out; a URL that arrives at a smaller depth
    (new, or a waiting one found closer), or at the same depth as the waiting ones, still takes its place
    in the order, and every URL is handed out once."""
    ctx, _ = backend(per_host=1)
    async with ctx as (frontier, _reopen):
        await frontier.add([url(f"/d3-{i}", depth=3) for i in range(40)])
        order = []

        async def take_one() -> None:
            [entry] = await frontier.claim(10)
            order.append(entry.url.rsplit("/", 1)[1])
            await frontier.complete([done(entry)], {})
            backend_release(frontier, entry)

        await take_one()
        await frontier.add([url("/d2", depth=2)])
        await take_one()
        await frontier.add([url("/d3-39", depth=1)])  # waiting at depth 3, found at depth 1
        await take_one()
        await take_one()
        [entry] = await frontier.claim(10)  # its link arrives behind the URLs of its depth
        order.append(entry.url.rsplit("/", 1)[1])
        await frontier.complete([done(entry, url("/d3-new", depth=3))], {})
        backend_release(frontier, entry)
        while len(order) < 42:
            await take_one()
        assert order[:4] == ["d3-0", "d2", "d3-39", "d3-1"]
        assert order[-1] == "d3-new"
        assert sorted(order) == sorted([f"d3-{i}" for i in range(40)] + ["d2", "d3-new"])
        assert await frontier.claim(10) == []


def backend_release(frontier: Frontier, entry: Entry) -> None:
    frontier._politeness.release(entry.host)  # type: ignore[attr-defined]


@pytest.mark.parametrize("importance", [False, True], ids=["bfs", "importance"])
async def test_importance_puts_the_url_most_linked_to_first_within_its_depth(backend, importance: bool) -> None:
    """The seed links three sections; each links its own page and, after it, a page all three share. By
    importance the shared page (half the seed's cash) goes before the others (a sixth each), although it
    arrived after the first section's own page and gathered most of its cash while waiting."""
    ctx, _ = backend(per_host=1, importance=importance)
    async with ctx as (frontier, _reopen):
        await frontier.add([url("/", depth=0, kind="seed")])
        [seed] = await frontier.claim(10)
        await frontier.complete([done(seed, url("/s1"), url("/s2"), url("/s3"))], {})
        backend_release(frontier, seed)
        for _ in range(3):
            [section] = await frontier.claim(10)
            name = section.url.rsplit("/", 1)[1]
            await frontier.complete([done(section, url(f"/{name}-own", depth=2), url("/shared", depth=2))], {})
            backend_release(frontier, section)
        order, cash = [], {}
        for _ in range(4):
            [entry] = await frontier.claim(10)
            order.append(entry.url.rsplit("/", 1)[1])
            cash[order[-1]] = entry.priority
            await frontier.complete([done(entry)], {})
            backend_release(frontier, entry)
        if importance:
            assert order[0] == "shared"
            assert cash == pytest.approx({"shared": 1 / 2, "s1-own": 1 / 6, "s2-own": 1 / 6, "s3-own": 1 / 6})
        else:
            assert order[:2] == ["s1-own", "shared"]
        assert sorted(order) == ["s1-own", "s2-own", "s3-own", "shared"]


async def test_across_hosts_lowest_ready_depth_first(backend) -> None:
    ctx, _ = backend()
    async with ctx as (frontier, _reopen):
        await frontier.add([url("/x", host="deep.test", depth=4), url("/y", host="shallow.test", depth=1)])
        [entry] = await frontier.claim(1)
        assert entry.host == "http://shallow.test"


async def test_claim_respects_per_host_slots_and_hands_out_each_url_once(backend) -> None:
    ctx, _ = backend(per_host=2)
    async with ctx as (frontier, _reopen):
        await frontier.add([url(f"/{i}") for i in range(5)] + [url("/z", host="b.test")])
        first = await frontier.claim(10)
        assert sorted(e.host for e in first) == ["http://a.test", "http://a.test", "http://b.test"]
        assert await frontier.claim(10) == []
        backend_release(frontier, first[0])
        second = await frontier.claim(10)
        assert len(second) == 1 and second[0].url not in {e.url for e in first}


async def test_delay_spaces_request_starts(backend) -> None:
    ctx, _ = backend(per_host=5, delay=0.2)
    async with ctx as (frontier, _reopen):
        await frontier.add([url("/1"), url("/2")])
        assert len(await frontier.claim(10)) == 1
        assert await frontier.claim(10) == []
        wakeup = frontier.next_wakeup()
        assert wakeup is not None and 0.1 < wakeup <= 0.2
        await asyncio.sleep(wakeup)
        assert len(await frontier.claim(10)) == 1


async def test_host_without_robots_rules_is_not_ready(backend) -> None:
    ctx, politeness = backend(robots_known=False)
    async with ctx as (frontier, _reopen):
        await frontier.add([url("/1")])
        assert await frontier.claim(10) == []
        assert list(politeness.robots_wanted) == ["http://a.test"]
        politeness.set_rules("http://a.test", ALLOW_ALL)
        assert len(await frontier.claim(10)) == 1


@pytest.mark.capability("local-end")
async def test_children_then_done_then_exhausted(backend) -> None:
    ctx, _ = backend()
    async with ctx as (frontier, _reopen):
        await frontier.add([url("/", depth=0, kind="seed")])
        [seed] = await frontier.claim(10)
        assert not frontier.exhausted()
        await frontier.complete([done(seed, url("/a"), url("/b"), url("/"))], {})
        counts = await frontier.counts()
        assert (counts.waiting, counts.done, counts.running) == (2, 1, 0)
        assert counts.waiting_by_depth == {1: 2}
        children = await frontier.claim(10)
        assert {e.referrer_fp for e in children} == {None}  # added by url() without referrer
        await frontier.complete([done(e) for e in children], {})
        assert frontier.exhausted()
        assert frontier.done_count() == 3


async def test_retry_waits_until_not_before_and_counts_attempts(backend) -> None:
    ctx, _ = backend()
    async with ctx as (frontier, _reopen):
        await frontier.add([url("/flaky")])
        [entry] = await frontier.claim(10)
        backend_release(frontier, entry)
        retry = Completion(entry=entry, verdict="retry", reason="HTTP 503", not_before=time.time() + 0.2)
        await frontier.complete([retry], {})
        assert await frontier.claim(10) == []
        assert not frontier.exhausted()
        wakeup = frontier.next_wakeup()
        assert wakeup is not None and wakeup <= 0.2
        await asyncio.sleep(0.25)
        [again] = await frontier.claim(10)
        assert again.url == entry.url and again.attempts == 1


@pytest.mark.capability("local-end")
async def test_failed_urls_are_counted_with_their_reason(backend) -> None:
    ctx, _ = backend()
    async with ctx as (frontier, _reopen):
        await frontier.add([url("/gone")])
        [entry] = await frontier.claim(10)
        await frontier.complete([Completion(entry=entry, verdict="failed", reason="HTTP 404")], {})
        counts = await frontier.counts()
        assert (counts.failed, counts.done, counts.waiting) == (1, 0, 0)
        assert frontier.exhausted()


async def test_running_urls_return_to_waiting_after_a_crash(backend) -> None:
    ctx, _ = backend()
    async with ctx as (frontier, reopen):
        await frontier.add([url("/1"), url("/2")])
        claimed = await frontier.claim(10)
        await frontier.complete([done(claimed[0])], {})
        frontier = await reopen()
        [entry] = await frontier.claim(10)
        assert entry.url == claimed[1].url
        assert frontier.done_count() == 1


@pytest.mark.parametrize("name", ["sqlite"])
async def test_sqlite_commit_writes_captures_links_drops_and_checkpoint(tmp_path: Path, name: str) -> None:
    politeness = Politeness(PolitenessConfig(per_host=10, delay=0), robots=ALLOW_ALL)
    async with sqlite_backend(tmp_path, politeness) as (frontier, _reopen):
        await frontier.add([url("/", depth=0, kind="seed")])
        [seed] = await frontier.claim(10)
        completion = done(seed, url("/a"), capture=True)
        completion.drops.append(("http://elsewhere.test/", "out-of-scope"))
        await frontier.complete([completion], {"test-1.warc.gz": 1234})
    conn = sqlite3.connect(tmp_path / "crawl.db", isolation_level=None)
    assert index_captures(conn) == 1
    assert conn.execute("SELECT name, committed_end FROM warc_files").fetchall() == [("test-1.warc.gz", 1234)]
    assert conn.execute("SELECT reason FROM dropped").fetchall() == [("out-of-scope",)]
    assert conn.execute("SELECT COUNT(*) FROM links").fetchone() == (1,)
    hits = conn.execute("SELECT url FROM captures_fts WHERE captures_fts MATCH 'zebra'").fetchall()
    assert hits == [("http://a.test/",)]


# -- budgets ----------------------------------------------------------------------------------------


async def claimed_paths(frontier: Frontier) -> set[str]:
    return {"/" + e.url.split("/", 3)[3] for e in await frontier.claim(10_000)}


async def test_host_budget_admits_new_urls_up_to_the_limit(backend) -> None:
    ctx, _ = backend(budgets=(5, None))
    async with ctx as (frontier, _reopen):
        assert await frontier.add([url(f"/{i}") for i in range(3)]) == 3
        assert await frontier.add([url(f"/{i}") for i in range(3, 8)] + [url("/x", host="b.test")]) == 3
        assert await claimed_paths(frontier) == {"/0", "/1", "/2", "/3", "/4", "/x"}


async def test_template_budget_counts_digit_runs_and_query_names_as_one_shape(backend) -> None:
    ctx, _ = backend(budgets=(None, 3))
    async with ctx as (frontier, _reopen):
        calendar = [url(f"/cal/{2026 + i // 12}/{i % 12 + 1:02d}/") for i in range(10)]
        search = [url("/find?q=w&page=0"), url("/find?page=1&q=z"), url("/find?q=a&page=2&q=b")]
        await frontier.add([*calendar, *search, url("/find?q=y&page=3"), url("/find?sort=x")])
        assert await claimed_paths(frontier) == {
            "/cal/2026/01/",
            "/cal/2026/02/",
            "/cal/2026/03/",
            "/find?q=w&page=0",
            "/find?page=1&q=z",
            "/find?q=a&page=2&q=b",
            "/find?sort=x",
        }


async def test_a_url_already_in_the_frontier_never_counts_twice(backend) -> None:
    ctx, _ = backend(budgets=(3, 2))
    async with ctx as (frontier, _reopen):
        await frontier.add([url("/p/1", depth=3), url("/p/2", depth=3)])
        # found again, and found closer (its depth is lowered): neither costs budget
        await frontier.add([url("/p/1", depth=3), url("/p/2", depth=1), url("/p/2", depth=1)])
        await frontier.add([url("/other")])
        entries = {e.url.removeprefix("http://a.test"): e for e in await frontier.claim(10)}
        assert set(entries) == {"/p/1", "/p/2", "/other"}
        assert entries["/p/2"].depth == 1
        await frontier.complete([done(entries["/p/1"], url("/p/2"), url("/p/3"), url("/p/1"))], {})
        counts = await frontier.counts()
        assert counts.total == 3  # /p/3 was over both budgets


async def test_seeds_are_exempt_and_sitemap_entries_skip_the_template_budget(backend) -> None:
    ctx, _ = backend(budgets=(4, 1))
    async with ctx as (frontier, _reopen):
        await frontier.add([url(f"/s/{i}", depth=0, kind="seed") for i in range(3)])
        await frontier.add([url(f"/m/{i}", kind="sitemap") for i in range(3)])  # 1 fits the host budget
        await frontier.add([url(f"/s/{i}", host="b.test", depth=0, kind="seed") for i in range(3, 8)])
        await frontier.add([url(f"/l/{i}", host="b.test") for i in range(3)])  # over the host budget
        assert await claimed_paths(frontier) == {"/s/0", "/s/1", "/s/2", "/m/0", *(f"/s/{i}" for i in range(3, 8))}


async def test_budget_counts_survive_a_reopen(backend) -> None:
    ctx, _ = backend(budgets=(None, 4))
    async with ctx as (frontier, reopen):
        await frontier.add([url(f"/item/{i}") for i in range(3)])
        frontier = await reopen()
        await frontier.add([url(f"/item/{i}") for i in range(1, 6)])
        assert await claimed_paths(frontier) == {f"/item/{i}" for i in range(4)}


async def test_a_batch_crossing_the_limit_keeps_its_first_new_urls(backend) -> None:
    ctx, _ = backend(budgets=(None, 5))
    async with ctx as (frontier, _reopen):
        await frontier.add([url("/n/1"), url("/n/3")])
        await frontier.add([url(f"/n/{i}") for i in range(8)])  # /n/1 and /n/3 are not new
        assert await claimed_paths(frontier) == {f"/n/{i}" for i in range(5)}


@pytest.mark.parametrize("name", ["sqlite"])
async def test_sqlite_budget_drops_are_recorded_with_reason_and_referrer(tmp_path: Path, name: str) -> None:
    politeness = Politeness(PolitenessConfig(per_host=10, delay=0), robots=ALLOW_ALL)
    async with sqlite_backend(tmp_path, politeness, (3, 1)) as (frontier, _reopen):
        await frontier.add([url("/", depth=0, kind="seed")], [("http://elsewhere.test/m", "out-of-scope")])
        [seed] = await frontier.claim(10)
        # the seed counts (host 1 of 3, template "/" 1 of 1); /a/1 and /a/2 share a template
        children = [replace(url(path), referrer_fp=seed.fp) for path in ("/a/1", "/a/2", "/b", "/c", "/d")]
        await frontier.complete([done(seed, *children)], {})
    conn = sqlite3.connect(tmp_path / "crawl.db", isolation_level=None)
    dropped = conn.execute("SELECT url, reason, referrer_fp FROM dropped ORDER BY url").fetchall()
    assert dropped == [
        ("http://a.test/a/2", "template-budget", seed.fp),
        ("http://a.test/c", "host-budget", seed.fp),
        ("http://a.test/d", "host-budget", seed.fp),
        ("http://elsewhere.test/m", "out-of-scope", None),
    ]
    assert conn.execute("SELECT COUNT(*) FROM links").fetchone() == (5,)  # a link is a link, over budget or not
    assert {fp for (fp,) in conn.execute("SELECT fp FROM urls")} == {seed.fp, children[0].fp, children[2].fp}
