"""A running crawl's live state in its store: the snapshot it publishes and the command it obeys.

The crawl process writes `crawl_live` (one row per crawl: a JSON snapshot of its counters, every second)
and reads `crawl_control` (one row per crawl: the last command a dashboard asked for). So a dashboard in
another process watches and steers an embedded crawl through the database alone, with short transactions
like every other read, and needs no channel of its own to the crawl.

What the dashboard's cards and chart show of the whole crawl, rather than of the running process, comes
from the captures themselves (`crawl_totals`, `rate_history`): they are the crawl's history, whichever run
or node fetched them, and a finished crawl keeps it.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..models import FrontierCounts, State
from ..stats import Stats
from .crawls import crawl_id_of
from .db import DB_NAME, connect, transaction
from .shards import Sources, database_of

COMMANDS = ("run", "pause", "stop")
"""What a crawl can be told: run (resume after a pause), pause (claim nothing), stop (end the run)."""
ACTIVE = ("running", "paused", "stopping")
"""States a crawl publishes while its process runs; after it ends, the snapshot holds its outcome."""
CHECKPOINT_WAIT = 0.25
"""Seconds a checkpoint waits for readers to finish before it gives up until the next one."""
STALE_AFTER = 10.0
"""Seconds without a new snapshot after which an active crawl is taken for gone (killed, or its host down);
long enough for a snapshot that waited behind a big commit."""


def snapshot(state: str, stats: Stats, counts: FrontierCounts) -> dict[str, Any]:
    """What a dashboard shows of a run: its state, counters and rates, and the frontier's counts."""
    pages_per_second, bytes_per_second = stats.rates()
    return {
        "state": state,
        "pid": os.getpid(),
        "elapsed": round(stats.elapsed, 2),
        "pages": stats.pages,
        "bytes": stats.bytes,
        "errors": stats.errors,
        "fetching": stats.fetching,
        "statuses": {str(status): n for status, n in sorted(stats.statuses.items())},
        "pages_per_second": round(pages_per_second, 2),
        "render": stats.render_counts(),
        "bytes_per_second": round(bytes_per_second),
        "cpu_seconds": stats.cpu_by_stage,
        "counts": {
            "waiting": counts.waiting,
            "running": counts.running,
            "done": counts.done,
            "failed": counts.failed,
            "waiting_by_depth": {str(depth): n for depth, n in sorted(counts.waiting_by_depth.items())},
        },
    }


def publish(conn: sqlite3.Connection, crawl_id: int, state: dict[str, Any], *, checkpoint: bool) -> str | None:
    """Write the crawl's snapshot and return the command waiting for it, in one short transaction.

    With `checkpoint`, also copy the WAL back into the database and truncate it. SQLite's own checkpoints
    never wait for readers, so readers that keep coming (an open dashboard) can keep the WAL from ever
    starting over, and it grows for as long as the crawl runs; this one waits for them, but only
    `CHECKPOINT_WAIT` (readers' transactions are short), and otherwise tries again next time.
    Runs on the crawl's database thread.
    """
    with transaction(conn):
        conn.execute(
            "INSERT INTO crawl_live(crawl_id, updated_at, snapshot) VALUES (?, ?, ?) "
            "ON CONFLICT(crawl_id) DO UPDATE SET updated_at = excluded.updated_at, snapshot = excluded.snapshot",
            (crawl_id, time.time(), json.dumps(state)),
        )
        row = conn.execute("SELECT command FROM crawl_control WHERE crawl_id = ?", (crawl_id,)).fetchone()
    if checkpoint:
        truncate_wal(conn)
    return None if row is None else str(row[0])


def truncate_wal(conn: sqlite3.Connection) -> None:
    """Copy the WAL back into the database and truncate it, waiting for readers at most `CHECKPOINT_WAIT`
    (busy readers make it give up until the next time, without an error)."""
    (patience,) = conn.execute("PRAGMA busy_timeout").fetchone()
    conn.execute(f"PRAGMA busy_timeout = {int(CHECKPOINT_WAIT * 1000)}")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(patience)}")


