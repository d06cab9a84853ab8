"""Per-host limits shared by every node, for crawls that spread one host's URLs over all partitions.

With `--partition-by url` no node sees all of a host's requests, so its concurrency and pace are kept in
Redis (`cluster/lua/hostslots.lua`): a node takes slots before it hands URLs out and gives them back when
their requests end (it holds no more of a host's slots than its politeness has requests running), and all
of them when it leaves. A slot lasts a lease's TTL unless the node's heartbeat renews it with its leases, so
the slots of a node that died, stalled or was cut off come back when its leases do, and a node left without
any lease gives its slots back. The node's own politeness still applies on top (it can only be stricter).
The host's robots.txt is fetched by one node and shared (`SharedRobots`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from ..config import PolitenessConfig
from ..fetch.fetcher import Fetcher
from ..fetch.robots import RobotsRules, RobotsSource, fetch_robots_source
from ..frontier.hosts import HostQueue
from ..models import KeepResponse
from ..politeness import Politeness
from .keys import Keys
from .redisconn import persist
from .scripts import Scripts

ROBOTS_LOCK = 30.0
"""Seconds one node has to fetch a robots.txt before another may try."""


class SharedHostLimits:
    def __init__(
        self, client: Any, keys: Keys, node: str, config: PolitenessConfig, politeness: Politeness, *, ttl: float
    ) -> None:
        self._script = Scripts(client).host_slots
        self._keys = keys
        self._node = node
        self._per_host = config.per_host
        self._politeness = politeness
        self._ttl = int(ttl * 1000)
        self._held: dict[str, list[bytes]] = defaultdict(list)
        """Host → the slots this node holds; the heartbeat thread renews them (under `_lock`)."""
        self._lock = threading.Lock()

    async def cut(self, plan: dict[int, list[tuple[int, int]]], names: Mapping[int, str], hosts: HostQueue,
                  mono: float) -> None:  # fmt: skip
        """Cut a claim's plan (per partition, host ids and how many URLs to take) to the slots the shared limits
        grant; park the hosts granted none."""
        wanted: Counter[str] = Counter()
        for pairs in plan.values():
            for host_id, take in pairs:
                wanted[names[host_id]] += take
        granted: dict[str, int] = {}
        waits: dict[str, float] = {}
        for host, n in wanted.items():
            granted[host], waits[host] = await self.take(host, n)
        for p, pairs in plan.items():
            kept = []
            for host_id, take in pairs:
                host = names[host_id]
                allowed = min(take, granted[host])
                granted[host] -= allowed
                for _ in range(take - allowed):
                    self._politeness.cancel(host)
                if allowed:
                    kept.append((host_id, allowed))
                else:
                    hosts.park(host_id, mono + max(waits[host], 0.002))
            plan[p] = kept

    async def settle(self) -> None:
        """Give back the slots of requests that ended: a host holds no more than it has running here (the
        hosts held are few: at most one per request in flight)."""
        with self._lock:
            held = list(self._held)
        for host in held:
            excess = self.held(host) - self._politeness.active(host)
            if excess > 0:
                await self.give(host, excess)

    async def take(self, host: str, n: int) -> tuple[int, float]:
        """Take up to `n` slots of `host`; returns how many were granted and, if none, seconds to wait."""
        delay = int(self._politeness.delay(host) * 1000)
        args = ["take", self._node, n, self._per_host, delay, self._ttl]
        granted, wait = await persist(
            "taking host slots", lambda: self._script(keys=[self._keys.host_slots(host)], args=args)
        )
        if granted:  # a host refused keeps no entry: the heartbeat renews per host held
            with self._lock:
                self._held[host].extend(granted)
        return len(granted), int(wait) / 1000

    def held(self, host: str) -> int:
        return len(self._held.get(host, ()))

    async def give(self, host: str, n: int) -> None:
        """Give back `n` slots of `host` (its requests ended)."""
        slots = self._take_back(host, n)
        if slots:
            await persist(
                "giving host slots back",
                lambda: self._script(keys=[self._keys.host_slots(host)], args=["give", *slots]),
            )

    def _take_back(self, host: str, n: int) -> list[bytes]:
        with self._lock:
            held = self._held.get(host)
            if not held:
                return []
            slots = [held.pop() for _ in range(min(n, len(held)))]
            if not held:
                del self._held[host]
            return slots

    # -- the heartbeat thread (blocking client) ---------------------------------------------------------------

    def renew(self, script: Any) -> None:
        """Extend every slot held to a lease's TTL from now; forget those that expired meanwhile (this node
        stalled or lost Redis past the TTL: other nodes may have taken them)."""
        with self._lock:
            held = {host: list(slots) for host, slots in self._held.items() if slots}
        for host, slots in held.items():
            kept = set(script(keys=[self._keys.host_slots(host)], args=["renew", self._ttl, *slots]))
            if len(kept) < len(slots):
                with self._lock:
                    mine = self._held.get(host, [])
                    mine[:] = [slot for slot in mine if slot in kept or slot not in slots]
                    if not mine:
                        self._held.pop(host, None)

    def release_all(self, script: Any) -> None:
        """Give back every slot (the node leaves, or holds no lease to fetch under)."""
        with self._lock:
            held, self._held = self._held, defaultdict(list)
        for host, slots in held.items():
            if slots:
                script(keys=[self._keys.host_slots(host)], args=["give", *slots])


class SharedRobots:
    """robots.txt fetched once per host for the whole crawl, kept in Redis as long as its rules last."""

    def __init__(self, client: Any, keys: Keys, node: str, user_agent: str, *, ttl: float) -> None:
        self._client = client
        self._keys = keys
        self._node = node
        self._user_agent = user_agent
        self._ttl = int(ttl * 1000)

    async def rules(self, fetcher: Fetcher, host: str, keep: KeepResponse) -> RobotsRules:
        key = self._keys.robots(host)
        client = self._client
        while True:
            stored = await persist("reading a robots.txt", lambda: client.get(key))
            if stored is not None:
                verdict, text = json.loads(stored)
                return RobotsSource(verdict, text).rules(self._user_agent)
            if await persist(
                "locking a robots.txt",
                lambda: client.set(key + ":lock", self._node, nx=True, px=int(ROBOTS_LOCK * 1000)),
            ):
                break
            await asyncio.sleep(0.2)  # another node is fetching it
        source = await fetch_robots_source(fetcher, host, keep)
        if source.verdict != "unreachable":  # each node retries an unreachable robots.txt on its own schedule
            document = json.dumps([source.verdict, source.text])
            await persist("sharing a robots.txt", lambda: client.set(key, document, px=self._ttl))
        await persist("unlocking a robots.txt", lambda: client.delete(key + ":lock"))
        return source.rules(self._user_agent)
