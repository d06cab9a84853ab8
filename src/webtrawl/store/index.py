"""The page index: capture rows and the queries that read them.

Writes happen inside the frontier's commit transaction (so a capture row exists exactly when its URL is
done), or in a distributed crawl inside the coordinator's (`store.ingest`); reads serve `status`, `export`
and the dashboard through their own connections.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..models import Capture, Resource
from .db import transaction

_COLUMNS = (
    "fp, url, fetched_at, status, content_type, size, truncated, title, text, location, redirects, "
    "request_headers, response_headers, etag, last_modified, payload_digest, ip, ttfb, elapsed, "
    "warc_file, warc_offset, warc_length, error, unchanged, simhash, duplicate_of, near_duplicate_of, node, "
    "ingest_key"
)
_INSERT = f"INSERT INTO captures(crawl_id, {_COLUMNS}) VALUES ({', '.join('?' * 30)})"


TITLE = (
    "IFNULL(IIF(c.unchanged, (SELECT p.title FROM captures p WHERE p.crawl_id = c.crawl_id AND p.fp = c.fp "
    "AND p.unchanged = 0 AND p.payload_digest = c.payload_digest AND p.fetched_at <= c.fetched_at "
    "ORDER BY p.fetched_at DESC LIMIT 1), c.title), '')"
)
"""The title of capture `c` as readers show it. An unchanged capture is not parsed again (it keeps no title
of its own, so search finds its content once): its title is that of the latest capture with its content."""


def capture_row(capture: Capture, node: str | None = None, ingest_key: str | None = None) -> tuple[Any, ...]:
    """The column values of one capture, in `_COLUMNS` order.

    `node` and `ingest_key` are a distributed crawl's (see `store.ingest`); an embedded crawl has neither.
    """
    warc = capture.warc
    return (
        capture.fp,
        capture.url,
        capture.fetched_at,
        capture.status,
        capture.content_type,
        capture.size,
        capture.truncated,
        capture.title,
        capture.text,
        capture.location,
        json.dumps(capture.redirects) if capture.redirects else None,
        json.dumps(capture.request_headers),
        json.dumps(capture.response_headers),
        capture.etag,
        capture.last_modified,
        capture.payload_digest or (warc.payload_digest if warc else None),
        capture.ip,
        capture.ttfb,
        capture.elapsed,
        warc.file if warc else None,
        warc.offset if warc else None,
        warc.length if warc else None,
        capture.error,
        capture.unchanged,
        capture.simhash,
        capture.duplicate_of,
        capture.near_duplicate_of,
        node,
        ingest_key,
    )


def insert_captures(conn: sqlite3.Connection, crawl_id: int, rows: Sequence[tuple[Any, ...]]) -> None:
    conn.executemany(_INSERT, [(crawl_id, *row) for row in rows])


def insert_resources(
    conn: sqlite3.Connection,
    crawl_id: int,
    resources: Iterable[tuple[int, Resource]],
    node: str | None = None,
    *,
    site_files: bool = False,
) -> None:
    """Records archived outside the captures, as (page fingerprint, resource): a rendered page's (written with
    the page's capture) or, with `site_files`, the crawl's own robots.txt and sitemap files (their own URL's
    fingerprint)."""
    rows = [
        (crawl_id, page_fp, r.url, r.target, r.fetched_at, r.status, r.content_type, r.warc.file, r.warc.offset,
         r.warc.length, r.warc.payload_digest, node, site_files, r.method, r.request_query)
        for page_fp, r in resources
    ]  # fmt: skip
    if rows:
        conn.executemany(
            "INSERT INTO resources(crawl_id, page_fp, url, target, fetched_at, status, content_type, warc_file, "
            "warc_offset, warc_length, payload_digest, node, site_file, method, request_query) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


def rendered_counts(conn: sqlite3.Connection, crawl_id: int) -> tuple[int, int]:
    """Rendered pages with a rendered document archived, and responses to rendered pages' requests archived."""
    row = conn.execute(
        "SELECT COUNT(*) FILTER (WHERE url LIKE 'urn:dom:%'), COUNT(*) FILTER (WHERE status IS NOT NULL) "
        "FROM resources WHERE crawl_id = ? AND site_file = 0",
        (crawl_id,),
    ).fetchone()
    return int(row[0]), int(row[1])


