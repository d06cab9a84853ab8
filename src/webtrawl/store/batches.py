"""What a batch of completed URLs writes into a crawl's index, beside the URLs' own rows.

Two writers apply completions: the embedded frontier as it commits a batch (`frontier.sqlite`), and a
distributed crawl's node as it settles a batch in its shard (`store.ingest`). They differ only in how a
URL's row moves (an embedded crawl owns its rows; a shard's are upserted, idempotent); the
rest is this one function, so both kinds of crawl have the same links, drops, captures, duplicate marks,
media rows and revisit schedules, and `status`, `export` and the dashboard read either alike.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..models import Completion, Resource
from ..urls import fingerprint
from .crawls import add_extra_hosts
from .fingerprints import mark_fingerprints
from .index import capture_row, insert_captures, insert_resources
from .media import insert_media, url_of
from .schedule import record_schedules, supersede_text

MAX_STORED_URL = 4096
"""Dropped URLs are kept to this length: a hostile page may link 100 KB URLs."""

# A URL the crawl has taken is not a drop, however it was refused elsewhere (found too deep on one page, it
# may be in the frontier from another); one it takes later leaves `dropped` (the `urls_taken` trigger).
_DROP = """
    INSERT OR IGNORE INTO dropped(crawl_id, fp, url, reason, referrer_fp)
    SELECT ?1, ?2, ?3, ?4, ?5 WHERE NOT EXISTS (SELECT 1 FROM urls WHERE crawl_id = ?1 AND fp = ?2)
"""


@dataclass(frozen=True, slots=True)
class Completed:
    """One completion as it is written, with where it came from in a distributed crawl."""

    completion: Completion
    node: str | None = None
    """The node that completed it (None in an embedded crawl)."""
    ingest_key: str | None = None
    """Its result's key (see `store.ingest`; None in an embedded crawl)."""


def record_batch(conn: sqlite3.Connection, crawl_id: int, batch: Sequence[Completed], near_distance: int) -> None:
    """Write what `batch` found and fetched; call inside the transaction that moves the URLs' rows, after
    them (revisit schedules update those rows)."""
    completions = [item.completion for item in batch]
    conn.executemany(
        "INSERT OR IGNORE INTO links(crawl_id, src_fp, dst_fp) VALUES (?, ?, ?)",
        [(crawl_id, c.entry.fp, child.fp) for c in completions for child in c.children],
    )
    record_drops(conn, crawl_id, ((url, reason, c.entry.fp) for c in completions for url, reason in c.drops))
    supersede_text(conn, crawl_id, completions)
    mark_fingerprints(conn, crawl_id, [c.capture for c in completions if c.capture], near_distance)
    insert_captures(
        conn,
        crawl_id,
        [capture_row(item.completion.capture, item.node, item.ingest_key) for item in batch if item.completion.capture],
    )
    for item in batch:
        capture, media, entry = item.completion.capture, item.completion.media, item.completion.entry
        if capture is not None and capture.resources:
            insert_resources(conn, crawl_id, ((capture.fp, r) for r in capture.resources), item.node)
        if media is not None:
            if not media.page_url and entry.referrer_fp is not None:  # a node knows fingerprints only
                media.page_url = url_of(conn, crawl_id, entry.referrer_fp) or ""
            insert_media(conn, crawl_id, [(entry.fp, media)], item.node)
    record_schedules(conn, crawl_id, completions)
    add_extra_hosts(conn, crawl_id, [c.gained_host for c in completions if c.gained_host])


def record_site_files(
    conn: sqlite3.Connection, crawl_id: int, files: Sequence[Resource], node: str | None = None
) -> None:
    """Index the robots.txt and sitemap responses archived for the crawl itself, each under its own URL's
    fingerprint; a record indexed before (a batch staged again by a restarted node) is not indexed again."""
    fresh = [
        file
        for file in files
        if conn.execute(
            "SELECT 1 FROM resources WHERE crawl_id = ? AND url = ? AND fetched_at = ? AND warc_file = ? "
            "AND warc_offset = ?",
            (crawl_id, file.url, file.fetched_at, file.warc.file, file.warc.offset),
        ).fetchone()
        is None
    ]
    insert_resources(conn, crawl_id, ((fingerprint(file.url), file) for file in fresh), node, site_files=True)


def record_drops(conn: sqlite3.Connection, crawl_id: int, drops: Iterable[tuple[str, str, int | None]]) -> int:
    """Record refused URLs as (url, reason, referrer fp); a URL recorded before keeps its first reason, and
    one the crawl has taken is left out. Returns how many were new."""
    rows = [(crawl_id, fingerprint(url), url[:MAX_STORED_URL], reason, referrer) for url, reason, referrer in drops]
    return conn.executemany(_DROP, rows).rowcount
