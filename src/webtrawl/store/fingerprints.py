"""Content fingerprints in the store: exact duplicates by body digest, near-duplicates by SimHash.

`digests` keeps the first URL seen with each body digest; a later capture of another URL with that digest
is marked `duplicate_of` it. `simhash_bands` keeps each page's SimHash under each of its bands (see
`parse.simhash.bands`): two hashes within the near-duplicate distance share a band, so the candidates of a
page are one indexed lookup, checked by their full Hamming distance.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Protocol

from ..models import Capture
from ..parse.simhash import bands, hamming
from .db import Database


def mark_fingerprints(conn: sqlite3.Connection, crawl_id: int, captures: Sequence[Capture], distance: int) -> None:
    """Mark each capture's exact and near duplicates (in order: a later one may repeat an earlier one of the
    same batch). Call before the captures are inserted: their rows carry the marks."""
    for capture in captures:
        mark_duplicate(conn, crawl_id, capture)
        mark_near_duplicate(conn, crawl_id, capture, distance)


def mark_duplicate(conn: sqlite3.Connection, crawl_id: int, capture: Capture) -> None:
    """Set `capture.duplicate_of` when another URL had the same body first (a capture with content only:
    a successful response with a body, and not a revisit of the URL's own earlier content)."""
    digest = capture.payload_digest
    if digest is None or capture.unchanged or not capture.size or not (200 <= (capture.status or 0) < 300):
        return
    conn.execute("INSERT OR IGNORE INTO digests(crawl_id, digest, fp) VALUES (?, ?, ?)", (crawl_id, digest, capture.fp))
    (first,) = conn.execute("SELECT fp FROM digests WHERE crawl_id = ? AND digest = ?", (crawl_id, digest)).fetchone()
    if first != capture.fp:
        capture.duplicate_of = first


def near_duplicate(conn: sqlite3.Connection, crawl_id: int, simhash: int, fp: int, distance: int) -> int | None:
    """The fingerprint of an earlier page (another URL) whose text is within `distance` bits, if any."""
    keys = bands(simhash, distance)
    rows = conn.execute(
        f"SELECT fp, simhash FROM simhash_bands WHERE crawl_id = ? AND band IN ({', '.join('?' * len(keys))}) "
        "AND fp != ?",
        (crawl_id, *keys, fp),
    )
    for other, other_hash in rows:
        if hamming(simhash, other_hash) <= distance:
            return other
    return None


def mark_near_duplicate(conn: sqlite3.Connection, crawl_id: int, capture: Capture, distance: int) -> None:
    """Flag a page whose text is within `distance` bits of an earlier page's, and remember its SimHash."""
    if capture.simhash is None or capture.unchanged:
        return
    if capture.near_duplicate_of is None:
        capture.near_duplicate_of = near_duplicate(conn, crawl_id, capture.simhash, capture.fp, distance)
    remember_simhash(conn, crawl_id, capture.simhash, capture.fp, distance)


def remember_simhash(conn: sqlite3.Connection, crawl_id: int, simhash: int, fp: int, distance: int) -> None:
    conn.executemany(
        "INSERT OR IGNORE INTO simhash_bands(crawl_id, band, fp, simhash) VALUES (?, ?, ?, ?)",
        [(crawl_id, band, fp, simhash) for band in bands(simhash, distance)],
    )


class Twins(Protocol):
    """Where a crawl looks up earlier pages a page's text nearly repeats (`--skip-near-duplicates`)."""

    async def find(self, fp: int, simhash: int, distance: int) -> int | None:
        """The fingerprint of an earlier page (another URL) within `distance` bits of `simhash`, if any."""
        ...


class StoredTwins:
    """An embedded crawl's: the pages committed to its store (they remember themselves as they commit)."""

    def __init__(self, db: Database, crawl_id: int) -> None:
        self._db = db
        self._crawl_id = crawl_id

    async def find(self, fp: int, simhash: int, distance: int) -> int | None:
        return await self._db.run(near_duplicate, self._crawl_id, simhash, fp, distance)
