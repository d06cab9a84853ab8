"""The embedded frontier's reads of `urls`: a claim's next URLs, a host's head, the counts by state.

Each takes the connection it runs on: a claim's and the counts' the database's reader thread, which reads the
last commit without waiting for the writer (`store.db.Database.read`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from ..models import Entry, FrontierCounts, State
from ..store.schedule import ENTRY, entry_of

Row = tuple[Any, ...]

ORDER = "depth, priority DESC, id"
"""The hand-out order of a host's waiting URLs (index `urls_waiting`): by depth, then importance (always 0
unless the crawl orders by importance), then arrival."""


def claim_rows(
    conn: sqlite3.Connection, plan: list[tuple[int, int, frozenset[int]]], host_names: Mapping[int, str], now: float
) -> dict[int, list[Entry]]:
    """Per host of the plan (host id, how many, fingerprints handed out already), its first fetchable waiting
    URLs in hand-out order, skipping those handed out; no write happens here.

    The hand-out is recorded (state running, `claim_seq`) in the next completion's transaction: a claim
    costs one indexed read instead of a transaction of its own, and a crash loses nothing, since URLs left
    running go back to waiting anyway.
    """
    read: dict[int, list[Entry]] = {}
    for host_id, limit, claimed in plan:
        # The URLs handed out are skipped in SQLite: reading them into Python to skip them there cost a
        # fast crawl 3 ms a claim, as hundreds wait for the commit that records them.
        rows = conn.execute(
            f"SELECT {ENTRY} FROM urls WHERE host_id = ? AND state = 0 AND not_before <= ? "
            f"AND fp NOT IN (SELECT value FROM json_each(?)) ORDER BY {ORDER} LIMIT ?",
            (host_id, now, json.dumps(list(claimed)), limit),
        )
        host = host_names[host_id]
        read[host_id] = [entry_of(host, row) for row in rows]
    return read


def heads_of(conn: sqlite3.Connection, host_ids: list[int], now: float) -> tuple[list[Row], list[Row]]:
    """For each host: its head among fetchable URLs, and when its next retry is due."""
    heads: list[Row] = []
    later: list[Row] = []
    for host_id in host_ids:
        for depth, not_before in conn.execute(
            "SELECT MIN(depth), MIN(not_before) FROM urls WHERE host_id = ? AND state = 0 GROUP BY not_before <= ?",
            (host_id, now),
        ):
            if not_before <= now:
                heads.append((host_id, depth))
            else:
                later.append((host_id, not_before))
    return heads, later


def count_rows(conn: sqlite3.Connection, crawl: int) -> FrontierCounts:
    """The crawl's URLs by state, and its waiting ones by depth."""
    counts = FrontierCounts()
    for state, count in conn.execute("SELECT state, COUNT(*) FROM urls WHERE crawl_id = ? GROUP BY state", (crawl,)):
        setattr(counts, State(state).name.lower(), count)
    counts.waiting_by_depth = dict(
        conn.execute(
            "SELECT depth, COUNT(*) FROM urls WHERE crawl_id = ? AND state = 0 GROUP BY depth ORDER BY depth",
            (crawl,),
        ).fetchall()
    )
    return counts