INDEX_CHUNK = 2000
"""Captures indexed for search in one statement: the index waits for this many (FTS5 adds a chunk at a
fraction of the cost of many small ones, and a catch-up holds the crawl's one writer)."""
INDEX_EVERY = 5.0
"""Seconds at most between two catch-ups of the search index while captures come in."""


class IndexPace:
    """When the search index catches up with the captures written, for the embedded crawl's committer and a
    node's shard alike: once `INDEX_CHUNK` wait, or `INDEX_EVERY` seconds after the last catch-up,
    or, when the caller says its input is drained, as soon as any wait."""

    def __init__(self) -> None:
        self.waiting = 0
        self._since = time.monotonic()

    def added(self, captures: int) -> None:
        self.waiting += captures

    def due(self, *, drained: bool = False) -> bool:
        if self.waiting >= INDEX_CHUNK:
            return True
        return self.waiting > 0 and (drained or time.monotonic() - self._since >= INDEX_EVERY)

    def caught_up(self) -> None:
        self.waiting, self._since = 0, time.monotonic()


def unindexed(conn: sqlite3.Connection) -> int:
    """How many captures the search index has not caught up with."""
    (upto,) = conn.execute("SELECT upto FROM fts_progress").fetchone()
    (last,) = conn.execute("SELECT COALESCE(MAX(id), 0) FROM captures").fetchone()
    return int(last - upto)


def index_captures(conn: sqlite3.Connection, *, limit: int = INDEX_CHUNK) -> int:
    """Add up to `limit` captures not yet indexed to the search index, and their pages' out-links to the
    in-links (`links_in`, see `store.schema`), in one transaction; returns how many captures."""
    with transaction(conn):
        (upto,) = conn.execute("SELECT upto FROM fts_progress").fetchone()
        (last,) = conn.execute(
            "SELECT COALESCE(MAX(id), ?) FROM (SELECT id FROM captures WHERE id > ? ORDER BY id LIMIT ?)",
            (upto, upto, limit),
        ).fetchone()
        conn.execute(
            "INSERT INTO captures_fts(rowid, title, url, text) "
            "SELECT id, title, url, text FROM captures WHERE id > ? AND id <= ? ORDER BY id",
            (upto, last),
        )
        # Sorted by target, so the chunk's edges fill the in-link B-tree in key order.
        conn.execute(
            "INSERT OR IGNORE INTO links_in(crawl_id, dst_fp, src_fp) "
            "SELECT l.crawl_id, l.dst_fp, l.src_fp FROM captures c "
            "JOIN links l ON l.crawl_id = c.crawl_id AND l.src_fp = c.fp "
            "WHERE c.id > ? AND c.id <= ? ORDER BY l.crawl_id, l.dst_fp, l.src_fp",
            (upto, last),
        )
        conn.execute("UPDATE fts_progress SET upto = ?", (last,))
    return int(last - upto)


def drop_counts(conn: sqlite3.Connection, crawl_id: int) -> dict[str, int]:
    """Dropped URLs counted by reason, leaving out URLs the crawl took: a database of an older webtrawl
    opened read-only (not migrated, see schema 9) may still list them."""
    return dict(
        conn.execute(
            "SELECT reason, COUNT(*) FROM dropped d WHERE crawl_id = ? AND NOT EXISTS "
            "(SELECT 1 FROM urls u WHERE u.crawl_id = d.crawl_id AND u.fp = d.fp) "
            "GROUP BY reason ORDER BY COUNT(*) DESC",
            (crawl_id,),
        ).fetchall()
    )


def failure_counts(conn: sqlite3.Connection, crawl_id: int) -> dict[str, int]:
    """Failed URLs counted by reason."""
    return dict(
        conn.execute(
            "SELECT reason, COUNT(*) FROM urls WHERE crawl_id = ? AND state = 3 GROUP BY reason ORDER BY COUNT(*) DESC",
            (crawl_id,),
        ).fetchall()
    )


def status_counts(conn: sqlite3.Connection, crawl_id: int) -> dict[int, int]:
    """Captures counted by HTTP status (every fetch, retries included)."""
    return dict(
        conn.execute(
            "SELECT status, COUNT(*) FROM captures WHERE crawl_id = ? AND status IS NOT NULL "
            "GROUP BY status ORDER BY status",
            (crawl_id,),
        ).fetchall()
    )
