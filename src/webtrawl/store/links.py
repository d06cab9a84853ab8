"""A capture's links, in or out, a page at a time: what the dashboard's page detail lists under its facts.

A page that hundreds of others link to would otherwise list them all at once. Pages go by a keyset on the
other URL's fingerprint, the order of the link tables' own keys (out-links: `links`, in-links: `links_in`,
which has a page's in-links once the search index has caught up with it), so every page is one seek in each
source, however many links; the sources' runs are merged (a distributed crawl's page may be linked from pages
of every shard).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .detail import LinkRow, link_rows, linked_fps
from .shards import Sources


@dataclass(frozen=True, slots=True)
class LinkPage:
    rows: list[LinkRow]
    next: int | None
    """The fingerprint to pass as `after` for the next page; None on the last."""
    total: int


def link_page(
    sources: Sources,
    capture_id: int,
    direction: str,
    *,
    after: int | None = None,
    limit: int = 50,
) -> LinkPage | None:
    """The links of the URL of capture `capture_id` (crawl-wide) in `direction` ("in" or "out"), in every source,
    each URL as the crawl knows it (`detail.link_rows`). None if the crawl has no such capture."""
    located = sources.locate(capture_id)
    if located is None:
        return None
    source, local = located
    row = source.conn.execute(
        "SELECT fp FROM captures WHERE crawl_id = ? AND id = ?", (source.crawl_id, local)
    ).fetchone()
    if row is None:
        return None
    (fp,) = row
    ends = list(itertools.islice(linked_fps(sources, direction, fp, after), limit + 1))
    rows = link_rows(sources, ends[:limit])
    total = sum(1 for _ in linked_fps(sources, direction, fp))
    return LinkPage(rows, ends[limit - 1] if len(ends) > limit else None, total)
