"""The dashboard's pages list and search over a crawl read as its sources: an embedded crawl's one database, or
a distributed crawl's shards, listed as one crawl.

Each source reads its next captures along the sort's index from the cursor (`browse.read_pages`), and the
pages are merged by their sort key, whose last part is the capture's crawl-wide id (`Sources.capture_id`):
ordering by it orders by shard, then by id within the shard, so the merged order is total and a cursor
(the key of the last row shown) says where every shard goes on. A shard whose filtered reading ran out of
time (`partial`) has said nothing of what lies past where it stopped, so the page ends there too.

Counts are summed over the sources; one that takes too long leaves the whole count unsaid.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .browse import (
    SCAN_BUDGET,
    SCAN_WINDOW,
    Filters,
    PageList,
    Read,
    Sort,
    count_pages,
    decode_cursor,
    hosts,
    page_list,
    read_pages,
)
from .search import SearchResult, count_matches, search
from .shards import SHARD_BITS, Source, Sources
from .shardsearch import search_shards

Key = tuple[Any, ...]


def list_pages_of(
    sources: Sources,
    filters: Filters,
    *,
    sort: Sort = "fetched",
    descending: bool = False,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
    window: int = SCAN_WINDOW,
    budget: float = SCAN_BUDGET,
) -> PageList:
    """One page of the crawl's captures (every capture: a URL fetched twice is listed twice): the first, the
    one after the cursor `after`, or the one before the cursor `before` (read backwards along the sort's
    index). A filtered page reads `window` captures a step, for `budget` seconds in all (`browse.read_pages`)."""
    backwards = before is not None
    cursor = before if backwards else after
    start = decode_cursor(cursor, sort) if cursor is not None else None
    reading_descending = descending != backwards
    share = budget / max(1, len(sources.all))
    reads = [
        _crawl_wide(
            sources,
            source,
            read_pages(
                source.conn, source.crawl_id, filters, sort, reading_descending, _local_start(sources, source, start),
                limit, window, share,
            ),
        )
        for source in sources.all
    ]  # fmt: skip
    return page_list(_merge(reads, reading_descending, limit), cursor, backwards)


def _local_start(sources: Sources, source: Source, start: list[Any] | None) -> list[Any] | None:
    """The cursor `start` (its last part a crawl-wide id) as a key within `source`: the captures of `source`
    with the same sort value come after it when the source's ids all come after the cursor's id, none do when
    they all come before, and otherwise those past its id within the source."""
    if start is None:
        return None
    local = start[-1] - sources.capture_id(source, 0)
    return [*start[:-1], min(max(local, -1), 1 << SHARD_BITS)]


def _crawl_wide(sources: Sources, source: Source, read: Read) -> Read:
    """`read` with every capture named by its crawl-wide id."""

    def key(local: Key) -> Key:
        return (*local[:-1], sources.capture_id(source, local[-1]))

    return Read(
        [(key(k), dataclasses.replace(row, id=sources.capture_id(source, row.id))) for k, row in read.found],
        None if read.more is None else key(read.more),
        read.partial,
    )


def _merge(reads: list[Read], descending: bool, limit: int) -> Read:
    """The first `limit` captures of all `reads`, in the order read, up to where the first partial one stopped."""
    found = sorted((pair for read in reads for pair in read.found), key=lambda pair: pair[0], reverse=descending)
    stops = [read.more for read in reads if read.partial and read.more is not None]
    stop = (max if descending else min)(stops) if stops else None
    if stop is not None:
        found = [pair for pair in found if (pair[0] >= stop if descending else pair[0] <= stop)]
    left = stop is not None or any(read.more is not None for read in reads)
    if len(found) > limit or (len(found) == limit and left):
        return Read(found[:limit], found[limit - 1][0], False)
    return Read(found, stop, stop is not None)


def count_pages_of(sources: Sources, filters: Filters, budget: float = SCAN_BUDGET) -> int | None:
    """Captures matching `filters` in every source, or None when a source takes too long to count."""
    share = budget / max(1, len(sources.all))
    counts = [count_pages(source.conn, source.crawl_id, filters, share) for source in sources.all]
    return None if None in counts else sum(n for n in counts if n is not None)


def hosts_of(sources: Sources, limit: int = 500) -> list[str]:
    """The crawl's origins in every source, sorted (the first `limit`): what the host filter offers."""
    return sorted({host for source in sources.all for host in hosts(source.conn, source.crawl_id, limit)})[:limit]


def search_of(
    sources: Sources, text: str, filters: Filters, *, after: str | None = None, limit: int = 20
) -> SearchResult:
    """One page of the captures matching `text`, best first: with one database, as its own index ranks them
    (with a time budget); across shards, ranked as one index of the whole crawl would (`search_shards`)."""
    if not sources.distributed:
        (source,) = sources.all
        return search(source.conn, source.crawl_id, text, filters, after=after, limit=limit)
    return search_shards(sources, text, filters, after=after, limit=limit)


def count_matches_of(sources: Sources, text: str, filters: Filters, budget: float = SCAN_BUDGET) -> int | None:
    """Captures matching `text` and `filters` in every source, or None when a source takes too long to count."""
    share = budget / max(1, len(sources.all))
    counts = [count_matches(source.conn, source.crawl_id, text, filters, share) for source in sources.all]
    return None if None in counts else sum(n for n in counts if n is not None)
