"""One node of a distributed crawl: the embedded engine over the Redis frontier, plus a heartbeat thread.

The engine (`crawler.Crawler`) is the embedded one, handed the node as its backend (`backend.Backend`): a
Redis frontier, near-duplicates and gained hosts shared in Redis, robots.txt shared with --partition-by url.
The node's own directory keeps its WARC files and its shard, `node.db`: their committed ends (so a
restarted node cuts its files back as an embedded crawl does) and the index of every page it fetched and
Redis accepted (`cluster.shard`).

The heartbeat runs on a thread of its own with its own Redis connection, so a busy event loop can never
make the node miss a renewal: every 2 s (every 0.25 s while partitions move) it renews the node's leases,
publishes its stats, reads the control key and balances partitions (`leases.Leases.balance`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..backend import Engine
from ..config import CrawlConfig
from ..crawler import Crawler
from ..errors import CrawlGone
from ..fetch.fetcher import Fetcher
from ..fetch.robots import RobotsRules, fetch_robots
from ..frontier.base import Frontier
from ..frontier.budgets import Budgets
from ..models import KeepResponse
from ..politeness import Politeness
from ..scope import Scope
from ..stats import CrawlReport, Stats
from ..store.db import NODE_DB, Database
from ..store.fingerprints import Twins
from .coordinator import INCARNATION, present
from .frontier import RedisFrontier
from .hostlimits import SharedHostLimits, SharedRobots
from .keys import Keys
from .layout import Layout
from .leases import Leases, read_partitions
from .redisconn import GONE_REPLY, crawl_gone, joining, persist
from .scopehosts import SharedScope
from .scripts import Scripts
from .shard import NodeShard, forget_acks, register_shard
from .twins import RedisTwins

log = logging.getLogger(__name__)

HEARTBEAT = 2.0
"""Seconds between heartbeats."""
REBALANCE = 0.25
"""Seconds between heartbeats while partitions move (`Leases.unsettled`): a partition drained here is given
back, and one another node gave back is taken, a quarter of a second after it can be, not two."""
LIVE_FOR = 3 * HEARTBEAT
"""A node whose last heartbeat is older than this (by Redis' clock) is not counted as live."""


def register(client: Any, keys: Keys) -> str:
    """A new node id, `node-01`, `node-02`, … (blocking client)."""
    number = client.incr(keys.ids)
    return f"node-{number:02d}"


def live_nodes(client: Any, keys: Keys) -> dict[str, dict[str, Any]]:
    """The nodes whose heartbeat is recent, with their last published state."""
    seconds, micros = client.time()
    now = seconds * 1000 + micros // 1000
    live = {}
    for node, raw in client.hgetall(keys.nodes).items():
        info = json.loads(raw)
        if info.get("state") not in ("left",) and now - info.get("at", 0) <= LIVE_FOR * 1000:
            live[node.decode()] = info
    return live


class Heartbeat(threading.Thread):
    """Renews leases, publishes the node's state, reads the control key, balances partitions."""

    def __init__(
        self,
        client: Any,
        keys: Keys,
        leases: Leases,
        layout: Layout,
        *,
        stats: Callable[[], dict[str, Any]],
        on_control: Callable[[str], None],
        on_gone: Callable[[], None],
        running_in: Callable[[int], int],
        slots: SharedHostLimits | None = None,
    ) -> None:
        """`slots`: the hosts' shared request slots this node holds (`--partition-by url`), kept as its leases."""
        super().__init__(name="webtrawl-heartbeat", daemon=True)
        self._client = client
        self._keys = keys
        self._leases = leases
        self._layout = layout
        self._stats = stats
        self._on_control = on_control
        self._on_gone = on_gone
        self._running_in = running_in
        self._slots = slots
        self._halt = threading.Event()
        self._scripts = Scripts(client, layout.incarnation)
        self.state = "running"
        self.gone = False
        """Set when Redis no longer holds this node's crawl: there is nothing left to give back or report to."""
        self._failing = False
        self._members: bytes | None = None
        """`Keys.members` as the last heartbeat read it."""
        self._balancing = False
        self._joined = False

    def run(self) -> None:
        while not self._halt.is_set():
            started = time.monotonic()
            try:
                self.beat()
                self._wait_for_next(started)
                if self._failing:
                    log.warning("Redis answers again")
                    self._failing = False
            except Exception as exc:  # Redis unreachable or restarting: the leases go stale, claims stop
                if str(exc).startswith(GONE_REPLY):  # a partition no longer holds this crawl (see `beat`)
                    self.gone = True
                    self._halt.set()
                    self._on_gone()
                    break
                if not self._failing:
                    log.warning("heartbeat failed (%s); retrying every %.0f s", exc, HEARTBEAT)
                    self._failing = True
                self._halt.wait(max(0.1, HEARTBEAT - (time.monotonic() - started)))

    def _wait_for_next(self, started: float) -> None:
        """Until the next heartbeat is due: `HEARTBEAT` after the last, `REBALANCE` while partitions move, or
        as soon as a node joins or leaves (`Keys.members`, read every `REBALANCE`)."""
        every = REBALANCE if self._balancing and self._leases.unsettled else HEARTBEAT
        due = started + every
        while not self._halt.wait(max(0.0, min(REBALANCE, due - time.monotonic()))):
            if time.monotonic() >= due or self._client.get(self._keys.members) != self._members:
                return

    def beat(self) -> None:
        keys, client = self._keys, self._client
        self._members = client.get(keys.members)
        if not present(client.hmget(keys.meta, "identity", INCARNATION), self._layout.incarnation):
            # Redis lost the crawl: its partitions are empty (or a new coordinator rebuilt it), not to be taken
            self.gone = True
            self._halt.set()
            self._on_gone()
            return
        self._leases.renew(self._scripts)
        if self._slots is not None:
            if self._leases.held:
                self._slots.renew(self._scripts.host_slots)
            else:  # lost every lease (or has none yet): no request may run here under a shared slot
                self._slots.release_all(self._scripts.host_slots)
        control = (client.get(keys.control) or b"run").decode()
        self._on_control(control)
        self._balancing = control in ("run", "resume") and self.state == "running"
        if self._balancing:  # paused or idle, partitions stay where they are, and beats 2 s apart
            live = live_nodes(client, keys)
            states = read_partitions(client, keys, self._layout.partitions)
            self._leases.balance(self._scripts, states, live, self._running_in)
        self.publish()

    def publish(self, state: str | None = None) -> None:
        seconds, micros = self._client.time()
        info = {
            **self._stats(),
            "state": state or self.state,
            "partitions": self._leases.held,
            "at": seconds * 1000 + micros // 1000,
        }
        self._client.hset(self._keys.nodes, self._leases.node, json.dumps(info))
        if not self._joined or state == "left":  # the other nodes balance at once, not at their next heartbeat
            self._joined = True
            self._client.incr(self._keys.members)

    def stop(self) -> None:
        """Stop beating, give the partitions back (their running URLs return to waiting)."""
        self._halt.set()
        if self.is_alive():
            self.join(HEARTBEAT * 3)
        if self.gone:
            return
        try:
            self._leases.release_all(self._scripts)
            if self._slots is not None:
                self._slots.release_all(self._scripts.host_slots)
            self.publish("left")
        except Exception as exc:
            log.warning("could not release this node's partitions (%s); they pass on when their leases expire", exc)


class Node:
    """One node of a distributed crawl: the backend (`backend.Backend`) that puts the engine over Redis, and the
    node's life around a run (registered, beating, reporting when it leaves)."""

    def __init__(
        self,
        config: CrawlConfig,
        *,
        client: Any,
        sync_client: Any,
        keys: Keys,
        layout: Layout,
        node: str,
        attached: bool = False,
        lock_fd: int | None = None,
    ) -> None:
        """`attached`: the node a coordinator started (`ownnode`), which waits for Redis to make its first
        heartbeat (`redisconn.joining`); `lock_fd`: the directory's lock that coordinator handed down."""
        self.node = node
        self.warc_prefix = f"{config.name}-{node}"
        self.warc_family: str | None = re.escape(config.name) + r"-node-\d+"
        self.db_name = NODE_DB  # its shard
        self.lock_fd = lock_fd
        self._config = config
        self._client = client
        self._sync = sync_client
        self._keys = keys
        self._layout = layout
        self._attached = attached
        self.crawler = Crawler(config, self)
        self.leases = Leases(node, keys, layout.partitions, ttl=layout.lease_ttl)
        self.heartbeat: Heartbeat | None = None
        self._robots: SharedRobots | None = None
        self._told_to_stop = False
        self._gone = False
        self._obey_now: Callable[[str], None] | None = None
        self._shard: NodeShard | None = None
        self._info = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
        self._last = (time.monotonic(), 0)

    async def open_frontier(
        self, engine: Engine, db: Database, crawl_id: int, politeness: Politeness, budgets: Budgets
    ) -> Frontier:
        config = self._config
        shard = self._shard = NodeShard(db, crawl_id, self.node, config.near_distance)
        await shard.recover(self._client, self._keys, self._layout.partitions)
        await register_shard(self._client, self._keys, config.out, self.node)
        limits = None
        if self._layout.partition_by == "url":
            # Renewed with the leases, and lasting as long: a dead node's slots come back when its leases do.
            ttl = self._layout.lease_ttl
            limits = SharedHostLimits(
                self._client, self._keys, self.node, config.politeness, politeness, ttl=ttl,
                share=lambda: len(self.leases.usable()) / self._layout.partitions,
            )  # fmt: skip
            self._robots = SharedRobots(
                self._client, self._keys, self.node, config.fetch.user_agent, ttl=config.politeness.robots_ttl
            )
        frontier = RedisFrontier(
            self._client,
            self._keys,
            self._layout,
            self.leases,
            politeness,
            shard=shard,
            host_limits=limits,
            importance=config.order == "importance",
        )
        loop = asyncio.get_running_loop()

        obey = self._obey_now = functools.partial(self._obey, engine, frontier)

        def on_control(command: str) -> None:
            loop.call_soon_threadsafe(obey, command)

        def on_gone() -> None:
            loop.call_soon_threadsafe(self._lost, engine)

        self.heartbeat = heartbeat = Heartbeat(
            self._sync,
            self._keys,
            self.leases,
            self._layout,
            stats=functools.partial(self.node_stats, engine.stats),
            on_control=on_control,
            on_gone=on_gone,
            running_in=frontier.running_in,
            slots=limits,
        )

        async def first_beat() -> None:  # registered and holding partitions before the first claim
            heartbeat.beat()

        await joining("joining the crawl", first_beat, wait=self._attached)
        heartbeat.start()
        return frontier

    async def shared_hosts(self, scope: Scope, frontier: Frontier) -> SharedScope:
        """Hosts the crawl's scope gained on any node, in Redis (this node's own store knows none)."""
        assert isinstance(frontier, RedisFrontier)
        shared = SharedScope(self._client, self._keys, scope, frontier)
        await shared.learn(time.monotonic())
        return shared

    def twins(self, db: Database, crawl_id: int) -> Twins:
        """Earlier pages of every node: in Redis."""
        return RedisTwins(self._client, self._keys)

    async def robots_rules(self, fetcher: Fetcher, host: str, keep: KeepResponse) -> RobotsRules:
        if self._robots is None:
            return await fetch_robots(fetcher, host, self._config.fetch.user_agent, keep)
        return await self._robots.rules(fetcher, host, keep)

    def tell(self, command: str) -> None:
        """Obey the crawl's `command` now, as the next heartbeat would; call it from the loop's thread. The
        coordinator's own node is told the end this way (`ownnode`) instead of waiting up to `HEARTBEAT` to
        read it. Before the node's frontier is open it does nothing: the first heartbeat reads the command."""
        if self._obey_now is not None:
            self._obey_now(command)

    def _obey(self, engine: Engine, frontier: RedisFrontier, command: str) -> None:
        frontier.paused = command == "pause"
        if command == "finished" and not frontier.finished:
            frontier.finished = True
            engine.wake()
        elif command == "stop" and engine.state != "stopping":
            log.info("told to stop: in-flight fetches finish, then this node reports and leaves")
            self._told_to_stop = True
            engine.stop()
        if self.heartbeat is not None:
            states = {"pause": "paused", "stop": "stopping", "idle": "idle"}
            self.heartbeat.state = states.get(command, "running")

    def _lost(self, engine: Engine) -> None:
        log.error("crawl %r is no longer in Redis: this node stops", self._keys.name)
        self._gone = True
        engine.stop()

    def node_stats(self, stats: Stats) -> dict[str, Any]:
        """What the heartbeat publishes (read on the heartbeat thread: plain counters only)."""
        now, pages = time.monotonic(), stats.pages
        then, before = self._last
        self._last = (now, pages)
        return {
            **self._info,
            "pages": pages,
            "bytes": stats.bytes,
            "errors": stats.errors,
            "in_flight": stats.fetching,
            "pages_per_s": round((pages - before) / (now - then), 2) if now > then else 0.0,
            "elapsed": round(stats.elapsed, 1),
            "render": stats.render_counts(),
        }

    async def run(self) -> CrawlReport:
        """Crawl as this node until the crawl ends or the node is stopped, then leave a final report.

        The report is written before the heartbeat publishes `left`: the coordinator waits for the reports of
        live nodes only, and a node that has left is no longer live."""
        try:
            report = await self.crawler.run()
            if self._told_to_stop and report.outcome == "interrupted":
                report.outcome = "stopped"  # by the crawl's control key, not by this process's signal
            if not self._gone:
                if self._shard is not None and self._shard.settled:
                    await forget_acks(self._client, self._keys, self.node, self._layout.partitions)
                await self._report(report)
        except CrawlGone:  # a partition refused a call: there is nothing left to give back in Redis
            self._gone = True
            raise
        finally:
            if self.heartbeat is not None:
                self.heartbeat.gone |= self._gone
                await asyncio.to_thread(self.heartbeat.stop)
        if self._gone:
            raise crawl_gone(self._keys.name)
        return report

    async def _report(self, report: CrawlReport) -> None:
        final = {
            "pages": report.pages,
            "bytes": report.bytes,
            "elapsed": round(report.elapsed, 2),
            "pages_per_s": round(report.pages_per_second, 2),
            "outcome": report.outcome,
            "render": report.render,
            **self._info,
        }
        await persist("reporting", lambda: self._client.hset(self._keys.report, self.node, json.dumps(final)))
