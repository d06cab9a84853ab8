"""A distributed crawl's results written into the coordinator's crawl database.

Nodes complete URLs in Redis and append one stream entry per completed URL (`cluster.wire`); the
coordinator applies them here, to the same tables an embedded crawl writes, so `status`, `export` and the
dashboard read either kind of crawl alike. The search index follows the captures as it does in an
embedded crawl (`store.index.index_captures`), called by the coordinator, not here.

Streams deliver at least once, and entries of different partitions in any order relative to each other,
so applying an entry is idempotent and order-tolerant:
- an entry's capture carries its stream key (`captures.ingest_key`, unique within a crawl); an entry whose
  key is already there was applied whole, in one transaction, and is skipped whole;
- a URL's state only moves on: a completion changes its row only while the row has not yet counted
  that fetch (`attempts <= entry.attempts`), so a late duplicate of a retry cannot undo the done that
  followed it, even for a completion without a capture (which has no key to find);
- a page's links arrive as waiting URLs and never change a URL that is running, done or failed (its own
  completion may have come first, from another partition); a waiting one takes the smaller depth;
- a link the frontier refused for a budget is not a URL of the crawl, whichever arrives first: the drop
  (`ingest_drops`, from the stream of the link's own partition) or the page that links to it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence

from ..models import HOST_BUDGET, TEMPLATE_BUDGET, Completion, NewURL, Resource, State
from ..parse.simhash import NEAR_DISTANCE
from ..urls import fingerprint
from .batches import Completed, record_batch, record_drops, record_site_files
from .db import transaction

Item = tuple[str, Completion, str]
"""(ingest key, completion, node id): the key is unique per stream entry, e.g. "p17:1700000000000-0"."""

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


def ingest(
    conn: sqlite3.Connection,
    crawl_id: int,
    items: Sequence[Item],
    near_distance: int = NEAR_DISTANCE,
    new_links: Fresh | None = None,
) -> int:
    """Apply stream entries to crawl `crawl_id` in one transaction; return how many were not applied before.

    An entry counts as new when its capture is added or, for one without a capture, when its URL's state
    moves. A key listed twice in `items` is applied once. Captures get their duplicate marks here, as an
    embedded crawl's do as it commits them (`near_distance`: the crawl's near-duplicate distance), and each
    ended fetch its revisit schedule.

    `new_links` (a cache the caller keeps across calls) leaves out links already recorded at their depth or
    closer: their upsert would change nothing (a URL deleted since, refused for a budget, stays out through
    its drop), and most of a page's links are such, each an upsert and two index probes otherwise. Their
    link edges are recorded all the same.
    """
    with transaction(conn):
        return apply_items(conn, crawl_id, items, near_distance, new_links)


def apply_items(
    conn: sqlite3.Connection,
    crawl_id: int,
    items: Sequence[Item],
    near_distance: int = NEAR_DISTANCE,
    new_links: Fresh | None = None,
) -> int:
    """`ingest` inside the caller's transaction (a node's shard settles its batch with it, see `store.shard`)."""
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
    for completion in completions:  # in stream order: a retry and the done that followed it may share a batch
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


def ingest_site_files(
    conn: sqlite3.Connection, crawl_id: int, entries: Sequence[tuple[Sequence[Resource], str]]
) -> None:
    """Index the robots.txt and sitemap responses nodes archived, as (files, node id) per stream entry, in one
    transaction; files indexed before are skipped (see `record_site_files`)."""
    with transaction(conn):
        for files, node in entries:
            record_site_files(conn, crawl_id, files, node)


def ingest_round(
    conn: sqlite3.Connection,
    crawl_id: int,
    items: Sequence[Item],
    drops: Sequence[Sequence[str]],
    site_files: Sequence[tuple[Sequence[Resource], str]],
    near_distance: int = NEAR_DISTANCE,
    new_links: Fresh | None = None,
) -> None:
    """Apply what the coordinator read in one round: completions, drops and site files, each kind in a
    transaction of its own (any order will do, see above), in one call of the database thread."""
    if items:
        ingest(conn, crawl_id, items, near_distance, new_links)
    if drops:
        ingest_drops(conn, crawl_id, drops)
    if site_files:
        ingest_site_files(conn, crawl_id, site_files)


def settle_unreached(conn: sqlite3.Connection, crawl_id: int) -> int:
    """At the end of a finished crawl: links that never reached the frontier become drops; returns how many.

    A page's links arrive here as waiting URLs. When the crawl is over nothing waits in Redis, so a link still
    waiting here was never enqueued: the Bloom filter took it for a URL already seen (its false positive).
    """
    with transaction(conn):
        conn.execute(
            "INSERT OR IGNORE INTO dropped(crawl_id, fp, url, reason, referrer_fp) "
            "SELECT crawl_id, fp, url, 'bloom-false-positive', referrer_fp FROM urls WHERE crawl_id = ? AND state = 0",
            (crawl_id,),
        )
        return conn.execute("DELETE FROM urls WHERE crawl_id = ? AND state = 0", (crawl_id,)).rowcount
