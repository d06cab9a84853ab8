"""A memory of URLs a frontier already took in, so the links every page repeats skip the store."""

from __future__ import annotations

from collections.abc import Iterable

from ..models import NewURL

SEEN_CACHE = 100_000
"""Fingerprints (with their depth) remembered to skip re-adding URLs already in the frontier.

Most links of a page lead where other pages led already (navigation, footers); skipping those saves a
random index probe each (embedded) or a dozen Bloom filter lookups each (distributed). When full, the
cache starts over: it only saves work, the store decides."""


class SeenCache:
    def __init__(self, size: int = SEEN_CACHE) -> None:
        self._size = size
        self._depths: dict[int, int] = {}

    def fresh(self, urls: Iterable[NewURL]) -> list[NewURL]:
        """The URLs not known to be in the frontier already at the same or a smaller depth."""
        seen = self._depths
        if len(seen) > self._size:
            seen.clear()
        fresh = []
        for url in urls:
            if seen.get(url.fp, 1 << 30) > url.depth:
                seen[url.fp] = url.depth
                fresh.append(url)
        return fresh
