"""The dashboard's overview of a crawl: its totals, live while its process runs (see `store.live`)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from .index import unindexed
from .live import ACTIVE, STALE_AFTER, crawl_totals, published_counts, read_snapshot, stored_counts
from .problems import drop_counts_of, failure_counts_of
from .schedule import Due, due_counts
from .shards import Sources


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


def overview(sources: Sources) -> Overview:
    """The crawl's totals, over every source. The URL counts and the state are the crawl's own, kept in its
    directory (`Sources.home`): while its process runs, from the snapshot it publishes every second (URLs it
    has handed out are still `waiting` in the store until their batch commits), and a distributed crawl's
    from its coordinator's last snapshot (`store.live.published_counts`)."""
    home = sources.home
    assert home is not None, "an overview reads the crawl's own directory"
    totals = crawl_totals(sources)
    statuses: Counter[int] = Counter()
    for source in sources.all:
        statuses.update(
            dict(
                source.conn.execute(
                    "SELECT IFNULL(status, 0), COUNT(*) FROM captures WHERE crawl_id = ? GROUP BY IFNULL(status, 0)",
                    (source.crawl_id,),
                ).fetchall()
            )
        )
    published = read_snapshot(home.conn, home.crawl_id)
    snap = published[1] if published else {}
    live = bool(published and snap["state"] in ACTIVE and time.time() - published[0] < STALE_AFTER)
    counts = published_counts(published, live) or stored_counts(home.conn, home.crawl_id)
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
        statuses=dict(statuses),
        failures=failure_counts_of(sources),
        drops=drop_counts_of(sources),
        started_at=totals.started_at,
        last_fetch_at=totals.last_fetch_at,
        elapsed=elapsed,
        pages_per_second=rate,
        unindexed=sum(unindexed(source.conn) for source in sources.all),
        due=_due(sources),
    )


def _due(sources: Sources) -> Due:
    """Ended URLs by when their revisit is due, over every source (each URL's schedule is kept where it was
    fetched)."""
    now = time.time()
    each = [due_counts(source.conn, source.crawl_id, now) for source in sources.all]
    return Due(
        now=sum(due.now for due in each),
        within_hour=sum(due.within_hour for due in each),
        within_day=sum(due.within_day for due in each),
        later=sum(due.later for due in each),
        next_at=min((due.next_at for due in each if due.next_at is not None), default=None),
    )
