"""The scalable Bloom filter that deduplicates URLs per partition in Redis: its Lua, sizing and statistics.

The filter runs on the server (`lua/bloom.lua`, prepended to the frontier's scripts) so that testing a URL,
adding it and enqueueing it are one atomic step. This module sizes it from the crawl's settings and reads
back how full it is, so the crawl can report how many URLs its false positives may have dropped.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redis.asyncio import Redis

BLOOM_LUA: str = files(__package__).joinpath("lua/bloom.lua").read_text(encoding="utf-8")
"""Lua defining `bloom_add`, `bloom_check`, `bloom_stats` and `bloom_layer_size` as locals, for other scripts to
follow (see the header of the file for the key layout and the meta fields)."""

MAX_BITS = 2**32 - 1
"""Largest layer, in bits: SETBIT offsets end at 2^32 - 1 (a 512 MB string)."""

MIN_CAPACITY = 1000
"""Smallest first layer: below it a partition would grow through many tiny layers, each tighter than the last."""

_LN2 = math.log(2)
_FP = struct.Struct(">q")


def layer_size(capacity: int, error_rate: float) -> tuple[int, int]:
    """Bits m and hash count k of a layer holding `capacity` fingerprints at `error_rate`, capped at `MAX_BITS`.

    Mirrors `bloom_layer_size` in the Lua operation for operation (Lua has no `round`), so both sides agree
    to the bit.
    """
    m = min(math.ceil(-capacity * math.log(error_rate) / (_LN2 * _LN2)), MAX_BITS)
    return m, max(1, math.floor(m / capacity * _LN2 + 0.5))


def first_capacity(expected_urls: int, partitions: int) -> int:
    """First-layer capacity of each partition's filter for a crawl expected to see `expected_urls`.

    The URLs of an evenly hashed crawl spread over partitions with a standard deviation of about
    sqrt(mean); four of them are added so that no partition spills into a second layer, which is allocated
    whole and would cost twice the first one's memory for a handful of URLs.
    """
    mean = expected_urls / partitions
    return max(MIN_CAPACITY, math.ceil(mean + 4 * math.sqrt(mean)))


def fp_bytes(fp: int) -> bytes:
    """A signed 64-bit fingerprint as the 8 big-endian bytes the Lua reads (Lua numbers hold only 53 bits)."""
    return _FP.pack(fp)


def fp_int(b: bytes) -> int:
    """The signed 64-bit fingerprint of 8 big-endian bytes."""
    return int(_FP.unpack(b)[0])


@dataclass(frozen=True, slots=True)
class BloomStats:
    """One partition's filter as it is now; all zero when it does not exist yet."""

    layers: int
    bits: int
    count: int
    """Fingerprints added: URLs offered minus those taken for already seen (false positives among them)."""
    capacity: int
    """Fingerprints the existing layers hold before another one is added."""
    error_rate: float
    """The configured rate of the whole filter."""
    fill_ratio: float
    """Bits set / bits, over all layers."""
    estimated_fp_rate: float
    """Sum over layers of (1 - e^(-k n / m))^k: the chance an unseen URL is taken for a seen one."""
    estimated_false_drops: float = 0.0
    """New URLs the filter is expected to have taken for seen ones so far (see `false_drops`)."""


async def bloom_stats(client: Redis, prefix: str) -> BloomStats:
    """Reads the meta hash and counts each layer's set bits (BITCOUNT is O(size): about 1 ms per MB).

    The two reads are not one snapshot; while URLs are being added the figures may differ by a batch.
    """
    raw = await client.hgetall(f"{prefix}:bf")
    meta = {(key.decode() if isinstance(key, bytes) else key): value for key, value in raw.items()}
    layers = int(meta.get("layers", 0))
    if not layers:
        return BloomStats(0, 0, 0, 0, 0.0, 0.0, 0.0)
    async with client.pipeline(transaction=False) as pipe:
        for i in range(layers):
            pipe.bitcount(f"{prefix}:bf:{i}")
        set_bits = await pipe.execute()
    sizes = [(int(meta[f"m:{i}"]), int(meta[f"k:{i}"]), int(meta[f"count:{i}"])) for i in range(layers)]
    bits = sum(m for m, _k, _n in sizes)
    return BloomStats(
        layers=layers,
        bits=bits,
        count=sum(n for _m, _k, n in sizes),
        capacity=sum(int(meta[f"capacity:{i}"]) for i in range(layers)),
        error_rate=float(meta["error_rate"]),
        fill_ratio=sum(set_bits) / bits,
        estimated_fp_rate=sum((1 - math.exp(-k * n / m)) ** k for m, k, n in sizes),
        estimated_false_drops=false_drops(sizes),
    )


def _rate(m: int, k: int, n: float) -> float:
    return (1 - math.exp(-k * n / m)) ** k


def false_drops(layers: list[tuple[int, int, int]]) -> float:
    """Expected new URLs lost to false positives while `layers` ((m, k, count) each, oldest first) filled up.

    A URL offered while layer j held x fingerprints is wrongly taken for seen with the chance that any
    layer answers yes: the full earlier layers' rates plus layer j's rate at x. Summed over the offers
    that were added, that is n_j times the earlier rates plus the integral of layer j's rate over its
    filling (trapezoids: the rate is smooth and convex).
    """
    drops, earlier = 0.0, 0.0
    steps = 64
    for m, k, n in layers:
        if n:
            width = n / steps
            area = sum(_rate(m, k, i * width) + _rate(m, k, (i + 1) * width) for i in range(steps)) * width / 2
            drops += n * earlier + area
        earlier += _rate(m, k, n)
    return drops
