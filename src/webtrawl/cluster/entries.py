"""A waiting URL as a Redis partition keeps it: one compact binary record in its host's queue for its depth.

Redis holds every waiting URL of a crawl, so a record is as small as it can be (`cluster/lua/common.lua` lays
out the keys): the URL without its host (the queue's key names the host, the depth), the kind in a byte, the
referrer's fingerprint in 8 bytes rather than 19 digits, and what is rare (a redirect chain, a previous fetch)
as JSON only when present. The Lua scripts read the first 8 bytes alone: the fingerprint.

    fp (8) · flags (1: kind, and which parts follow) · [referrer fp (8)] · [extra length (2) · extra JSON] · URL
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, get_args

import orjson

from ..models import Entry, LinkKind, Previous
from .bloom import fp_bytes, fp_int

KINDS: tuple[LinkKind, ...] = get_args(LinkKind)
_KIND_MASK = 0x0F
_REFERRER = 0x10
_EXTRA = 0x20
_WHOLE_URL = 0x40
"""The URL does not start with its host (a form `urls.origin` does not cut), so it is kept whole."""
_EXTRA_LENGTH = struct.Struct(">H")


def encode_record(
    fp: int,
    url: str,
    host: str,
    kind: LinkKind,
    referrer_fp: int | None,
    via: Sequence[str],
    previous: Previous | None = None,
) -> bytes:
    """A waiting URL's record. A node makes one for each link it adds: bytes joined, no JSON unless needed."""
    flags = KINDS.index(kind)
    parts = [b""]
    if referrer_fp is not None:
        flags |= _REFERRER
        parts.append(fp_bytes(referrer_fp))
    if via or previous is not None:
        flags |= _EXTRA
        extra: list[Any] = [list(via)]
        if previous is not None:
            extra.append(
                [previous.fetched_at, previous.digest, previous.etag, previous.last_modified, previous.interval]
            )
        blob = orjson.dumps(extra)
        parts += [_EXTRA_LENGTH.pack(len(blob)), blob]
    if url.startswith(host):
        parts.append(url[len(host) :].encode())
    else:
        flags |= _WHOLE_URL
        parts.append(url.encode())
    parts[0] = fp_bytes(fp) + bytes((flags,))
    return b"".join(parts)


def decode_record(record: bytes, host: str, depth: int, attempts: int, cash: bytes | None) -> Entry:
    """The entry a claim hands out, from its record and what the partition keeps beside it."""
    flags = record[8]
    at = 9
    referrer = None
    if flags & _REFERRER:
        referrer = fp_int(record[at : at + 8])
        at += 8
    via: tuple[str, ...] = ()
    previous = None
    if flags & _EXTRA:
        (length,) = _EXTRA_LENGTH.unpack_from(record, at)
        extra = orjson.loads(record[at + 2 : at + 2 + length])
        at += 2 + length
        via = tuple(extra[0])
        if len(extra) > 1:
            fetched_at, digest, etag, last_modified, interval = extra[1]
            previous = Previous(
                fetched_at=fetched_at, digest=digest, etag=etag, last_modified=last_modified, interval=interval
            )
    tail = record[at:].decode()
    return Entry(
        url=tail if flags & _WHOLE_URL else host + tail,
        fp=fp_int(record[:8]),
        host=host,
        depth=depth,
        kind=KINDS[flags & _KIND_MASK],
        referrer_fp=referrer,
        attempts=attempts,
        via=via,
        previous=previous,
        priority=float(cash) if cash is not None else 0.0,
    )
