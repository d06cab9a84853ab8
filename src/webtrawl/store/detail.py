"""What the dashboard's page of one capture reads: the capture, how its URL was found and where it led,
its links both ways (the first `MAX_LINKS` of each, with totals), every capture of the URL, and for an
unchanged capture the one it repeats.
"""

from __future__ import annotations

import heapq
import itertools
import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..models import State
from ..urls import fingerprint
from .browse import FROM, ROW, PageRow
from .known import Known, known
from .replay import capture_in, original_in
from .schema import REQUESTS_SCHEMA
from .shards import Sources

MAX_LINKS = 500
"""In-links and out-links listed on a capture's detail (the totals are counted in full)."""
MAX_REQUESTS = 1000
"""Requests of a rendered page listed on its capture's detail."""
REFUSALS = (
    "reason IN ('robots.txt', 'private-address') OR reason LIKE 'a form sent by %' OR reason LIKE 'over % a page'"
)
"""The drops that are a rendered page's requests refused (`fetch.page.Rendering.refused`): a link the crawl
refuses has a reason of the scope's, and one robots.txt disallows ends as a failed URL, never a drop. Written
as the partial index `dropped_refused` has it (schema 14), which SQLite uses only for the same condition."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRow:
    """A request a rendered page made: sent (and archived), or refused with why."""

    method: str
    url: str
    status: int | None
    content_type: str
    record_bytes: int | None
    """The length of its response's WARC record, as stored (compressed)."""
    refused: str | None


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
    requests: list[RequestRow]
    """A rendered page's requests (the first `MAX_REQUESTS`), in the order they ended, then those refused."""


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


def detail(sources: Sources, capture_id: int) -> Detail | None:
    """Capture `capture_id` (a crawl-wide id, `Sources.capture_id`) and what the crawl knows around it, read in
    every source: its URL may have been fetched, linked and linked to in several shards."""
    located = sources.locate(capture_id)
    if located is None:
        return None
    source, local = located
    cursor = source.conn.execute(
        f"SELECT {ROW}, {', '.join(f'c.{name}' for name in _PLAIN)}, c.fp, c.redirects, c.location, "
        f"c.request_headers, c.response_headers, c.unchanged, u.kind, u.state, u.reason, u.referrer_fp {FROM} "
        "WHERE c.crawl_id = ? AND c.id = ?",
        (source.crawl_id, local),
    )
    row = cursor.fetchone()
    if row is None:
        return None
    n = len(PageRow.__slots__)
    more = dict(zip((column[0] for column in cursor.description[n:]), row[n:], strict=True))
    fp, state, location = more["fp"], more["state"], more["location"]
    out_links, out_total = _link_rows(sources, "out", fp)
    in_links, in_total = _link_rows(sources, "in", fp)
    captures = sorted(
        (
            CaptureRef(sources.capture_id(each, ref_id), fetched_at, status)
            for each in sources.all
            for ref_id, fetched_at, status in each.conn.execute(
                "SELECT id, fetched_at, status FROM captures WHERE crawl_id = ? AND fp = ?", (each.crawl_id, fp)
            )
        ),
        key=lambda ref: (ref.fetched_at, ref.id),
    )
    fetched_at = row[PageRow.__slots__.index("fetched_at")]
    until = min((ref.fetched_at for ref in captures if ref.fetched_at > fetched_at), default=None)
    return Detail(
        page=PageRow(**dict(zip(PageRow.__slots__, (capture_id, *row[1:n]), strict=True))),
        **{name: more[name] for name in _PLAIN},
        unchanged=bool(more["unchanged"]),
        repeats=_repeated(sources, capture_id) if more["unchanged"] else None,
        kind=more["kind"],
        state=None if state is None else State(state).name.lower(),
        reason=more["reason"],
        referrer=link_row(sources, more["referrer_fp"]),
        redirects=json.loads(more["redirects"] or "[]"),
        location=link_row(sources, fingerprint(location) if location else None),
        request_headers=[tuple(pair) for pair in json.loads(more["request_headers"] or "[]")],
        response_headers=[tuple(pair) for pair in json.loads(more["response_headers"] or "[]")],
        captures=captures,
        out_links=out_links,
        out_total=out_total,
        in_links=in_links,
        in_total=in_total,
        requests=_requests(source.conn, source.crawl_id, fp, fetched_at, until),
    )


