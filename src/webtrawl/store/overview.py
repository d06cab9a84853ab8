"""The dashboard's overview of a crawl: its totals, live while its process runs (see `store.live`)."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from .index import drop_counts, failure_counts, unindexed
from .live import ACTIVE, STALE_AFTER, crawl_totals, read_snapshot, stored_counts
from .schedule import Due, due_counts


@dataclass(frozen=True, slots=True, kw_only=True)
class Overview:
    state: str
    """What the crawl's process last said: running, paused, stopping, or how its last run ended; "not running"
    when an active crawl stopped publishing (killed), "unknown" when it never published."""
    done: int
    waiting: int
    running: int
    failed: int
    waiting_by_depth: dict[int, int]
    captures: int
    bytes: int
    statuses: dict[int, int]
    """Captures by HTTP status; 0 counts fetches that got no response."""
    failures: dict[str, int]
    drops: dict[str, int]
    started_at: float
    last_fetch_at: float | None
    elapsed: float
    """Seconds from the crawl's creation to now while it runs, else to its last fetch."""
    pages_per_second: float
    """The current rate while the crawl runs, else captures over `elapsed`."""
    unindexed: int
    due: Due
    """Ended URLs by when their revisit is due (`--recrawl` fetches those due)."""


def overview(conn: sqlite3.Connection, crawl_id: int) -> Overview:
    """The crawl's totals. While its process runs, the URL counts and rate come from the snapshot it publishes
    every second (URLs it has handed out are still `waiting` in the store until their batch commits)."""
    totals = crawl_totals(conn, crawl_id)
    statuses = dict(
        conn.execute(
            "SELECT IFNULL(status, 0), COUNT(*) FROM captures WHERE crawl_id = ? GROUP BY IFNULL(status, 0)",
            (crawl_id,),
        ).fetchall()
    )
    published = read_snapshot(conn, crawl_id)
    snap = published[1] if published else {}
    live = bool(published and snap["state"] in ACTIVE and time.time() - published[0] < STALE_AFTER)
    counts = snap["counts"] if live else stored_counts(conn, crawl_id)
    elapsed, rate = totals.pace(float(snap["pages_per_second"]) if live else None)
    state = snap["state"] if live or (snap and snap["state"] not in ACTIVE) else "not running" if snap else "unknown"
    return Overview(
        state=state,
        done=int(counts["done"]),
        waiting=int(counts["waiting"]),
        running=int(counts["running"]),
        failed=int(counts["failed"]),
        waiting_by_depth={int(depth): n for depth, n in counts["waiting_by_depth"].items()},
        captures=totals.captures,
        bytes=totals.bytes,
        statuses=statuses,
        failures={reason or "(no reason)": n for reason, n in failure_counts(conn, crawl_id).items()},
        drops=drop_counts(conn, crawl_id),
        started_at=totals.started_at,
        last_fetch_at=totals.last_fetch_at,
        elapsed=elapsed,
        pages_per_second=rate,
        unindexed=unindexed(conn),
        due=due_counts(conn, crawl_id, time.time()),
    )
