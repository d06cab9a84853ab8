"""The revisit schedule in the store: what each URL keeps of its last fetch, which URLs are due again, and how
many are due now, soon and later (`status`, dashboard).

The embedded frontier and a distributed crawl's nodes, each in its shard (`store.ingest`), record fetches
here; an embedded crawl re-queues due URLs in place (`frontier.sqlite`), a coordinator reads them from every
shard (`due_in`) to put them back in their Redis partitions.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..models import Completion, Entry, Previous, Revisit, State
from .shards import Sources

HOUR, DAY = 3600.0, 86400.0


@dataclass(frozen=True, slots=True)
class Due:
    now: int = 0
    within_hour: int = 0
    within_day: int = 0
    later: int = 0
    next_at: float | None = None
    """When the first URL not due yet becomes due (epoch seconds)."""

    @property
    def total(self) -> int:
        return self.now + self.within_hour + self.within_day + self.later


def due_counts(conn: sqlite3.Connection, crawl_id: int, now: float) -> Due:
    """Ended URLs by when their revisit is due (from `urls_due`: URLs with a due time only)."""
    row = conn.execute(
        "SELECT COUNT(*) FILTER (WHERE next_due <= ?1), "
        "COUNT(*) FILTER (WHERE next_due > ?1 AND next_due <= ?1 + ?2), "
        "COUNT(*) FILTER (WHERE next_due > ?1 + ?2 AND next_due <= ?1 + ?3), "
        "COUNT(*) FILTER (WHERE next_due > ?1 + ?3), MIN(next_due) FILTER (WHERE next_due > ?1) "
        "FROM urls WHERE crawl_id = ?4 AND next_due IS NOT NULL AND state IN (2, 3)",
        (now, HOUR, DAY, crawl_id),
    ).fetchone()
    return Due(*row)


_SCHEDULE = """
    UPDATE urls SET fetched_at = COALESCE(?, fetched_at), digest = COALESCE(?, digest), etag = COALESCE(?, etag),
        last_modified = COALESCE(?, last_modified), interval = ?, next_due = ?
    WHERE crawl_id = ? AND fp = ?
"""
_DUE = "state IN (2, 3) AND kind != 'media' AND (next_due IS NULL OR next_due <= ?)"
"""Ended URLs whose revisit is due, or that never got a due time (fetched before schedules); media tasks are
not revisited."""


def record_schedules(conn: sqlite3.Connection, crawl_id: int, batch: Sequence[Completion]) -> None:
    """Keep, for each ended fetch of `batch`, the URL's validators, digest and revisit schedule."""
    conn.executemany(_SCHEDULE, [(*_schedule(item), crawl_id, item.entry.fp) for item in batch if item.due])


def supersede_text(conn: sqlite3.Connection, crawl_id: int, batch: Sequence[Completion]) -> None:
    """A page re-fetched with new content is searched by its new text only (the old stays in the archive):
    its earlier captures' text goes. Call before the batch's captures are inserted."""
    conn.executemany(
        "UPDATE captures SET text = '' WHERE crawl_id = ? AND fp = ? AND text != ''",
        [(crawl_id, item.entry.fp) for item in batch if _superseding(item)],
    )


def _superseding(item: Completion) -> bool:
    capture = item.capture
    return item.entry.previous is not None and capture is not None and not capture.unchanged and bool(capture.text)


def _schedule(item: Completion) -> tuple[Any, ...]:
    """What a URL keeps of an ended fetch: its validators and digest (of a response that had content to
    compare: a 2xx or a 304), and its revisit schedule. An unchanged fetch keeps the time of the capture that
    holds the content, which the next revisit record refers to (WARC-Refers-To-Date)."""
    capture = item.capture
    kept = capture is not None and capture.status is not None and (200 <= capture.status < 300 or capture.status == 304)
    if not kept:
        return (capture.fetched_at if capture else None, None, None, None, item.interval, item.due)
    assert capture is not None
    fetched = None if capture.unchanged else capture.fetched_at
    return (fetched, capture.payload_digest, capture.etag, capture.last_modified, item.interval, item.due)


def requeue_due(conn: sqlite3.Connection, crawl_id: int, now: float) -> int:
    """Due URLs wait again, with fresh attempts (an embedded re-crawl); returns how many."""
    return conn.execute(
        f"UPDATE urls SET state = 0, not_before = 0, attempts = 0, updated_at = ? WHERE crawl_id = ? AND {_DUE}",
        (now, crawl_id, now),
    ).rowcount


