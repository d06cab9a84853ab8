"""Starting a distributed crawl's processes: the coordinator (`webtrawl crawl --redis`) and a worker."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from ..config import CrawlConfig
from ..errors import ConfigError, NodeExited
from ..interrupts import Interrupts
from ..politeness import Politeness
from ..stats import CrawlReport
from ..store.crawls import extra_hosts
from ..store.opened import OutcomeCounts, fetched_since, open_crawl_directory, outcome_counts
from ..store.schedule import DueCursor, due_in
from ..store.shards import ShardPlace, Sources, save_places
from .coordinator import CoordinatorLease, check_present, create_or_join, load_crawl, scan, watch_for_end
from .events import Event, Requeued, Restored, Running
from .frontier import RedisFrontier
from .keys import Keys
from .layout import Layout
from .leases import Leases
from .node import HEARTBEAT, Node, live_nodes, register
from .ownnode import OwnNode, following_coordinator
from .progress import keep_publishing, publish_now
from .redisconn import advising_when_gone, cancel, joining, open_clients, persist, pipelined
from .restore import restore_if_due
from .shard import registered_shards, settle_left
from .status import all_nodes

log = logging.getLogger(__name__)

REPORT_WAIT = 300.0
"""Seconds at most the coordinator waits for live nodes' final reports once the crawl is over: a node reports
once its last batch is settled in its shard, which the run's report is counted from. A node that dies stops
being live (its heartbeat ends), so only a node alive and stuck makes it wait that long."""
REPORT_QUIET = 10.0
"""Seconds it waits before saying which nodes it waits for."""


async def run_coordinator(
    config: CrawlConfig,
    url: str,
    layout: Layout,
    *,
    fetch: bool = True,
    refetch_lost: bool = False,
    on_event: Callable[[Event], None] | None = None,
    interrupts: Interrupts | None = None,
) -> tuple[CrawlReport, dict[str, dict[str, Any]]]:
    """Create or rejoin the crawl, crawl as a node (unless `fetch` is off), and watch it until it ends.
    `refetch_lost`: a crawl Redis lost is rebuilt even without the shards this machine cannot read
    (`cluster.restore`).

    With `interrupts` (the command's Ctrl-C), an interrupt while crawling stops this process gracefully (its
    fetches in flight finish); the crawl goes on in Redis. Without, only `webtrawl control stop` ends a run.

    Returns the crawl's report and each node's final report. With `--every`, a pass that finds nothing left
    to do leaves the crawl "idle" instead of finished: workers stay, and the next pass (`--recrawl` again)
    re-queues the URLs due by then.
    """
    client, sync = await open_clients(url)
    keys = Keys(config.name)
    lease = CoordinatorLease(client, keys, layout.lease_ttl)
    try:
        async with advising_when_gone(client):
            await lease.acquire(on_event)
            try:
                config, layout = await create_or_join(client, keys, config, layout)
                return await _coordinate(
                    config,
                    client,
                    sync,
                    keys,
                    layout,
                    lease,
                    node_url=url if fetch else None,
                    refetch_lost=refetch_lost,
                    on_event=on_event,
                    interrupts=interrupts,
                )
            finally:
                await lease.release()
    finally:
        await client.aclose()
        sync.close()


async def _coordinate(
    config: CrawlConfig,
    client: Any,
    sync: Any,
    keys: Keys,
    layout: Layout,
    lease: CoordinatorLease,
    *,
    node_url: str | None,
    refetch_lost: bool,
    on_event: Callable[[Event], None] | None,
    interrupts: Interrupts | None,
) -> tuple[CrawlReport, dict[str, dict[str, Any]]]:
    """`node_url`: the Redis its own node joins the crawl through, None for a coordinator that does not fetch."""
    async with open_crawl_directory(config) as opened:
        out, db, crawl_id, gained = opened.out, opened.db, opened.crawl_id, opened.gained_hosts
        frontier = _frontier(client, keys, layout, config)
        # Every node learns them from Redis: a crawl rebuilt there, or one an earlier webtrawl started, too.
        # The nodes' shards keep those their pages gained.
        gained = [*gained, *await asyncio.to_thread(_gained_in_shards, out, config.name)]
        await frontier.widen_scope(list(dict.fromkeys(gained)))
        restored = await restore_if_due(client, keys, db, crawl_id, frontier, out, refetch_lost=refetch_lost)
        if restored is not None and on_event is not None:
            on_event(Restored(keys.name, restored.urls, restored.shards, len(restored.unreachable)))
        await frontier.add(opened.seed_urls())
        if config.revisit.recrawl:
            revisited = await _requeue_due(out, config.name, frontier)
            if on_event is not None:
                on_event(Requeued(keys.name, revisited))
        started = time.time()  # the shards' captures from here on are this run's
        # A new run: a crawl stopped (or over, or idle between passes) before runs again; reports are this run's.
        if await client.get(keys.control) in (b"stop", b"finished", b"idle"):
            await client.set(keys.control, "run")
        await client.delete(keys.report)
        node_task: asyncio.Task[None] | None = None
        node: OwnNode | None = None
        outcome = "finished"
        interrupted = asyncio.Event()
        # A Ctrl-C from here on stops this process's node gracefully; before, it cancels the set-up.
        with interrupts.stopping(interrupted.set) if interrupts else contextlib.nullcontext():
            async with asyncio.TaskGroup() as tg:
                if node_url is not None:
                    node = await OwnNode.start(node_url, config, opened.lock.fd)
                    node_task = tg.create_task(_own_node(node, client, keys, layout))
                renewing = tg.create_task(_renew(client, keys, layout, lease))
                listing = tg.create_task(_list_shards(client, keys, out))
                publishing = tg.create_task(keep_publishing(client, sync, keys, layout, db, crawl_id))
                ending = tg.create_task(watch_for_end(client, keys, layout.partitions))
                stopping = tg.create_task(_watch_for_stop(client, keys))
                limits = tg.create_task(_watch_limits(client, keys, layout, config))
                interrupt = tg.create_task(interrupted.wait())
                live = tg.create_task(_live_reports(client, sync, keys, layout, on_event)) if on_event else None
                watchers = {ending, stopping, limits, interrupt}
                done, _ = await asyncio.wait(watchers, return_when=asyncio.FIRST_COMPLETED)
                if ending in done:
                    end = "finished" if config.revisit.every is None else "idle"
                    await persist("declaring the end", lambda: client.set(keys.control, end))
                    if node is not None:
                        # The workers read it at their next heartbeat and wait for the next pass if idle.
                        node.tell("leave" if end == "idle" else end)
                elif limits in done:
                    outcome = limits.result()  # the whole crawl was told to stop at --max-pages / --max-time
                    await _watch_for_stop(client, keys)
                elif interrupt in done:
                    outcome = "interrupted"  # this process only: the crawl goes on in Redis
                    if node is not None:
                        node.tell("leave")
                else:
                    outcome = "stopped"  # by `webtrawl control stop`: in-flight fetches finished, nothing lost
                await cancel(watchers)
                if node_task is not None:
                    await node_task
                # Nodes report when they leave: not after a pass that leaves them waiting for the next.
                leaving = outcome != "interrupted" and config.revisit.every is None
                reports = await _final_reports(client, sync, keys, wait=leaving)
                heartbeats = await persist("reading nodes", lambda: asyncio.to_thread(all_nodes, sync, keys))
                await cancel({renewing, listing, publishing, *filter(None, [live])})
        if await settle_left(client, keys, layout.partitions, out, config.name, config.near_distance):
            log.info("settled what killed nodes left staged in their shards")
        # A pass of `--every` that found nothing left leaves the crawl idle, not finished: so it says.
        last_word = "idle" if outcome == "finished" and config.revisit.every is not None else outcome
        await publish_now(client, sync, keys, layout, db, crawl_id, last_word)
        counts = await scan(client, keys, layout.partitions)
        unreachable, fetched, outcomes = await asyncio.to_thread(_count_run, out, config.name, started)
        for lost in unreachable:
            log.warning("the shard at %s cannot be read here: its pages are not in this run's counts", lost)
        nodes = _run_nodes(reports, heartbeats, fetched)
        report = CrawlReport(
            name=config.name,
            outcome=outcome,
            pages=sum(row["pages"] for row in nodes.values()),
            bytes=sum(row["bytes"] for row in nodes.values()),
            elapsed=max((r.get("elapsed", 0) for r in reports.values()), default=0),
            done_total=counts.done,
            failed_total=counts.failed,
            waiting=counts.waiting,
            **outcomes,
        )
        (out / f"{config.name}-nodes.json").write_text(json.dumps(nodes, indent=2, sort_keys=True))
        await asyncio.to_thread(save_places, out, await registered_shards(client, keys))
        return report, nodes


def _gained_in_shards(out: Path, name: str) -> list[str]:
    """The hosts the crawl's scope gained, as the nodes' shards recorded them."""
    with Sources.shards_of(out, name) as shards:
        return [host for shard in shards.all for host in extra_hosts(shard.conn, shard.crawl_id)]


SHARDS_EVERY = 0.5
"""Seconds between two looks for a shard registered since (a new node waits for its listing to fetch)."""


async def _list_shards(client: Any, keys: Keys, out: Path) -> None:
    """Keep `DIR/shards.json` up to date while the crawl runs, so a reader of DIR finds every node's shard: a
    shard registered since the last look is written into it, then marked listed in Redis, which lets its
    node fetch (`cluster.shard.register_shard`)."""
    listed: list[ShardPlace] = []
    while True:
        places = await registered_shards(client, keys)
        if places and sorted(places, key=lambda p: p.key) != listed:
            try:
                await asyncio.to_thread(save_places, out, places)
            except OSError as exc:  # a full disk: the new nodes wait, the crawl goes on
                log.warning("could not list the crawl's shards in %s: %s", out, exc)
            else:
                keys_listed = [place.key for place in places]
                await persist("listing the shards", partial(client.sadd, keys.listed, *keys_listed))
                listed = sorted(places, key=lambda p: p.key)
        await asyncio.sleep(SHARDS_EVERY)


async def _own_node(node: OwnNode, client: Any, keys: Keys, layout: Layout) -> None:
    try:
        await node.wait()
    except NodeExited:
        await check_present(client, keys, layout.incarnation)  # the node failed because Redis lost the crawl
        raise


def _run_nodes(
    reports: dict[str, dict[str, Any]], heartbeats: dict[str, dict[str, Any]], fetched: dict[str, tuple[int, int]]
) -> dict[str, dict[str, Any]]:
    """Every node of this run, with the pages and bytes of it the shards hold.

    Counted from the shards, not from what nodes say they fetched: a killed node says nothing, and a node's
    late fetches refused under a lease it had lost are not the crawl's. A node that left no final report (it
    was killed or cut off, or it stays for the next pass) is shown from its last heartbeat: its state is its
    outcome (`lost` when that heartbeat is old).
    """
    nodes = {}
    for node in sorted(set(reports) | set(fetched)):
        last = heartbeats.get(node, {})
        row = reports.get(node) or {
            "host": last.get("host", ""),
            "pid": last.get("pid", 0),
            "elapsed": last.get("elapsed", 0),
            "outcome": last.get("state", "lost"),
        }
        pages, size = fetched.get(node, (0, 0))
        elapsed = row.get("elapsed") or 0
        nodes[node] = {
            **row,
            "pages": pages,
            "bytes": size,
            "pages_per_s": round(pages / elapsed, 2) if elapsed else 0.0,
        }
    return nodes


def _frontier(client: Any, keys: Keys, layout: Layout, config: CrawlConfig) -> RedisFrontier:
    """The coordinator's hand into the partitions: it adds seeds (a URL given explicitly bypasses the Bloom
    filter) and re-queues due URLs; it holds no lease and claims nothing."""
    leases = Leases("coordinator", keys, layout.partitions, ttl=1.0)
    return RedisFrontier(
        client, keys, layout, leases, Politeness(config.politeness), importance=config.order == "importance"
    )


REVISIT_CHUNK = 10_000
"""Due URLs read from the shards and re-queued at a time."""


async def _requeue_due(out: Path, name: str, frontier: RedisFrontier) -> int:
    """Put the URLs whose revisit is due, by the shards (each URL's latest fetch in any of them), back in their
    partitions. A partition keeps a URL it has waiting or running as it is, so a run that stopped before its
    nodes fetched them sends them again harmlessly; once fetched, a shard's row is due later."""
    requeued = 0
    cursor: DueCursor | None = (0, 0)
    with Sources.open(out, name) as sources:
        while cursor is not None:
            due, cursor = await asyncio.to_thread(due_in, sources, time.time(), cursor, REVISIT_CHUNK)
            requeued += await frontier.revisit(due)
    return requeued


async def _renew(client: Any, keys: Keys, layout: Layout, lease: CoordinatorLease) -> None:
    while True:
        await asyncio.sleep(HEARTBEAT)
        await check_present(client, keys, layout.incarnation)
        if not await lease.renew():
            raise ConfigError("this coordinator lost its lease (it stalled too long); another one took over")


async def _watch_limits(client: Any, keys: Keys, layout: Layout, config: CrawlConfig) -> str:
    """Tell every node to stop once the crawl reached --max-pages (crawl-wide) or this run --max-time."""
    started = asyncio.get_running_loop().time()
    while True:
        await asyncio.sleep(0.5)
        if config.max_time is not None and asyncio.get_running_loop().time() - started >= config.max_time:
            reason = "max-time"
        elif config.max_pages is not None and await _done(client, keys, layout) >= config.max_pages:
            reason = "max-pages"
        else:
            continue
        await persist("stopping the crawl", lambda: client.set(keys.control, "stop"))
        return reason


async def _done(client: Any, keys: Keys, layout: Layout) -> int:
    def fill(pipe: Any) -> None:
        for p in range(layout.partitions):
            pipe.hget(keys.counters(p), "done")

    return sum(int(v or 0) for v in await persist("counting pages", lambda: pipelined(client, fill)))


async def _watch_for_stop(client: Any, keys: Keys) -> None:
    while await persist("reading the control key", lambda: client.get(keys.control)) != b"stop":
        await asyncio.sleep(0.5)
    # Nodes let in-flight fetches finish, settle them in their shards and leave.
    await asyncio.sleep(HEARTBEAT)


def _count_run(out: Path, name: str, started: float) -> tuple[list[str], dict[str, tuple[int, int]], OutcomeCounts]:
    """What the run's report counts from the crawl's shards (read off the event loop): the shards it could
    not read, what each node fetched since `started` (`store.opened.fetched_since`), and the outcomes."""
    with Sources.open(out, name) as sources:
        return [place.key for place in sources.unreachable], fetched_since(sources, started), outcome_counts(sources)


async def _final_reports(client: Any, sync: Any, keys: Keys, *, wait: bool) -> dict[str, dict[str, Any]]:
    """Wait (if `wait`) for every live node's final report."""
    clock = asyncio.get_running_loop().time
    started = clock()
    told = not wait
    while True:
        reports = await persist("reading node reports", lambda: client.hgetall(keys.report))
        reports = {k.decode(): json.loads(v) for k, v in reports.items()}
        live = await persist("reading nodes", lambda: asyncio.to_thread(live_nodes, sync, keys))
        awaited = sorted(node for node in live if node not in reports)
        if not awaited or not wait or clock() - started > REPORT_WAIT:
            if awaited and wait:
                log.warning("gave up waiting for the final report of %s: the run's report may miss their last "
                            "pages (they are in their shards once settled)", ", ".join(awaited))  # fmt: skip
            return reports
        if not told and clock() - started > REPORT_QUIET:
            told = True
            log.warning("waiting for %s to settle their last pages and report", ", ".join(awaited))
        await asyncio.sleep(0.5)


async def run_worker(
    url: str,
    name: str,
    *,
    out: Path | None,
    concurrency: int | None,
    interrupts: Interrupts | None = None,
    coordinator_pipe: int | None = None,
    lock_fd: int | None = None,
) -> tuple[str, CrawlReport]:
    """Join crawl `name` as a node; returns the node id and its report when the crawl ends or it is stopped
    (with `interrupts`, the command's Ctrl-C, by an interrupt too: its fetches in flight finish).

    `coordinator_pipe`: this is the node a coordinator started (`ownnode`), told commands on this pipe from its
    start, and waiting for Redis until it has joined the crawl (`redisconn.joining`); `lock_fd`: the lock of
    `out` it holds and handed down (`store.db.DirectoryLock`)."""
    async with contextlib.AsyncExitStack() as stack:
        follow: Callable[[Node], None] | None = None
        if coordinator_pipe is not None:  # first: a coordinator that dies while this node waits for Redis ends it
            follow = await stack.enter_async_context(following_coordinator(coordinator_pipe))
        attached = follow is not None
        client, sync = await open_clients(url, attached=attached)
        stack.push_async_callback(client.aclose)
        stack.callback(sync.close)
        await stack.enter_async_context(advising_when_gone(client))
        keys = Keys(name)
        overrides: dict[str, Any] = {}
        if concurrency is not None:
            overrides["concurrency"] = concurrency
        config, layout = await joining(
            "reading the crawl's settings",
            lambda: load_crawl(client, keys, out=out or Path("."), **overrides),
            wait=attached,
        )
        node_id = await joining("registering", lambda: asyncio.to_thread(register, sync, keys), wait=attached)
        if out is None:
            config = _with_out(config, Path(f"webtrawl-{node_id}"))
        node = Node(
            config,
            client=client,
            sync_client=sync,
            keys=keys,
            layout=layout,
            node=node_id,
            attached=attached,
            lock_fd=lock_fd,
        )
        if follow is not None:
            follow(node)
        if interrupts is not None:
            stack.enter_context(interrupts.stopping(node.crawler.stop))
        return node_id, await node.run()


def _with_out(config: CrawlConfig, out: Path) -> CrawlConfig:
    return replace(config, out=out)


LIVE_EVERY = 5.0


async def _live_reports(client: Any, sync: Any, keys: Keys, layout: Layout, on_event: Callable[[Event], None]) -> None:
    """The crawl's progress and its live nodes, every few seconds."""
    while True:
        await asyncio.sleep(LIVE_EVERY)
        counts = await scan(client, keys, layout.partitions)
        nodes = await persist("reading nodes", lambda: asyncio.to_thread(live_nodes, sync, keys))
        on_event(Running(keys.name, counts.done, counts.failed, counts.waiting, counts.running, nodes))