def wal_size(database: Path) -> int:
    """Bytes in the database's write-ahead log (0 when it has none)."""
    try:
        return (database.parent / f"{database.name}-wal").stat().st_size
    except FileNotFoundError:
        return 0


def clear_control(conn: sqlite3.Connection, crawl_id: int) -> None:
    """Forget the last command: a new run starts running, whatever an earlier one was told."""
    with transaction(conn):
        conn.execute("DELETE FROM crawl_control WHERE crawl_id = ?", (crawl_id,))


def send_command(directory: Path, name: str, command: str) -> None:
    """Tell crawl `name` in `directory` to run, pause or stop; it obeys at its next snapshot (within a second).

    Opens its own short-lived writable connection: the dashboard's other connections are read-only.
    """
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command!r}")
    conn = connect(directory / DB_NAME)
    try:
        crawl_id = crawl_id_of(conn, name)
        with transaction(conn):
            conn.execute(
                "INSERT INTO crawl_control(crawl_id, command, requested_at) VALUES (?, ?, ?) "
                "ON CONFLICT(crawl_id) DO UPDATE SET command = excluded.command, requested_at = excluded.requested_at",
                (crawl_id, command, time.time()),
            )
    finally:
        conn.close()


OBEYED = {"run": ("running",), "pause": ("paused",), "stop": ("stopping", "stopped")}
"""Per command, the states a crawl's snapshot shows once it obeyed (a stopped run's last one says "stopped")."""


def obeyed(conn: sqlite3.Connection, crawl_id: int, command: str, since: float) -> str | None:
    """The state the crawl published after `since` (epoch seconds), if it shows `command` obeyed."""
    found = read_snapshot(conn, crawl_id)
    if found is None or found[0] < since:
        return None
    state = str(found[1].get("state"))
    return state if state in OBEYED[command] else None


def read_snapshot(conn: sqlite3.Connection, crawl_id: int) -> tuple[float, dict[str, Any]] | None:
    """(when it was written, the snapshot) of the crawl's last published state; None if it never published.

    A database no crawl has opened since this table was added lacks it: read-only readers cannot migrate.
    """
    try:
        row = conn.execute("SELECT updated_at, snapshot FROM crawl_live WHERE crawl_id = ?", (crawl_id,)).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    return None if row is None else (float(row[0]), json.loads(row[1]))


def published_counts(published: tuple[float, dict[str, Any]] | None, live: bool) -> dict[str, Any] | None:
    """The URL counts of the crawl's snapshot when they are the best there are: while its process runs (`live`),
    and for a distributed crawl, once it stopped too (its coordinator's last word: Redis held the counts, and a
    shard holds only its node's part of the URLs). None when the store's own are better (`stored_counts`)."""
    if published is not None and (live or published[1].get("distributed")):
        return dict(published[1]["counts"])
    return None


def stored_counts(conn: sqlite3.Connection, crawl_id: int) -> dict[str, Any]:
    """The frontier's counts as the store holds them, for a crawl whose process is not running.

    (While a crawl runs, its snapshot is better: URLs it has just handed out are still `waiting` here.)
    """
    counts: dict[str, Any] = {state.name.lower(): 0 for state in State}
    for state, count in conn.execute(
        "SELECT state, COUNT(*) FROM urls WHERE crawl_id = ? GROUP BY state", (crawl_id,)
    ).fetchall():
        counts[State(state).name.lower()] = count
    counts["waiting_by_depth"] = {
        str(depth): count
        for depth, count in conn.execute(
            "SELECT depth, COUNT(*) FROM urls WHERE crawl_id = ? AND state = 0 GROUP BY depth ORDER BY depth",
            (crawl_id,),
        )
    }
    return counts


