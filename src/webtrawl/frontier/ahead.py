"""Read-ahead of the embedded frontier: a host's next waiting URLs, read with a claim and handed out by the
next claims without a database read.

A fast host frees its slots a few at a time, so it is claimed hundreds of times a second; each claim that
reads the database waits for the reader thread and the GIL (about 4 ms on the 20,000-page benchmark, while
its slots stay empty). A claim therefore reads up to `PER_HOST` URLs more than it hands out and keeps them
here, in hand-out order.

A buffer is the database's order as read, and it stays so because nothing but claims takes a waiting URL:
a URL that arrives (or is found closer) at a depth no deeper than a buffered one could belong before it, so
it drops the buffer (`raised`), and the next claim of the host reads again. Buffers hold at most `TOTAL`
URLs in all, so a crawl of many hosts keeps a bounded number of them.
"""

from __future__ import annotations

from collections import deque

from ..models import Entry

PER_HOST = 32
"""URLs a claim reads ahead for one host."""
TOTAL = 2048
"""URLs held ahead over all hosts."""


class ReadAhead:
    def __init__(self, *, enabled: bool = True) -> None:
        self._enabled = enabled
        self._buffers: dict[int, deque[Entry]] = {}
        self._held = 0

    def extra(self) -> int:
        """How many URLs past its hand-out a claim may read for one host now."""
        return PER_HOST if self._enabled and self._held + PER_HOST <= TOTAL else 0

    def take(self, host_id: int, n: int, deepest: int) -> list[Entry] | None:
        """Up to `n` buffered URLs of the host, none deeper than `deepest`; None when fewer than `n` are
        buffered, for the claim to read the database instead."""
        buffered = self._buffers.get(host_id)
        if buffered is None or len(buffered) < n:
            return None
        taken: list[Entry] = []
        while buffered and len(taken) < n and buffered[0].depth <= deepest:
            taken.append(buffered.popleft())
        self._held -= len(taken)
        if not buffered:
            del self._buffers[host_id]
        return taken

    def head(self, host_id: int) -> int | None:
        """The depth of the host's first buffered URL, None when it has none buffered."""
        buffered = self._buffers.get(host_id)
        return buffered[0].depth if buffered else None

    def keep(self, host_id: int, entries: list[Entry]) -> None:
        """A claim's read beyond its hand-out, in order: the host's buffer from now on."""
        self.drop(host_id)
        entries = entries[: max(0, TOTAL - self._held)] if self._enabled else []
        if entries:
            self._buffers[host_id] = deque(entries)
            self._held += len(entries)

    def raised(self, host_id: int, depth: int) -> None:
        """A URL of the host is waiting at `depth` that the buffer may lack."""
        buffered = self._buffers.get(host_id)
        if buffered is not None and depth <= buffered[-1].depth:
            self.drop(host_id)

    def drop(self, host_id: int) -> None:
        buffered = self._buffers.pop(host_id, None)
        if buffered is not None:
            self._held -= len(buffered)
