"""Partition leases: which partitions this node may claim from and complete for.

A lease is a key with a TTL holding `node:epoch`; every claim and complete script checks it, so a node that
lost a lease (it stalled past the TTL and another node took the partition over) can neither hand out nor
complete URLs of that partition. Acquiring a partition returns to waiting whatever ran under an earlier
epoch. The heartbeat thread renews, acquires and gives up leases (`Leases.balance`); the event loop reads
`usable()`, which leaves out leases whose last renewal is older than the TTL minus a margin: by then
Redis may already have let the lease go, so no new fetch starts under it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .keys import Keys

log = logging.getLogger(__name__)

PARTITION_FIELDS = ("waiting", "running", "done", "failed", "act")


@dataclass(frozen=True, slots=True)
class Lease:
    token: str
    renewed: float
    """Monotonic time at which the last successful renewal (or the acquisition) was sent."""


@dataclass(frozen=True, slots=True)
class PartitionState:
    holder: str | None
    waiting: int
    running: int
    done: int
    failed: int
    act: int

    @property
    def work(self) -> int:
        return self.waiting + self.running


def read_partitions(client: Any, keys: Keys, partitions: int) -> list[PartitionState]:
    """Every partition's lease holder and counters (blocking client; one pipeline)."""
    pipe = client.pipeline(transaction=False)
    for p in range(partitions):
        pipe.get(keys.lease(p))
        pipe.hmget(keys.counters(p), *PARTITION_FIELDS)
    replies = pipe.execute()
    states = []
    for p in range(partitions):
        holder, counts = replies[2 * p], replies[2 * p + 1]
        values = [int(v or 0) for v in counts]
        states.append(PartitionState(holder.decode().rsplit(":", 1)[0] if holder else None, *values))
    return states


