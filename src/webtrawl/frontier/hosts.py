"""Which hosts the frontier may serve next, without looking at every host on every claim.

Each host with waiting URLs has a *head*: the smallest depth among its fetchable waiting URLs. A host is
in exactly one of three places:
- *awake*: in the bucket of its head depth; a claim walks the buckets lowest depth first and, within a
  bucket, round robin;
- *asleep*: not ready before a known time (its delay, a robots.txt retry), in a heap keyed by that time;
- *parked*: not ready until something happens to it (its robots.txt arrives, one of its requests ends),
  woken by `wake`.
A claim thus costs in proportion to the hosts it serves or parks, not to the hosts the crawl knows: a
crawl of 100,000 hosts, most of them waiting for robots.txt or their delay, claims as fast as one of ten.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator


class HostQueue:
    def __init__(self, heads: dict[int, int]) -> None:
        self.heads = heads
        """Host id → head depth, for every host with fetchable waiting URLs."""
        self._awake: dict[int, dict[int, None]] = {}
        self._bucket_of: dict[int, int] = {}
        self._sleeping: list[tuple[float, int]] = []
        self._asleep: set[int] = set()
        self._parked: set[int] = set()
        for host_id, depth in heads.items():
            self._rouse(host_id, depth)

    def __bool__(self) -> bool:
        return bool(self.heads)

    def raise_head(self, host_id: int, depth: int) -> None:
        """`host_id` has a fetchable URL at `depth` (new, or found closer): its head is at most that."""
        head = self.heads.get(host_id)
        if head is not None and head <= depth:
            return
        self.heads[host_id] = depth
        if host_id in self._bucket_of:
            self._leave_bucket(host_id)
            self._rouse(host_id, depth)
        elif host_id not in self._asleep and host_id not in self._parked:
            self._rouse(host_id, depth)

    def set_head(self, host_id: int, depth: int | None) -> None:
        """After a claim: the host's new head, or None when it has no fetchable URL left."""
        if depth is None:
            self.heads.pop(host_id, None)
            if host_id in self._bucket_of:
                self._leave_bucket(host_id)
            self._asleep.discard(host_id)
            self._parked.discard(host_id)
            return
        if self.heads.get(host_id) != depth:
            self.heads[host_id] = depth
            if host_id in self._bucket_of:
                self._leave_bucket(host_id)
                self._rouse(host_id, depth)

    def candidates(self, now: float) -> Iterator[int]:
        """Awake hosts, lowest head first, each at most once; the caller `park`s or `served`s each."""
        while self._sleeping and self._sleeping[0][0] <= now:
            _at, host_id = heapq.heappop(self._sleeping)
            if host_id in self._asleep:
                self._asleep.discard(host_id)
                self._rouse(host_id, self.heads[host_id])
        for depth in sorted(self._awake):
            bucket = self._awake.get(depth)
            for _ in range(len(bucket) if bucket else 0):
                if not bucket:
                    break
                yield next(iter(bucket))

    def served(self, host_id: int) -> None:
        """The host got URLs: to the end of its bucket, so hosts of one depth take turns."""
        depth = self._bucket_of.get(host_id)
        if depth is not None:
            bucket = self._awake[depth]
            del bucket[host_id]
            bucket[host_id] = None

    def park(self, host_id: int, until: float | None) -> None:
        """The host is not ready: asleep until `until`, or parked until `wake` when None."""
        if host_id in self._bucket_of:
            self._leave_bucket(host_id)
        if until is None:
            self._parked.add(host_id)
        else:
            self._asleep.add(host_id)
            heapq.heappush(self._sleeping, (until, host_id))

    def wake(self, host_id: int) -> None:
        """Something happened to a parked host that may make it ready."""
        if host_id in self._parked:
            self._parked.discard(host_id)
            self._rouse(host_id, self.heads[host_id])

    def next_wake(self) -> float | None:
        """The earliest time an asleep host wakes (stale heap entries may make it early, never late)."""
        return self._sleeping[0][0] if self._sleeping else None

    @property
    def awake(self) -> bool:
        return bool(self._bucket_of)

    def _rouse(self, host_id: int, depth: int) -> None:
        self._awake.setdefault(depth, {})[host_id] = None
        self._bucket_of[host_id] = depth

    def _leave_bucket(self, host_id: int) -> None:
        depth = self._bucket_of.pop(host_id)
        bucket = self._awake[depth]
        del bucket[host_id]
        if not bucket:
            del self._awake[depth]