def due_revisits(
    conn: sqlite3.Connection, crawl_id: int, now: float, after: int, limit: int
) -> list[tuple[int, Revisit]]:
    """Up to `limit` due URLs past row id `after`, each with its row id, as a distributed re-crawl hands them
    to its partitions (in chunks, so a million due URLs never sit in memory at once)."""
    rows = conn.execute(
        f"SELECT id, (SELECT host FROM hosts WHERE id = host_id), state, {ENTRY} "
        f"FROM urls WHERE crawl_id = ? AND id > ? AND {_DUE} ORDER BY id LIMIT ?",
        (crawl_id, after, now, limit),
    ).fetchall()
    return [
        (row_id, Revisit(entry=replace(entry_of(host, rest), attempts=0), ended="done" if state == 2 else "failed"))
        for row_id, host, state, *rest in rows
    ]


DueCursor = tuple[int, int]
"""Where reading due URLs goes on: the index of a source in `Sources.all`, and a row id in it."""


def due_in(sources: Sources, now: float, cursor: DueCursor, limit: int) -> tuple[list[Revisit], DueCursor | None]:
    """Up to `limit` due URLs of every source from `cursor` on, and the cursor after them (None at the end).

    A URL may have ended in several shards (a later pass fetched it on another node): the latest of its ended
    rows (by when it ended) decides whether it is due, so it comes once, and never early."""
    at, after = cursor
    while at < len(sources.all):
        source = sources.all[at]
        chunk = due_revisits(source.conn, source.crawl_id, now, after, limit)
        if not chunk:
            at, after = at + 1, 0
            continue
        latest = _latest_ended(sources, [revisit.entry.fp for _row, revisit in chunk])
        return [revisit for _row, revisit in chunk if latest[revisit.entry.fp] == source.number], (at, chunk[-1][0])
    return [], None


def _latest_ended(sources: Sources, fps: Sequence[int]) -> dict[int, int]:
    """For each of `fps`, the number of the source whose row of it ended last (the lowest of sources that tie)."""
    ended: dict[int, tuple[float, int]] = {}
    for source in sources.all:
        for fp, updated_at in source.conn.execute(
            "SELECT fp, updated_at FROM urls WHERE crawl_id = ? AND state IN (2, 3) "
            "AND fp IN (SELECT value FROM json_each(?))",
            (source.crawl_id, json.dumps(list(fps))),
        ):
            ended[fp] = max(ended.get(fp, (updated_at, -source.number)), (updated_at, -source.number))
    return {fp: -number for fp, (_at, number) in ended.items()}


def frontier_rows(
    conn: sqlite3.Connection, crawl_id: int, ended: bool, after: int, limit: int
) -> list[tuple[int, Entry, State]]:
    """Up to `limit` URLs of the crawl past row id `after` that have `ended` (done or failed) or not, each with
    its row id and state: what a frontier rebuilt from the index needs (a crawl Redis lost), in chunks."""
    states = (State.DONE, State.FAILED) if ended else (State.WAITING, State.RUNNING)
    rows = conn.execute(
        f"SELECT id, (SELECT host FROM hosts WHERE id = host_id), state, {ENTRY} "
        "FROM urls WHERE crawl_id = ? AND id > ? AND state IN (?, ?) ORDER BY id LIMIT ?",
        (crawl_id, after, *states, limit),
    ).fetchall()
    return [(row_id, replace(entry_of(host, rest), attempts=0), State(state)) for row_id, host, state, *rest in rows]


ENTRY = "url, fp, depth, kind, referrer_fp, attempts, via, fetched_at, digest, etag, last_modified, interval, priority"
"""The columns of `urls` that make an `Entry` (`entry_of`)."""


def entry_of(host: str, row: Sequence[Any]) -> Entry:
    """The frontier entry of a `urls` row of `ENTRY` columns, with what its last fetch left for a revisit."""
    url, fp, depth, kind, referrer, attempts, via, fetched, digest, etag, modified, interval, priority = row
    return Entry(
        url=url,
        fp=fp,
        host=host,
        depth=depth,
        kind=kind,
        referrer_fp=referrer,
        attempts=attempts,
        via=tuple(json.loads(via)) if via else (),
        previous=None
        if fetched is None
        else Previous(fetched_at=fetched, digest=digest, etag=etag, last_modified=modified, interval=interval),
        priority=priority,
    )
