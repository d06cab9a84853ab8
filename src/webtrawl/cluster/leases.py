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
import math
import threading
import time
from collections.abc import Callable, Mapping
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

    def release_all(self, scripts: Any) -> None:
        for p in list(self._held):
            self.release(scripts, p)

    def balance(
        self, scripts: Any, states: list[PartitionState], live_nodes: int, running_here: Callable[[int], int]
    ) -> None:
        """Take and give up partitions so that work spreads over the live nodes.

        Balanced by partitions with work (waiting or running URLs), not by partition count: a node takes
        free partitions with work up to its fair share, gives up held partitions that have none, and when
        it holds more than its share plus one (hysteresis), drains the surplus: it stops claiming from a
        partition, and releases it once nothing of it runs here.
        """
        mine = [p for p in self._held if states[p].work > 0]
        with_work = sum(state.work > 0 for state in states)
        fair = math.ceil(with_work / max(1, live_nodes))
        for p in list(self._held):
            if states[p].work == 0 and running_here(p) == 0:
                self.release(scripts, p)
        for p in list(self._draining):
            if running_here(p) == 0:
                self.release(scripts, p)
        surplus = len(mine) - (fair + 1)
        if surplus > 0 and not self._draining:
            by_waiting = sorted((p for p in mine if p in self._held), key=lambda p: states[p].waiting)
            self._draining = frozenset(by_waiting[:surplus])
        free = [p for p, state in enumerate(states) if state.holder is None and state.work > 0]
        free.sort(key=lambda p: -states[p].waiting)
        count = len([p for p in self._held if states[p].work > 0 and p not in self._draining])
        for p in free:
            if count >= fair:
                break
            if self.acquire(scripts, p):
                count += 1
