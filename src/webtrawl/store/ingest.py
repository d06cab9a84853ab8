"""A distributed crawl's results written into the shard of the node that fetched them (`store.shard`).

A node completes URLs in Redis and settles what Redis accepted here, into the same tables an embedded crawl
writes, so `status`, `export` and the dashboard read either kind of crawl alike. Settling may run again for
the same results (a node killed between the two steps is settled by the next one started in its directory,
from Redis's acknowledgements), so applying a result is idempotent:
- a result's capture carries its key (`captures.ingest_key`, unique within a crawl); a result whose key is
  already there was applied whole, in one transaction, and is skipped whole;
- a URL's state only moves on: a completion changes its row only while the row has not yet counted that
  fetch (`attempts`), or for a revisit of an ended URL, whose due time is past the row's;
- a page's links arrive as waiting URLs and never change a URL that is running, done or failed; a waiting
  one takes the smaller depth;
- a link the frontier refused for a budget is not a URL of the crawl (`ingest_drops`, recorded after the
  batch whose page linked it is settled).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence

from ..models import HOST_BUDGET, TEMPLATE_BUDGET, Completion, NewURL, State
from ..parse.simhash import NEAR_DISTANCE
from ..urls import fingerprint
from .batches import Completed, record_batch, record_drops
from .db import transaction

Item = tuple[str, Completion, str]
"""(ingest key, completion, node id): the key is unique per result, e.g. "node-02/17/-4711" (`store.shard`)."""

Fresh = Callable[[Iterable[NewURL]], list[NewURL]]
"""Of the URLs given, those not known to be recorded already at their depth or closer (`SeenCache.fresh`)."""

_KEYS_CHUNK = 500
"""Ingest keys looked up in one `IN (…)` query."""

_STATE = {"done": State.DONE, "failed": State.FAILED, "retry": State.WAITING}

_CHILD = """
    INSERT INTO urls(crawl_id, fp, url, host_id, depth, kind, referrer_fp, via, state, added_seq,
                     discovered_at, updated_at)
    SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9, ?10, ?10
    WHERE NOT EXISTS (SELECT 1 FROM dropped WHERE crawl_id = ?1 AND fp = ?2 AND reason IN (?11, ?12))
    ON CONFLICT(crawl_id, fp) DO UPDATE SET
        depth = excluded.depth, referrer_fp = excluded.referrer_fp, via = excluded.via, kind = excluded.kind,
        added_seq = excluded.added_seq, updated_at = excluded.updated_at
    WHERE excluded.depth < urls.depth AND urls.state = 0
"""
_COMPLETED = """
    INSERT INTO urls(crawl_id, fp, url, host_id, depth, kind, referrer_fp, via, state, attempts, not_before,
                     reason, added_seq, discovered_at, updated_at, priority)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT(crawl_id, fp) DO UPDATE SET
        kind = excluded.kind, state = excluded.state, attempts = excluded.attempts, not_before = excluded.not_before,
        reason = excluded.reason, depth = MIN(urls.depth, excluded.depth), updated_at = excluded.updated_at,
        priority = excluded.priority
    WHERE urls.attempts < excluded.attempts OR (urls.state IN (2, 3) AND ? > IFNULL(urls.next_due, 0))
