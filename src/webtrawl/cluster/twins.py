"""Near-duplicate lookups shared by every node of a distributed crawl (`--skip-near-duplicates`).

A node must decide whether a page nearly repeats an earlier one before it follows the page's links, and
the earlier page may have been fetched by any node. Each node appends every page's SimHash and fingerprint
(16 bytes) to one Redis string per band (`parse.simhash.bands`: two hashes within the distance share a
band) and reads a page's candidates as the tails of its bands' strings: one pipelined round trip to look
up, one to remember. That is 64 bytes per page in Redis, about what the coordinator's index holds for the
same pages. Only the last `CANDIDATES` hashes of a band are compared: a band that many pages share (a trap
repeating one template) still matches its recent members, and a lookup stays bounded.
"""

from __future__ import annotations

import struct
from typing import Any

from ..parse.simhash import bands, hamming
from .keys import Keys
from .redisconn import persist, pipelined

CANDIDATES = 256
"""Most recent hashes of a band a lookup compares."""
_PAIR = struct.Struct(">qq")
"""(simhash, fingerprint), both signed 64-bit."""


class RedisTwins:
    """The crawl's near-duplicate memory in Redis."""

    def __init__(self, client: Any, keys: Keys) -> None:
        self._client = client
        self._keys = keys

    async def find(self, fp: int, simhash: int, distance: int) -> int | None:
        """The fingerprint of an earlier page (another URL) within `distance` bits of `simhash`, if any;
        this page is remembered for the pages after it either way."""
        keys = [self._keys.simhash_band(band) for band in bands(simhash, distance)]

        def read(pipe: Any) -> None:
            for key in keys:
                pipe.getrange(key, -CANDIDATES * _PAIR.size, -1)

        tails = await persist("reading near-duplicates", lambda: pipelined(self._client, read))
        twin = None
        for tail in tails:  # whole pairs: every append is one
            for other_hash, other in _PAIR.iter_unpack(tail):
                if other != fp and hamming(simhash, other_hash) <= distance:
                    twin = other
                    break
            if twin is not None:
                break
        pair = _PAIR.pack(simhash, fp)

        def remember(pipe: Any) -> None:
            for key in keys:
                pipe.append(key, pair)

        await persist("remembering a page's SimHash", lambda: pipelined(self._client, remember))
        return twin
