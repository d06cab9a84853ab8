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
import math
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from ..config import PolitenessConfig
from ..fetch.fetcher import Fetcher
from ..fetch.robots import RobotsRules, RobotsSource, fetch_robots_source
from ..frontier.hosts import HostQueue
from ..models import KeepResponse
from ..politeness import Politeness
from .keys import Keys
from .redisconn import persist
from .scripts import Call, Scripts, run_together

ROBOTS_LOCK = 30.0
"""Seconds one node has to fetch a robots.txt before another may try."""
HOLD = 0.5
"""Seconds a node keeps the slots of a host without a delay after it last asked for the host's URLs, ready for
its next ones: with no pace to keep, a slot is taken again only when the node's share of them grows."""


class SharedHostLimits:
    def __init__(
        self,
        client: Any,
        keys: Keys,
        node: str,
        config: PolitenessConfig,
        politeness: Politeness,
        *,
        ttl: float,
        share: Callable[[], float],
    ) -> None:
        """`share()`: the part of the crawl this node holds (its partitions' share, 0 to 1), which bounds the
        slots of a host it keeps without requests (`HOLD`)."""
        self._client = client
        self._share = share
        self._asked: dict[str, float] = {}
        """Host → when a claim last wanted its URLs (monotonic)."""
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
        grant; park the hosts granted none. Slots kept from requests that ended serve first; those kept no
        longer go back in the same round trip.

        The plan's requests are already reserved in the node's politeness: a host needs a new slot for each
        request reserved beyond the slots it keeps."""
        wanted: Counter[str] = Counter()
        for pairs in plan.values():
            for host_id, take in pairs:
                wanted[names[host_id]] += take
        for host in wanted:
            self._asked[host] = mono
        gives = self._gives(mono, wanted)
        spare, needed = {}, {}
        for host, n in wanted.items():
            # Slots held beyond the requests running: a request may run without one (its slot's renewal was
            # lost; robots.txt's fetch takes none), a deficit that is not this plan's to pay.
            spare[host] = max(0, self.held(host) - (self._politeness.active(host) - n))
            if spare[host] < n:
                needed[host] = n - spare[host]
        taken = await self._take(needed, gives)
        granted = {host: min(n, spare[host] + (taken[host][0] if host in taken else 0)) for host, n in wanted.items()}
        for host in wanted:
            if not self.held(host):  # refused: nothing to keep
                self._asked.pop(host, None)
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
                    hosts.park(host_id, mono + max(taken[host][1] if host in taken else 0.0, 0.002))
            plan[p] = kept

    async def settle(self, mono: float) -> None:
        """Give back the slots of requests that ended, but those kept (`_gives`)."""
        await run_together(self._client, "giving host slots back", self._gives(mono))

    def _gives(self, mono: float, reserved: Mapping[str, int] | None = None) -> list[Call]:
        """Calls giving back each host's slots beyond its requests running here (the hosts held are few: at
        most one per request in flight); the slots are no longer counted held. `reserved`: requests a claim
        has reserved in the node's politeness and not yet been granted slots for.

        A host without a delay asked for within `HOLD` keeps up to the node's share of its slots (its share of
        the partitions, rounded down, so that the nodes' shares fit in the host's slots and every node gets its
        part): the node's next claim of the host then needs no slot from Redis. A host with a delay keeps none:
        each request's start is paced through Redis."""
        reserved = reserved or {}
        with self._lock:
            held = list(self._held)
        calls = []
        for host in held:
            active = self._politeness.active(host)
            if self._politeness.delay(host) == 0 and mono - self._asked.get(host, -HOLD) < HOLD:
                kept = max(active, math.floor(self._per_host * self._share()))
            else:
                self._asked.pop(host, None)
                kept = active - reserved.get(host, 0)
            excess = self.held(host) - kept
            if excess > 0 and (slots := self._take_back(host, excess)):
                calls.append(Call(self._script, self._keys.host_slots(host), ["give", *slots]))
            if not self.held(host):
                self._asked.pop(host, None)
        return calls

    async def take(self, host: str, n: int) -> tuple[int, float]:
        """Take up to `n` slots of `host`; returns how many were granted and, if none, seconds to wait."""
        return (await self._take({host: n}, []))[host]

    async def _take(self, wanted: Mapping[str, int], gives: list[Call]) -> dict[str, tuple[int, float]]:
        """Make `gives`, then take up to `wanted[host]` slots of each host, in one round trip; returns per host
        how many were granted and, if none, seconds to wait."""
        node, per_host, ttl = self._node, self._per_host, self._ttl
        takes = [
            Call(self._script, self._keys.host_slots(host),
                 ["take", node, n, per_host, int(self._politeness.delay(host) * 1000), ttl])
            for host, n in wanted.items()
        ]  # fmt: skip
        replies = await run_together(self._client, "taking host slots", [*gives, *takes])
        taken = {}
        for host, (slots, wait) in zip(wanted, replies[len(gives) :], strict=True):
            if slots:  # a host refused keeps no entry: the heartbeat renews per host held
                with self._lock:
                    self._held[host].extend(slots)
            taken[host] = len(slots), int(wait) / 1000
        return taken

    def held(self, host: str) -> int:
        return len(self._held.get(host, ()))

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
        """Give back the slots kept past `HOLD` (claims give them back, but a node that claims nothing, paused
        or busy with other hosts, would keep them); extend every other slot held to a lease's TTL from now;
        forget those that expired meanwhile (this node stalled or lost Redis past the TTL: other nodes may
        have taken them)."""
        for call in self._gives(time.monotonic()):
            script(keys=[call.key], args=call.args)
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
