"""What the dashboard's lists of failed and dropped URLs read: the URLs a crawl could not or would not fetch,
with the reason, a page at a time, over every source of the crawl (`store.shards.Sources`: an embedded
crawl's one database, or each readable shard of a distributed crawl's) as one crawl.

Both lists page by a keyset (the last row's key as the cursor) along an index they already have: failed URLs
by their row id within `urls_state`, shard after shard (a URL fails in the shard whose node handled it; the
others may hold it as waiting, linked from their pages, or ended later: a revisit another node took, whose
latest ended row is what the URL came to, as for re-crawling, `store.schedule.due_in`), dropped ones by
fingerprint, the drop log's primary key (an order with no meaning, but one that costs the same on the
thousandth page as on the first), every source's merged. A URL several nodes dropped is listed and counted
once, with the reason and referrer of the lowest-numbered shard that dropped it, and not at all if any source
took it. A reason filter is checked row by row along that order: failures and drops are few beside the
pages, and the counts by reason that head each list are the overview's.
"""

from __future__ import annotations

import heapq
import itertools
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from ..models import State
from .index import drop_counts, failure_counts
from .known import UNKNOWN, Known, known
from .shards import Source, Sources, global_id, split_id

Row = TypeVar("Row")
NO_REASON = "(no reason)"
"""How a failed URL without a recorded reason is listed, counted (as the overview counts it) and filtered."""
CHUNK = 500
"""Dropped URLs checked against the other sources in one query each, when counting them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedRow:
    url: str
    reason: str
    attempts: int
    depth: int
    updated_at: float
    """When the URL last changed state: when it failed."""
    capture_id: int | None
    """Its latest capture (`Sources.capture_id`), when a fetch got as far as one (an HTTP error does; a
    refused connection not)."""
    referrer_fp: int | None = None
    """The page that linked it first (None for a seed, or a URL a sitemap gave)."""
    referrer: str | None = None
    referrer_capture_id: int | None = None
    """That page's latest capture in any source (`Sources.capture_id`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DroppedRow:
    url: str
    reason: str
    referrer: str | None
    """The page that linked it first (None for a URL refused before any page linked it, as a sitemap's)."""
    referrer_capture_id: int | None
    """That page's latest capture in any source (`Sources.capture_id`)."""


@dataclass(frozen=True, slots=True)
class Listed(Generic[Row]):
    rows: list[Row]
    next: int | None
    """The key to pass as `after` for the next page; None on the last."""
    total: int
    """How many the list holds with this filter (all of them, not this page)."""
    reasons: dict[str, int]
    """Every reason with its count, most frequent first: what the filter offers."""


def failure_counts_of(sources: Sources) -> dict[str, int]:
    """Failed URLs counted by reason over every source, most frequent first, "(no reason)" for none: one
    source counts them in SQL alone; across shards, a URL counts where its latest ended row is (`_failed`)."""
    total: Counter[str] = Counter()
    if len(sources.all) == 1:
        (source,) = sources.all
        for reason, n in failure_counts(source.conn, source.crawl_id).items():
            total[reason or NO_REASON] += n
    else:
        total.update(row.reason for _key, _fp, row in _failed(sources, "", None))
    return _most_first(total)


def drop_counts_of(sources: Sources) -> dict[str, int]:
    """Dropped URLs the crawl never took counted by reason over every source, most frequent first, each URL
    once however many nodes dropped it (one source counts them in SQL alone)."""
    if len(sources.all) == 1:
        (source,) = sources.all
        return drop_counts(source.conn, source.crawl_id)
    return _most_first(Counter(drop.reason for _source, drop in _drops(sources, "", None, CHUNK)))


