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

KINDS: tuple[LinkKind, ...] = get_args(LinkKind)
_CODES = {kind: code for code, kind in enumerate(KINDS)}
_KIND_MASK = 0x0F
_REFERRER = 0x10
_EXTRA = 0x20
_WHOLE_URL = 0x40
"""The URL does not start with its host (a form `urls.origin` does not cut), so it is kept whole."""
_HEAD = struct.Struct(">qB")
"""fp, flags: signed and big-endian, as `bloom.fp_bytes` makes a fingerprint's bytes."""
_HEAD_REFERRER = struct.Struct(">qBq")
"""fp, flags, referrer fp."""
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
    """A waiting URL's record. A node makes one for each link it adds: its fixed part packed at once, JSON
    only for what is rare: about 0.9 µs a link, as the JSON entry it replaced took with the fingerprint and
    referrer sent beside it."""
    flags = _CODES[kind]
    extra = b""
    if via or previous is not None:
        flags |= _EXTRA
        fields: list[Any] = [list(via)]
        if previous is not None:
            fields.append(
                [previous.fetched_at, previous.digest, previous.etag, previous.last_modified, previous.interval]
            )
        blob = orjson.dumps(fields)
        extra = _EXTRA_LENGTH.pack(len(blob)) + blob
    if url.startswith(host):
        tail = url[len(host) :]
    else:
        flags |= _WHOLE_URL
        tail = url
    if referrer_fp is None:
        return _HEAD.pack(fp, flags) + extra + tail.encode()
    return _HEAD_REFERRER.pack(fp, flags | _REFERRER, referrer_fp) + extra + tail.encode()


def decode_record(record: bytes, host: str, depth: int, attempts: int, cash: bytes | None) -> Entry:
    """The entry a claim hands out, from its record and what the partition keeps beside it."""
    fp, flags = _HEAD.unpack_from(record)
    at = _HEAD.size
    referrer = None
    if flags & _REFERRER:
        _fp, _flags, referrer = _HEAD_REFERRER.unpack_from(record)
        at = _HEAD_REFERRER.size
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
        fp=fp,
        host=host,
        depth=depth,
        kind=KINDS[flags & _KIND_MASK],
        referrer_fp=referrer,
        attempts=attempts,
        via=via,
        previous=previous,
        priority=float(cash) if cash is not None else 0.0,
    )