def _requests(conn: sqlite3.Connection, crawl_id: int, fp: int, since: float, until: float | None) -> list[RequestRow]:
    """The requests page `fp` made while rendered for its capture at `since` (its next capture, at `until`,
    made its own), read where the capture is: a shard indexes a page's requests with it. Those refused are
    known by URL only, once a crawl (`dropped`): they are listed with every capture of the page that
    rendered."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version < REQUESTS_SCHEMA:  # a crawl of an earlier webtrawl, read as it is: its requests are not listed
        return []
    later = "" if until is None else " AND fetched_at < ?"
    sent = [
        RequestRow(method=method, url=url, status=status, content_type=content_type, record_bytes=size, refused=None)
        for method, url, status, content_type, size in conn.execute(
            "SELECT method, target, status, content_type, warc_length FROM resources "
            f"WHERE crawl_id = ? AND page_fp = ? AND site_file = 0 AND status IS NOT NULL AND fetched_at >= ?{later} "
            "ORDER BY fetched_at, id LIMIT ?",
            (crawl_id, fp, since, *(() if until is None else (until,)), MAX_REQUESTS),
        )
    ]
    rendered = (
        sent
        or conn.execute(
            "SELECT 1 FROM resources WHERE crawl_id = ? AND page_fp = ? AND url LIKE 'urn:dom:%' LIMIT 1",
            (crawl_id, fp),
        ).fetchone()
    )
    if not rendered:
        return sent
    refused = conn.execute(
        # Named: without statistics, SQLite would rather walk the crawl's every drop by its primary key.
        f"SELECT url, reason FROM dropped INDEXED BY dropped_refused WHERE crawl_id = ? AND referrer_fp = ? "
        f"AND ({REFUSALS}) LIMIT ?",
        (crawl_id, fp, MAX_REQUESTS - len(sent)),
    )
    return sent + [
        RequestRow(method="", url=url, status=None, content_type="", record_bytes=None, refused=reason)
        for url, reason in refused
    ]


def _repeated(sources: Sources, capture_id: int) -> Repeated | None:
    """The capture unchanged capture `capture_id` repeats, found as the archive view finds it, in whichever
    source holds it."""
    revisit = capture_in(sources, capture_id)
    original = None if revisit is None else original_in(sources.all, revisit)
    if original is None:
        return None
    capture = original.capture
    return Repeated(
        sources.capture_id(original.source, capture.id), capture.fetched_at, capture.status, capture.warc_file,
        capture.node,
    )  # fmt: skip


def linked_fps(sources: Sources, direction: str, fp: int, after: int | None = None) -> Iterator[int]:
    """The fingerprints of the URLs the URL `fp` links to (or is linked from, `direction`) in any source, in
    order, each once (one page may have been fetched, and its links kept, in two shards): a merge of each
    source's link table read along its key."""
    table, this, other = LINK_TABLES[direction]
    past = "" if after is None else f" AND {other} > ?"
    query = f"SELECT {other} FROM {table} WHERE crawl_id = ? AND {this} = ?{past} ORDER BY {other}"
    runs = [
        (end for (end,) in source.conn.execute(query, (source.crawl_id, fp, *(() if after is None else (after,)))))
        for source in sources.all
    ]
    return (end for end, _same in itertools.groupby(heapq.merge(*runs)))


def _link_rows(sources: Sources, direction: str, fp: int) -> tuple[list[LinkRow], int]:
    """The first MAX_LINKS URLs the URL `fp` links to (or is linked from, `direction`), as the crawl knows
    them, sorted; and how many there are in all."""
    total, fps = 0, []
    for end in linked_fps(sources, direction, fp):
        total += 1
        if total <= MAX_LINKS:
            fps.append(end)
    return sorted(link_rows(sources, fps), key=lambda row: row.url), total


def link_rows(sources: Sources, fps: Sequence[int]) -> list[LinkRow]:
    """The URLs `fps` (in that order) as the crawl knows them (`known.known`): the furthest state any source
    has, or why one dropped it; and the latest capture. A fingerprint no source knows is left out."""
    found = known(sources, fps)
    return [_link_row(url, found[fp]) for fp in fps if fp in found and (url := found[fp].url) is not None]


def link_row(sources: Sources, fp: int | None) -> LinkRow | None:
    """`link_rows` of one URL, if the crawl knows it."""
    rows = [] if fp is None else link_rows(sources, [fp])
    return rows[0] if rows else None


def _link_row(url: str, what: Known) -> LinkRow:
    label = State(what.state).name.lower() if what.state is not None else f"dropped: {what.dropped}"
    return LinkRow(url=url, capture_id=what.capture_id, state=label)