def _most_first(counts: Counter[str]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def list_failed(sources: Sources, reason: str = "", *, after: int | None = None, limit: int = 50) -> Listed[FailedRow]:
    """One page of the crawl's failed URLs in the order each source found them (shard after shard), those
    failed for `reason` if given.

    The cursor is the last row's id (an embedded crawl's, as ever) or, across shards, its shard number and id
    in one integer (`shards.global_id`), so it orders as (shard, id)."""
    reasons = failure_counts_of(sources)
    found = list(itertools.islice(_failed(sources, reason, after), limit + 1))
    referrers = [row.referrer_fp for _key, _fp, row in found[:limit] if row.referrer_fp is not None]
    pages = known(sources, [fp for _key, fp, _row in found[:limit]] + referrers)
    rows = [_failed_row(row, pages.get(fp, UNKNOWN), pages) for _key, fp, row in found[:limit]]
    more = found[limit - 1][0] if len(found) > limit else None
    return Listed(rows, more, reasons.get(reason, 0) if reason else sum(reasons.values()), reasons)


def _failed_row(row: FailedRow, page: Known, pages: dict[int, Known]) -> FailedRow:
    """`row` with its latest capture and the page that linked it, as the crawl knows them."""
    referrer = UNKNOWN if row.referrer_fp is None else pages.get(row.referrer_fp, UNKNOWN)
    return replace(row, capture_id=page.capture_id, referrer=referrer.url, referrer_capture_id=referrer.capture_id)


def _failed(sources: Sources, reason: str, after: int | None) -> Iterator[tuple[int, int, FailedRow]]:
    """(cursor key, fingerprint, row without its capture) of the failed URLs after `after`, source by source
    in id order; a URL another source ended later (or as late, in a higher-numbered shard) is that source's."""
    start, floor = _failed_start(sources, after)
    for source in sorted(sources.all, key=lambda s: s.number):
        if source.number < start:
            continue
        rows = source.conn.execute(
            "SELECT id, fp, url, IFNULL(reason, ?1), attempts, depth, referrer_fp, updated_at FROM urls "
            "WHERE crawl_id = ?2 AND state = ?3 AND id > ?4 AND (?5 = '' OR IFNULL(reason, ?1) = ?5) ORDER BY id",
            (NO_REASON, source.crawl_id, State.FAILED, floor if source.number == start else 0, reason),
        )
        while chunk := rows.fetchmany(CHUNK):
            later = _ended_later(sources, source, chunk)
            for id_, fp, url, why, attempts, depth, referrer_fp, at in chunk:
                if fp in later:
                    continue
                key = global_id(source.number, id_) if sources.distributed else id_
                row = FailedRow(
                    url=url, reason=why, attempts=attempts, depth=depth, updated_at=at, capture_id=None,
                    referrer_fp=referrer_fp,
                )  # fmt: skip
                yield key, fp, row


def _ended_later(sources: Sources, source: Source, rows: Sequence[tuple[Any, ...]]) -> set[int]:
    """The fingerprints of `rows` (failed in `source`: fp second, updated_at last) that another source ended
    after `source` did (at the same time: a higher-numbered one)."""
    at = {row[1]: row[-1] for row in rows}
    later: set[int] = set()
    for other in sources.all:
        if other is source:
            continue
        for fp, ended in other.conn.execute(
            "SELECT u.fp, u.updated_at FROM json_each(?2) j JOIN urls u ON u.crawl_id = ?1 AND u.fp = j.value "
            "WHERE u.state IN (?3, ?4)",
            (other.crawl_id, json.dumps(list(at)), State.DONE, State.FAILED),
        ):
            if (ended, other.number) > (at[fp], source.number):
                later.add(fp)
    return later


def _failed_start(sources: Sources, after: int | None) -> tuple[int, int]:
    """The shard number and the id in it that a failed list's cursor resumes after."""
    if after is None:
        return -1, 0
    if not sources.distributed:
        return 0, after
    number, local = split_id(after)
    return (-1 if number is None else number), local


def list_dropped(
    sources: Sources, reason: str = "", *, after: int | None = None, limit: int = 50
) -> Listed[DroppedRow]:
    """One page of the URLs the crawl refused and never took, those refused for `reason` if given, each with
    the page that linked it. The cursor is the last row's fingerprint."""
    reasons = drop_counts_of(sources)
    found = [drop for _source, drop in itertools.islice(_drops(sources, reason, after, limit + 1), limit + 1)]
    pages = known(sources, [drop.referrer_fp for drop in found[:limit] if drop.referrer_fp is not None])
    rows = [_dropped_row(drop, pages) for drop in found[:limit]]
    more = found[limit - 1].fp if len(found) > limit else None
    return Listed(rows, more, reasons.get(reason, 0) if reason else sum(reasons.values()), reasons)


def _dropped_row(drop: _Drop, pages: dict[int, Known]) -> DroppedRow:
    referrer = UNKNOWN if drop.referrer_fp is None else pages.get(drop.referrer_fp, UNKNOWN)
    return DroppedRow(url=drop.url, reason=drop.reason, referrer=referrer.url, referrer_capture_id=referrer.capture_id)


@dataclass(frozen=True, slots=True)
class _Drop:
    fp: int
    url: str
    reason: str
    referrer_fp: int | None


def _drops(sources: Sources, reason: str, after: int | None, chunk: int) -> Iterator[tuple[Source, _Drop]]:
    """The crawl's drops after fingerprint `after` in fingerprint order, each from the source that owns it (see
    `_owned`), read `chunk` at a time from each source."""
    merged = heapq.merge(*(_dropped_in(source, reason, after) for source in sources.all), key=lambda pair: pair[1].fp)
    while found := list(itertools.islice(merged, chunk)):
        yield from _owned(sources, found)


def _dropped_in(source: Source, reason: str, after: int | None) -> Iterator[tuple[Source, _Drop]]:
    """One source's drops after `after` that it did not take itself, in fingerprint order."""
    for fp, url, why, referrer_fp in source.conn.execute(
        "SELECT d.fp, d.url, d.reason, d.referrer_fp FROM dropped d "
        f"WHERE d.crawl_id = ?1 {'' if after is None else 'AND d.fp > ?2'} AND (?3 = '' OR d.reason = ?3) "
        "AND NOT EXISTS (SELECT 1 FROM urls u WHERE u.crawl_id = d.crawl_id AND u.fp = d.fp) ORDER BY d.fp",
        (source.crawl_id, after, reason),
    ):
        yield source, _Drop(fp, url, why, referrer_fp)


def _owned(sources: Sources, found: Sequence[tuple[Source, _Drop]]) -> list[tuple[Source, _Drop]]:
    """The drops of `found` that no source took (has among its URLs) and that no lower-numbered source dropped
    too: so a URL several nodes dropped is one drop, the same whatever the reason filter."""
    if len(sources.all) == 1:
        return list(found)
    fps = json.dumps(sorted({drop.fp for _source, drop in found}))
    taken: dict[int, set[int]] = {}
    dropped: dict[int, set[int]] = {}
    for other in sources.all:
        taken[other.number], dropped[other.number] = set(), set()
        for fp, in_urls, in_dropped in other.conn.execute(
            "SELECT j.value, EXISTS (SELECT 1 FROM urls u WHERE u.crawl_id = ?1 AND u.fp = j.value), "
            "EXISTS (SELECT 1 FROM dropped d WHERE d.crawl_id = ?1 AND d.fp = j.value) FROM json_each(?2) j",
            (other.crawl_id, fps),
        ):
            if in_urls:
                taken[other.number].add(fp)
            if in_dropped:
                dropped[other.number].add(fp)
    return [
        (source, drop)
        for source, drop in found
        if not any(drop.fp in fps for fps in taken.values())
        and not any(drop.fp in fps for number, fps in dropped.items() if number < source.number)
    ]
