"""A capture's links, in or out, a page at a time: what the dashboard's page detail lists under its facts.

A page that hundreds of others link to would otherwise list them all at once. Pages go by a keyset on the
other URL's fingerprint, the order of the link tables' own keys (out-links: `links`, in-links: `links_in`,
which has a page's in-links once the search index has caught up with it), so every page is one seek,
however many links.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ..models import State
from .detail import LINK_TABLES, LinkRow


@dataclass(frozen=True, slots=True)
class LinkPage:
    rows: list[LinkRow]
    next: int | None
    """The fingerprint to pass as `after` for the next page; None on the last."""
    total: int


def link_page(
    conn: sqlite3.Connection,
    crawl_id: int,
    capture_id: int,
    direction: str,
    *,
    after: int | None = None,
    limit: int = 50,
) -> LinkPage | None:
    """The links of the URL of capture `capture_id` in `direction` ("in" or "out"), each URL as the crawl knows
    it: its state (or why it was dropped) and its latest capture. None if the crawl has no such capture."""
    table, this, other = LINK_TABLES[direction]
    row = conn.execute("SELECT fp FROM captures WHERE crawl_id = ? AND id = ?", (crawl_id, capture_id)).fetchone()
    if row is None:
        return None
    (fp,) = row
    found = conn.execute(
        f"SELECT l.{other}, COALESCE(u.url, d.url), u.state, d.reason, "
        f"(SELECT MAX(c.id) FROM captures c WHERE c.crawl_id = l.crawl_id AND c.fp = l.{other}) "
        f"FROM {table} l LEFT JOIN urls u ON u.crawl_id = l.crawl_id AND u.fp = l.{other} "
        f"LEFT JOIN dropped d ON d.crawl_id = l.crawl_id AND d.fp = l.{other} "
        f"WHERE l.crawl_id = ? AND l.{this} = ? {'' if after is None else f'AND l.{other} > ?'} "
        f"ORDER BY l.{other} LIMIT ?",
        (crawl_id, fp, *(() if after is None else (after,)), limit + 1),
    ).fetchall()
    count = f"SELECT COUNT(*) FROM {table} WHERE crawl_id = ? AND {this} = ?"
    (total,) = conn.execute(count, (crawl_id, fp)).fetchone()
    rows = [
        LinkRow(url=url, capture_id=capture, state=f"dropped: {why}" if state is None else State(state).name.lower())
        for _fp, url, state, why, capture in found[:limit]
        if url is not None
    ]
    return LinkPage(rows, found[limit - 1][0] if len(found) > limit else None, int(total))