"""
"""A fetch moves a URL's row on: a later attempt, or a revisit of an ended URL, whose next due time is past the
row's (a re-crawl puts an ended URL back in Redis only, so its row here is still ended; the same result
applied again finds its own due time there, and changes nothing)."""
_BUDGETS = (HOST_BUDGET, TEMPLATE_BUDGET)
"""The reasons that keep a URL out of the crawl for good (see `ingest_drops`)."""


def apply_items(
    conn: sqlite3.Connection,
    crawl_id: int,
    items: Sequence[Item],
    near_distance: int = NEAR_DISTANCE,
    new_links: Fresh | None = None,
) -> int:
    """Apply a node's results to its shard, inside the caller's transaction (`store.shard.settle`); return how
    many were not applied before.

    An item counts as new when its capture is added or, for one without a capture, when its URL's state
    moves. A key listed twice in `items` is applied once. Captures get their duplicate marks here, as an
    embedded crawl's do as it commits them (`near_distance`: the crawl's near-duplicate distance), and each
    ended fetch its revisit schedule.

    `new_links` (a cache the caller keeps across calls) leaves out links already recorded at their depth or
    closer: their upsert would change nothing (a URL deleted since, refused for a budget, stays out through
    its drop), and most of a page's links are such, each an upsert and two index probes otherwise. Their
    link edges are recorded all the same.
    """
    now = time.time()
    unique: dict[str, Item] = {}
    for item in items:
        unique.setdefault(item[0], item)
    applied = _applied_keys(conn, crawl_id, [key for key, completion, _node in unique.values() if completion.capture])
    fresh = [item for key, item in unique.items() if key not in applied]
    if not fresh:
        return 0
    # Ids grow with insertion, so this orders the call's discoveries after earlier ones for one index
    # probe, where MAX(added_seq) reads every URL of the crawl (0.25 s at a million). Only deleting the
    # newest URLs (refused by a budget) can make it go back, which costs nothing but that order.
    (seq,) = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM urls").fetchone()
    completions = [completion for _key, completion, _node in fresh]
    children = _shallowest(child for completion in completions for child in completion.children)
    if new_links is not None:
        children = new_links(children)
    host_ids = _host_ids(conn, crawl_id, [c.entry.host for c in completions] + [u.host for u in children])
    conn.executemany(
        _CHILD,
        [
            (crawl_id, u.fp, u.url, host_ids[u.host], u.depth, u.kind, u.referrer_fp, _via(u.via), seq, now, *_BUDGETS)
            for u in children
        ],
    )
    new = 0
    for completion in completions:  # in order: a retry and the done that followed it may share a batch
        moved = _complete(conn, crawl_id, completion, host_ids[completion.entry.host], seq, now)
        if moved or completion.capture is not None:
            new += 1
    record_batch(conn, crawl_id, [Completed(c, node, key) for key, c, node in fresh], near_distance)
    return new


def _applied_keys(conn: sqlite3.Connection, crawl_id: int, keys: list[str]) -> set[str]:
    applied: set[str] = set()
    for start in range(0, len(keys), _KEYS_CHUNK):
        chunk = keys[start : start + _KEYS_CHUNK]
        applied.update(
            key
            for (key,) in conn.execute(
                f"SELECT ingest_key FROM captures WHERE crawl_id = ? AND ingest_key IN ({', '.join('?' * len(chunk))})",
                (crawl_id, *chunk),
            )
        )
    return applied


def _shallowest(urls: Iterable[NewURL]) -> list[NewURL]:
    """Each URL once, as found at its smallest depth: most links of a batch's pages lead to the same places."""
    best: dict[int, NewURL] = {}
    for url in urls:
        known = best.get(url.fp)
        if known is None or url.depth < known.depth:
            best[url.fp] = url
    return list(best.values())


def _host_ids(conn: sqlite3.Connection, crawl_id: int, hosts: Iterable[str]) -> dict[str, int]:
    ids: dict[str, int] = {}
    for host in dict.fromkeys(hosts):
        row = conn.execute("SELECT id FROM hosts WHERE crawl_id = ? AND host = ?", (crawl_id, host)).fetchone()
        if row is None:
            cur = conn.execute("INSERT INTO hosts(crawl_id, host) VALUES (?, ?)", (crawl_id, host))
            assert cur.lastrowid is not None
            ids[host] = cur.lastrowid
        else:
            ids[host] = row[0]
    return ids


def _complete(
    conn: sqlite3.Connection, crawl_id: int, completion: Completion, host_id: int, seq: int, now: float
) -> bool:
    """Move the completed URL's row to the completion's state (creating it if its page's entry has not
    arrived yet); False when the row had counted this fetch already."""
    entry = completion.entry
    cur = conn.execute(
        _COMPLETED,
        (
            crawl_id,
            entry.fp,
            entry.url,
            host_id,
            entry.depth,
            entry.kind,
            entry.referrer_fp,
            _via(entry.via),
            _STATE[completion.verdict],
            entry.attempts + 1,
            completion.not_before or 0.0,
            completion.reason,
            seq,
            now,
            now,
            entry.priority,
            completion.due,
        ),
    )
    return cur.rowcount > 0


def _via(via: tuple[str, ...]) -> str | None:
    return json.dumps(via) if via else None


def ingest_drops(conn: sqlite3.Connection, crawl_id: int, drops: Sequence[Sequence[str]]) -> int:
    """Record URLs refused outside any page's completion (over a budget when added, out of a sitemap's
    scope), in one transaction; return how many were not recorded before.

    Each drop is (url, reason, referrer fp in decimal or ''); a URL already recorded keeps its first reason.
    A URL refused for a budget never enters the crawl, so if a page linking to it arrived first, its
    waiting row goes (a row that was ever handed out stays: it was admitted, and this drop is stale).
    """
    with transaction(conn):
        conn.executemany(
            "DELETE FROM urls WHERE crawl_id = ? AND fp = ? AND state = 0 AND attempts = 0",
            [(crawl_id, fingerprint(url)) for url, reason, _referrer in drops if reason in _BUDGETS],
        )
        return record_drops(
            conn, crawl_id, ((url, reason, int(referrer) if referrer else None) for url, reason, referrer in drops)
        )