class Leases:
    """This node's leases. Written by the heartbeat thread only; the loop reads snapshots."""

    def __init__(self, node: str, keys: Keys, partitions: int, *, ttl: float) -> None:
        self.node = node
        self.keys = keys
        self.partitions = partitions
        self.ttl = ttl
        self.margin = max(1.0, ttl / 3)
        self._held: Mapping[int, Lease] = {}
        self._draining: frozenset[int] = frozenset()
        self._short = False
        self._lock = threading.Lock()

    # -- read by the event loop ---------------------------------------------------------------------

    def usable(self, now: float | None = None) -> dict[int, str]:
        """Partition → token of the leases new fetches may start under."""
        now = time.monotonic() if now is None else now
        fresh = now - (self.ttl - self.margin)
        draining = self._draining
        return {p: lease.token for p, lease in self._held.items() if lease.renewed >= fresh and p not in draining}

    def token(self, p: int) -> str | None:
        """The token to complete under (Redis judges whether it still holds)."""
        lease = self._held.get(p)
        return lease.token if lease else None

    @property
    def held(self) -> list[int]:
        return sorted(self._held)

    # -- the heartbeat thread -----------------------------------------------------------------------

    def _set(self, p: int, lease: Lease | None) -> None:
        with self._lock:
            held = dict(self._held)
            if lease is None:
                held.pop(p, None)
            else:
                held[p] = lease
            self._held = held

    def acquire(self, scripts: Any, p: int) -> bool:
        sent = time.monotonic()
        reply = scripts.lease(keys=[self.keys.counters(p)], args=["acquire", self.node, int(self.ttl * 1000)])
        if not reply:
            return False
        token, requeued = reply[0].decode(), int(reply[1])
        self._set(p, Lease(token, sent))
        if requeued:
            log.info(
                "partition %d taken over: %d URLs in flight under an earlier lease went back to waiting", p, requeued
            )
        return True

    def renew(self, scripts: Any) -> list[int]:
        """Renew every lease; returns the partitions lost (taken over while this node stalled)."""
        lost = []
        for p, lease in list(self._held.items()):
            sent = time.monotonic()
            if scripts.lease(keys=[self.keys.counters(p)], args=["renew", lease.token, int(self.ttl * 1000)]):
                self._set(p, Lease(lease.token, sent))
            else:
                lost.append(p)
                self._set(p, None)
        if lost:
            log.warning("lost the lease of partition(s) %s: another node crawls them now", lost)
        return lost

    def release(self, scripts: Any, p: int) -> None:
        lease = self._held.get(p)
        if lease is not None:
            scripts.lease(keys=[self.keys.counters(p)], args=["release", lease.token, 0])
            self._set(p, None)
        self._draining = self._draining - {p}

    def give(self, scripts: Any, p: int) -> bool:
        """Give partition `p` up to another node if nothing runs under this lease, as Redis sees it; False
        (kept, to try again) while something does."""
        lease = self._held.get(p)
        if lease is not None:
            if not scripts.lease(keys=[self.keys.counters(p)], args=["give", lease.token, 0]):
                return False
            self._set(p, None)
        self._draining = self._draining - {p}
        return True

    def release_all(self, scripts: Any) -> None:
        for p in list(self._held):
            self.release(scripts, p)

    @property
    def unsettled(self) -> bool:
        """Partitions are moving: some drain here, or this node holds less than its share (`balance`)."""
        return bool(self._draining) or self._short

    def balance(
        self, scripts: Any, states: list[PartitionState], live: Iterable[str], running_here: Callable[[int], int]
    ) -> None:
        """Take and give up partitions so that every live node holds its share.

        Two shares, each the count divided by the live nodes (±1): of the partitions with work (waiting or
        running URLs), since those are what a node fetches, and of all partitions, so that every partition
        has a holder and a URL added to an empty one is claimed at once, not at some node's next heartbeat.
        The nodes are sorted by id and the first ones take the larger share, so every node reckons the same
        shares from the same reading. A node gives up what it holds beyond its share + 1, or one when another
        node is short, no partition is free and it holds more than the smaller share and two more than that
        node: an empty partition at once, one with work after draining it (it stops claiming from it, and
        gives it up once nothing of it runs here nor, as Redis sees it, under its lease: `give`), so no URL
        runs on two nodes. It takes free partitions with work first, the most waiting first. It is unsettled
        (its heartbeat comes sooner) while it drains, or while it is short and something is to move.
        """
        given = {p for p in self._draining if running_here(p) == 0 and self.give(scripts, p)}
        nodes = sorted({*live, self.node})
        rank = nodes.index(self.node)
        held: dict[str, list[int]] = {node: [] for node in nodes}
        for p, state in enumerate(states):
            if state.holder in held and state.holder != self.node:
                held[state.holder].append(p)
        held[self.node] = [p for p in self._held if p not in self._draining]
        free = [p for p, state in enumerate(states) if (state.holder is None or p in given) and p not in self._held]
        busy = {p for p, state in enumerate(states) if state.work > 0}

        others = [(node, i) for i, node in enumerate(nodes) if node != self.node]

        def share(count: int, index: int) -> int:
            return count // len(nodes) + (index < count % len(nodes))

        def excess(mine: int, count: int, theirs: Callable[[str], int], free: bool) -> int:
            """How many of `mine` (of `count` to share) to give up: down to this node's share when it holds
            two more; one when another node is short of its share, nothing is free, and this node holds more
            than the smaller share and two more than that node (so that a count changing by one at every beat
            moves nothing)."""
            own = share(count, rank)
            if mine > own + 1:
                return mine - own
            short = [theirs(node) for node, i in others if theirs(node) < share(count, i)]
            return int(bool(short) and not free and mine > count // len(nodes) and mine >= min(short) + 2)

        def short(mine: int, count: int, theirs: Callable[[str], int], free: list[int]) -> bool:
            """Whether this node is short of its share and something is to move: a partition is free, or
            another node holds enough to give one up (`excess`, as that node reckons it)."""
            if mine >= share(count, rank):
                return False
            low = count // len(nodes)
            return any(p not in self._held for p in free) or any(
                theirs(node) > low and theirs(node) >= mine + 2 for node, _ in others
            )

        mine = sorted((p for p in held[self.node] if p in busy), key=lambda p: states[p].waiting)
        free_busy = sorted((p for p in free if p in busy), key=lambda p: -states[p].waiting)
        drain = excess(len(mine), len(busy), lambda node: sum(p in busy for p in held[node]), bool(free_busy))
        if drain and not self._draining:
            self._draining = frozenset(mine[:drain])
            mine = mine[drain:]
        own = share(len(busy), rank)
        for p in free_busy:
            if len(mine) >= own:
                break
            if self.acquire(scripts, p):
                mine.append(p)
        self._short = short(len(mine), len(busy), lambda node: sum(p in busy for p in held[node]), free_busy)

        kept = [p for p in self._held if p not in self._draining]
        free_idle = [p for p in free if p not in busy]
        give = excess(len(kept), self.partitions, lambda node: len(held[node]), bool(free_idle))
        for p in [p for p in kept if p not in busy and running_here(p) == 0][:give]:
            if self.give(scripts, p):
                kept.remove(p)
        own = share(self.partitions, rank)
        for p in free_idle:
            if len(kept) >= own:
                break
            if self.acquire(scripts, p):
                kept.append(p)
        self._short |= short(len(kept), self.partitions, lambda node: len(held[node]), free_idle)