@dataclass(frozen=True, slots=True)
class CrawlTotals:
    started_at: float
    """When the crawl was created."""
    captures: int
    bytes: int
    last_fetch_at: float | None
    upto: dict[str, int]
    """Per source (by its database file: a crawl that began embedded has two in one directory), the last
    capture id counted: counting on from here reads only captures added since."""

    def pace(self, live_rate: float | None) -> tuple[float, float]:
        """(elapsed seconds, pages/s): while the crawl runs (`live_rate`: its current rate), from its creation to
        now; once it stopped, to its last fetch, at its average rate (a finished crawl is not "0 pages/s")."""
        if live_rate is not None:
            return time.time() - self.started_at, live_rate
        elapsed = (self.last_fetch_at or self.started_at) - self.started_at
        return elapsed, self.captures / elapsed if elapsed > 0 else 0.0


def time_left(waiting: int, running: int, pages_per_second: float) -> float | None:
    """Seconds until the URLs known now are fetched at `pages_per_second` (more may be found meanwhile); None
    while nothing is fetched. The dashboard and the terminal estimate alike."""
    return (waiting + running) / pages_per_second if pages_per_second > 0 else None


def crawl_totals(sources: Sources, since: CrawlTotals | None = None) -> CrawlTotals:
    """The crawl's captures and bytes in every source, counted on from `since` (captures are only ever added,
    with growing ids), so a reading every second costs the captures of that second, not a count of a million."""
    started_at, captures, size, last = math.inf, 0, 0, None
    if since is not None and set(since.upto) - {database_of(source) for source in sources.all}:
        since = None  # a source counted before is gone (a shard out of reach, or the shards replaced one database)
    upto = dict(since.upto) if since else {}
    for source in sources.all:
        (created_at,) = source.conn.execute("SELECT created_at FROM crawls WHERE id = ?", (source.crawl_id,)).fetchone()
        added, more, last_id = source.conn.execute(
            "SELECT COUNT(*), TOTAL(size), MAX(id) FROM captures WHERE id > ? AND crawl_id = ?",
            (upto.get(database_of(source), 0), source.crawl_id),
        ).fetchone()
        (latest,) = source.conn.execute(
            "SELECT MAX(fetched_at) FROM captures WHERE crawl_id = ?", (source.crawl_id,)
        ).fetchone()
        started_at, captures, size = min(started_at, float(created_at)), captures + added, size + int(more)
        last = latest if last is None or (latest is not None and latest > last) else last
        upto[database_of(source)] = last_id or upto.get(database_of(source), 0)
    return CrawlTotals(
        started_at=started_at if sources.all else time.time(),
        captures=(since.captures if since else 0) + captures,
        bytes=(since.bytes if since else 0) + size,
        last_fetch_at=last,
        upto=upto,
    )


@dataclass(frozen=True, slots=True)
class RateHistory:
    start: float
    """The time of the first capture (epoch seconds); 0 when there is none."""
    step: float
    """Seconds each rate covers."""
    rates: list[float]
    """Captures per second in each step from `start`, the last one over the part of it that has passed."""


def rate_history(sources: Sources, end: float, points: int = 120) -> RateHistory:
    """Pages per second over the whole crawl, from its first capture (in any source) to `end`, in at most
    `points` steps of whole seconds. One pass over each source's capture times (an index of them)."""
    firsts = [
        first
        for source in sources.all
        for (first,) in source.conn.execute(
            "SELECT MIN(fetched_at) FROM captures WHERE crawl_id = ?", (source.crawl_id,)
        )
        if first is not None
    ]
    if not firsts:
        return RateHistory(0.0, 1.0, [])
    start = min(firsts)
    end = max(end, start)
    step = float(max(1, math.ceil((end - start) / points)))
    counts = [0] * max(1, math.ceil((end - start) / step))
    for source in sources.all:
        for at, count in source.conn.execute(
            "SELECT CAST((fetched_at - ?1) / ?2 AS INTEGER), COUNT(*) FROM captures "
            "WHERE crawl_id = ?3 AND fetched_at >= ?1 GROUP BY 1",
            (start, step, source.crawl_id),
        ):
            counts[min(at, len(counts) - 1)] += count
    last_part = max(end - start - step * (len(counts) - 1), 1.0)
    rates = [count / step for count in counts[:-1]] + [counts[-1] / min(step, last_part)]
    return RateHistory(float(start), step, [round(rate, 2) for rate in rates])
