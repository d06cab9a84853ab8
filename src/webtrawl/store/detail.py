"""What the dashboard's page of one capture reads: the capture, how its URL was found and where it led,
its links both ways (the first `MAX_LINKS` of each, with totals), every capture of the URL, and for an
unchanged capture the one it repeats.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from ..models import State
from ..urls import fingerprint
from .browse import FROM, ROW, PageRow
from .replay import capture_by_id, original_of

MAX_LINKS = 500
"""In-links and out-links listed on a capture's detail (the totals are counted in full)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkRow:
    url: str
    capture_id: int | None
    """The URL's latest capture, if it was fetched."""
    state: str
    """waiting, running, done, failed, or "dropped: <reason>"."""


@dataclass(frozen=True, slots=True)
class CaptureRef:
    id: int
    fetched_at: float
    status: int | None


@dataclass(frozen=True, slots=True)
class Repeated:
    """The earlier capture whose content an unchanged capture stands for (see `replay.original_of`)."""

    id: int
    fetched_at: float
    status: int | None
    warc_file: str | None
    node: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Detail:
    page: PageRow
    kind: str | None
    """How the URL was found: seed, link, requisite, redirect or sitemap."""
    state: str | None
    reason: str | None
    """Why the URL failed (or waits for a retry)."""
    referrer: LinkRow | None
    redirects: list[str]
    """URLs that redirected to this one, first first."""
    location: LinkRow | None
    """Where a 3xx response pointed."""
    request_headers: list[tuple[str, str]]
    response_headers: list[tuple[str, str]]
    ip: str | None
    ttfb: float | None
    elapsed: float | None
    truncated: str | None
    etag: str | None
    last_modified: str | None
    payload_digest: str | None
    warc_file: str | None
    warc_offset: int | None
    warc_length: int | None
    node: str | None
    """The node of a distributed crawl that fetched it: its WARC file is on that node's disk."""
    unchanged: bool
    """A re-fetch that brought nothing new (a 304, or the same payload digest): archived as a revisit record."""
    repeats: Repeated | None
    """For an unchanged capture, the capture whose content it repeats; None when the crawl has none."""
    captures: list[CaptureRef]
    """Every capture of the URL, oldest first."""
    out_links: list[LinkRow]
    out_total: int
    in_links: list[LinkRow]
    in_total: int


_PLAIN = (
    "ip", "ttfb", "elapsed", "truncated", "etag", "last_modified", "payload_digest", "warc_file", "warc_offset",
    "warc_length", "node",
)  # fmt: skip
"""Detail columns passed on as stored."""
LINK_TABLES = {
    "out": ("links", "src_fp", "dst_fp"),
    "in": ("links_in", "dst_fp", "src_fp"),
}
"""Per direction of a URL's links, (the table, the column naming the URL, the column naming the other end).
In-links have a table of their own, keyed by target (see `store.schema`), filled as the search index
catches up."""


def detail(conn: sqlite3.Connection, crawl_id: int, capture_id: int) -> Detail | None:
    cursor = conn.execute(
        f"SELECT {ROW}, {', '.join(f'c.{name}' for name in _PLAIN)}, c.fp, c.redirects, c.location, "
        f"c.request_headers, c.response_headers, c.unchanged, u.kind, u.state, u.reason, u.referrer_fp {FROM} "
        "WHERE c.crawl_id = ? AND c.id = ?",
        (crawl_id, capture_id),
    )
    row = cursor.fetchone()
    if row is None:
        return None
    n = len(PageRow.__slots__)
    more = dict(zip((column[0] for column in cursor.description[n:]), row[n:], strict=True))
    fp, state, location = more["fp"], more["state"], more["location"]
    out_links, out_total = _link_rows(conn, crawl_id, "out", fp)
    in_links, in_total = _link_rows(conn, crawl_id, "in", fp)
    return Detail(
        page=PageRow(**dict(zip(PageRow.__slots__, row[:n], strict=True))),
        **{name: more[name] for name in _PLAIN},
        unchanged=bool(more["unchanged"]),
        repeats=_repeated(conn, crawl_id, capture_id) if more["unchanged"] else None,
        kind=more["kind"],
        state=None if state is None else State(state).name.lower(),
        reason=more["reason"],
        referrer=_link_row(conn, crawl_id, more["referrer_fp"]),
        redirects=json.loads(more["redirects"] or "[]"),
        location=_link_row(conn, crawl_id, fingerprint(location) if location else None),
        request_headers=[tuple(pair) for pair in json.loads(more["request_headers"] or "[]")],
        response_headers=[tuple(pair) for pair in json.loads(more["response_headers"] or "[]")],
        captures=[
            CaptureRef(*ref)
            for ref in conn.execute(
                "SELECT id, fetched_at, status FROM captures WHERE crawl_id = ? AND fp = ? ORDER BY fetched_at, id",
                (crawl_id, fp),
            )
        ],
        out_links=out_links,
        out_total=out_total,
        in_links=in_links,
        in_total=in_total,
    )


def _repeated(conn: sqlite3.Connection, crawl_id: int, capture_id: int) -> Repeated | None:
    """The capture unchanged capture `capture_id` repeats, found as the archive view finds it."""
    revisit = capture_by_id(conn, crawl_id, capture_id)
    original = original_of(conn, crawl_id, revisit) if revisit is not None else None
    if original is None:
        return None
    return Repeated(original.id, original.fetched_at, original.status, original.warc_file, original.node)


def _link_rows(conn: sqlite3.Connection, crawl_id: int, direction: str, fp: int) -> tuple[list[LinkRow], int]:
    """The first MAX_LINKS URLs the URL `fp` links to (or is linked from, `direction`), as the crawl knows
    them, sorted; and how many there are in all."""
    table, this, other = LINK_TABLES[direction]
    query = f"SELECT {other} FROM {table} WHERE crawl_id = ? AND {this} = ?"
    fps = [end for (end,) in conn.execute(f"{query} LIMIT ?", (crawl_id, fp, MAX_LINKS))]
    (total,) = conn.execute(f"SELECT COUNT(*) FROM ({query})", (crawl_id, fp)).fetchone()
    rows = [_link_row(conn, crawl_id, end) for end in fps]
    return sorted((row for row in rows if row is not None), key=lambda row: row.url), int(total)


def _link_row(conn: sqlite3.Connection, crawl_id: int, fp: int | None) -> LinkRow | None:
    if fp is None:
        return None
    url, state, dropped, capture_id = conn.execute(
        "SELECT COALESCE(u.url, d.url), u.state, d.reason, "
        "(SELECT MAX(id) FROM captures c WHERE c.crawl_id = ?1 AND c.fp = ?2) "
        "FROM (SELECT 1) LEFT JOIN urls u ON u.crawl_id = ?1 AND u.fp = ?2 "
        "LEFT JOIN dropped d ON d.crawl_id = ?1 AND d.fp = ?2",
        (crawl_id, fp),
    ).fetchone()
    if url is None:
        return None
    label = State(state).name.lower() if state is not None else f"dropped: {dropped}"
    return LinkRow(url=url, capture_id=capture_id, state=label)
