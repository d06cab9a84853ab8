"""What the dashboard's lists of failed and dropped URLs read: the URLs a crawl could not or would not fetch,
with the reason, a page at a time.

Both lists page by a keyset (the last row's key as the cursor) along an index they already have: failed URLs
by their row id within `urls_state`, dropped ones by fingerprint, the drop log's primary key (an order with
no meaning, but one that costs the same on the thousandth page as on the first). A reason filter is checked
row by row along that order: failures and drops are few beside the pages, and the counts by reason that
head each list come from the same group-by the overview shows.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..models import State
from .index import drop_counts, failure_counts

Row = TypeVar("Row")
NO_REASON = "(no reason)"
"""How a failed URL without a recorded reason is listed, counted (as the overview counts it) and filtered."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedRow:
    url: str
    reason: str
    attempts: int
    depth: int
    updated_at: float
    """When the URL last changed state: when it failed."""
    capture_id: int | None
    """Its latest capture, when a fetch got as far as one (an HTTP error does; a refused connection not)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DroppedRow:
    url: str
    reason: str
    referrer: str | None
    """The page that linked it first (None for a URL refused before any page linked it, as a sitemap's)."""
    referrer_capture_id: int | None
    """That page's latest capture."""


@dataclass(frozen=True, slots=True)
class Listed(Generic[Row]):
    rows: list[Row]
    next: int | None
    """The key to pass as `after` for the next page; None on the last."""
    total: int
    """How many the list holds with this filter (all of them, not this page)."""
    reasons: dict[str, int]
    """Every reason with its count, most frequent first: what the filter offers."""


def list_failed(
    conn: sqlite3.Connection, crawl_id: int, reason: str = "", *, after: int | None = None, limit: int = 50
) -> Listed[FailedRow]:
    """One page of the crawl's failed URLs in the order they were found, those failed for `reason` if given."""
    reasons = {why or NO_REASON: n for why, n in failure_counts(conn, crawl_id).items()}
    found = conn.execute(
        "SELECT u.id, u.url, IFNULL(u.reason, ?1), u.attempts, u.depth, u.updated_at, "
        "(SELECT MAX(c.id) FROM captures c WHERE c.crawl_id = u.crawl_id AND c.fp = u.fp) "
        "FROM urls u WHERE u.crawl_id = ?2 AND u.state = ?3 AND u.id > ?4 "
        "AND (?5 = '' OR IFNULL(u.reason, ?1) = ?5) ORDER BY u.id LIMIT ?6",
        (NO_REASON, crawl_id, State.FAILED, after or 0, reason, limit + 1),
    ).fetchall()
    rows = [
        FailedRow(url=url, reason=why, attempts=attempts, depth=depth, updated_at=at, capture_id=capture)
        for _id, url, why, attempts, depth, at, capture in found[:limit]
    ]
    more = found[limit - 1][0] if len(found) > limit else None
    return Listed(rows, more, reasons.get(reason, 0) if reason else sum(reasons.values()), reasons)


def list_dropped(
    conn: sqlite3.Connection, crawl_id: int, reason: str = "", *, after: int | None = None, limit: int = 50
) -> Listed[DroppedRow]:
    """One page of the URLs the crawl refused and never took, those refused for `reason` if given, each with
    the page that linked it."""
    reasons = drop_counts(conn, crawl_id)
    found = conn.execute(
        "SELECT d.fp, d.url, d.reason, r.url, "
        "(SELECT MAX(c.id) FROM captures c WHERE c.crawl_id = d.crawl_id AND c.fp = d.referrer_fp) "
        "FROM dropped d LEFT JOIN urls r ON r.crawl_id = d.crawl_id AND r.fp = d.referrer_fp "
        f"WHERE d.crawl_id = ?1 {'' if after is None else 'AND d.fp > ?2'} AND (?3 = '' OR d.reason = ?3) "
        "AND NOT EXISTS (SELECT 1 FROM urls u WHERE u.crawl_id = d.crawl_id AND u.fp = d.fp) "
        "ORDER BY d.fp LIMIT ?4",
        (crawl_id, after, reason, limit + 1),
    ).fetchall()
    rows = [
        DroppedRow(url=url, reason=why, referrer=referrer, referrer_capture_id=capture)
        for _fp, url, why, referrer, capture in found[:limit]
    ]
    more = found[limit - 1][0] if len(found) > limit else None
    return Listed(rows, more, reasons.get(reason, 0) if reason else sum(reasons.values()), reasons)
