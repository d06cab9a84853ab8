"""A URL's entry as a Redis partition keeps it (hash `:e`, by fingerprint): a compact JSON array.

The Lua scripts read it too: the URL is its first element, the host its second, the depth its third
(`cluster/lua/common.lua`). A revisited URL's entry carries its previous fetch as a seventh element, for the
conditional request. Attempts and importance live beside it in the partition and come back with each claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from ..models import Entry, Previous
from .bloom import fp_int


def encode_entry(
    url: str,
    host: str,
    depth: int,
    kind: str,
    referrer_fp: int | None,
    via: Sequence[str],
    previous: Previous | None = None,
) -> bytes:
    """A URL's entry as the partition keeps it: compact JSON, with its previous fetch when it is revisited.
    orjson, not the standard library: a node writes one for each link it adds (4 µs against 0.2 µs each)."""
    doc: list[Any] = [url, host, depth, kind, str(referrer_fp) if referrer_fp is not None else None, list(via)]
    if previous is not None:
        doc.append([previous.fetched_at, previous.digest, previous.etag, previous.last_modified, previous.interval])
    return orjson.dumps(doc)


def decode_entry(fp: bytes, blob: bytes, attempts: int, cash: bytes | None) -> Entry:
    url, host, depth, kind, referrer, via, *rest = orjson.loads(blob)
    previous = None
    if rest:
        fetched_at, digest, etag, last_modified, interval = rest[0]
        previous = Previous(
            fetched_at=fetched_at, digest=digest, etag=etag, last_modified=last_modified, interval=interval
        )
    return Entry(
        url=url,
        fp=fp_int(fp),
        host=host,
        depth=depth,
        kind=kind,
        referrer_fp=int(referrer) if referrer is not None else None,
        attempts=attempts,
        via=tuple(via),
        previous=previous,
        priority=float(cash) if cash is not None else 0.0,
    )
