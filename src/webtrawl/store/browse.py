"""What the dashboard's pages list reads: a crawl database's captures page by page (search: `store.search`; one
capture: `detail`; a crawl of several shards: `listing`).

The pages list pages with a keyset (the sort key of the last row shown, as an opaque cursor), never from
an OFFSET, so the thousandth page costs what the first does: a range scan of its sort's index (migration
4 in `schema.py`) from the cursor. A filter is checked row by row along that index, so a filter that
matches few captures would read far to fill a page: such a page reads in windows and stops after a time
budget, returning what it found and a cursor that goes on from the last capture read.

The list says how many captures it holds in all (`count_pages`): a count, unlike a page, reads every match,
so it stops after a time budget and is then left unsaid.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Literal

from .index import TITLE

Sort = Literal["fetched", "url", "size", "status"]
SORT_KEYS: dict[str, tuple[str, ...]] = {
    "fetched": ("c.fetched_at", "c.id"),
    "url": ("c.url", "c.id"),
    "size": ("c.size", "c.id"),
    "status": ("IFNULL(c.status, 0)", "c.fetched_at", "c.id"),
}
"""Each sort's key, most significant first; the capture id last makes every key unique."""
_KEY_TYPES: dict[str, tuple[type | tuple[type, ...], ...]] = {
    "fetched": ((int, float), int),
    "url": (str, int),
    "size": (int, int),
    "status": (int, (int, float), int),
    "search": ((int, float), int),
    "search in capture order": (int,),
    "shard search": ((int, float), int, int),
    "shard search in capture order": (int, int),
}
_STATUS = re.compile(r"(?:(\d{3})|([1-5])xx|(none))")


class QueryError(ValueError):
    """A filter, cursor or search query that cannot be read; the message says why, for the person who typed it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Filters:
    status: str = ""
    """An exact status ("404"), a class ("4xx"), "none" (no response: a network error), or "" for any."""
    content_type: str = ""
    """A media type without parameters ("text/html"), exactly."""
    host: str = ""
    """`host`, `host:port` (either scheme) or an origin, `https://host:port`."""
    depth: int | None = None

    def where(self) -> tuple[str, list[Any]]:
        """SQL conditions on `c` (captures) and `u` (urls) and their parameters."""
        sql: list[str] = []
        params: list[Any] = []
        if self.status:
            match = _STATUS.fullmatch(self.status.strip().lower())
            if match is None:
                raise QueryError(f"status {self.status!r} is not a status (404), a class (4xx) or 'none'")
            exact, klass, _none = match.groups()
            if klass:
                sql.append("IFNULL(c.status, 0) BETWEEN ? AND ?")
                params += [int(klass) * 100, int(klass) * 100 + 99]
            else:
                sql.append("IFNULL(c.status, 0) = ?")
                params.append(int(exact) if exact else 0)
        if self.content_type:
            sql.append("c.content_type = ?")
            params.append(self.content_type.strip().lower())
        if self.host:
            host = self.host.strip().lower().rstrip("/")
            sql.append("u.host_id IN (SELECT id FROM hosts WHERE crawl_id = c.crawl_id AND host IN (?, ?))")
            params += [host, host] if "://" in host else [f"http://{host}", f"https://{host}"]
        if self.depth is not None:
            sql.append("u.depth = ?")
            params.append(self.depth)
        return "".join(f" AND {s}" for s in sql), params


@dataclass(frozen=True, slots=True, kw_only=True)
class PageRow:
    id: int
    url: str
    title: str
    status: int | None
    content_type: str
    size: int
    depth: int | None
    fetched_at: float
    error: str | None
    thumbnail: bool
    """A rendered page with a thumbnail: `/archive/{id}/thumbnail`."""


@dataclass(frozen=True, slots=True)
class PageList:
    rows: list[PageRow]
    next: str | None
    """The cursor of the next page (pass it as `after`), or None on the last page."""
    partial: bool = False
    """The page ran out of time with fewer rows than asked for (a filter that matches few captures):
    `next` (or, reading backwards, `previous`) reads on from where it stopped."""
    previous: str | None = None
    """The cursor of the page before (pass it as `before`), or None on the first page."""


THUMBNAIL = (
    "EXISTS(SELECT 1 FROM resources r WHERE r.crawl_id = c.crawl_id AND r.url = 'urn:thumbnail:' || c.url "
    "AND r.fetched_at = c.fetched_at)"
)
"""Whether capture `c` is a rendered page with a thumbnail (`--screenshots`)."""
ROW = f"c.id, c.url, {TITLE}, c.status, c.content_type, c.size, u.depth, c.fetched_at, c.error, {THUMBNAIL}"
"""The columns of a `PageRow`, from `FROM`."""
FROM = "FROM captures c LEFT JOIN urls u ON u.crawl_id = c.crawl_id AND u.fp = c.fp"
BY_ID = FROM.replace("captures c", "captures c NOT INDEXED")
"""For rows picked by id: the planner would rather scan an index of the crawl's captures (or of a status)
than look up a list of rowids; NOT INDEXED leaves it the rowid alone."""
SCAN_WINDOW = 5000
"""Captures a filtered page reads in one step along its sort order."""
SCAN_BUDGET = 0.25
"""Seconds a filtered page may go on reading before it returns what it found."""


@dataclass(frozen=True, slots=True)
class Read:
    """Captures read along a sort order (forwards or backwards), each with its sort key."""

    found: list[tuple[tuple[Any, ...], PageRow]]
    """At most the `limit` asked for, in the order read."""
    more: tuple[Any, ...] | None
    """Where reading on starts (in the order read): the last key of `found`, or the last key read when the
    time ran out (`partial`); None when nothing is left."""
    partial: bool


def page_list(read: Read, cursor: str | None, backwards: bool) -> PageList:
    """The page `read` from `cursor` makes, shown in the sort's order; read backwards, what comes next starts
    after its last row shown."""
    found = read.found
    ahead = None if read.more is None else encode_cursor(read.more)
    if backwards:
        found = found[::-1]
        back = encode_cursor(found[-1][0]) if found else cursor
        return PageList([row for _key, row in found], back, read.partial, previous=ahead)
    back = None if cursor is None else encode_cursor(found[0][0]) if found else cursor
    return PageList([row for _key, row in found], ahead, read.partial, previous=back)


def read_pages(
    conn: sqlite3.Connection,
    crawl_id: int,
    filters: Filters,
    sort: Sort,
    descending: bool,
    start: list[Any] | None,
    limit: int,
    window: int = SCAN_WINDOW,
    budget: float = SCAN_BUDGET,
) -> Read:
    """The next `limit` captures matching `filters` after the key `start` (None: from the first), in the
    order of `sort` (`descending` or not).

    The sort's index gives the keys of the next captures in order (reading the index alone), then their
    rows are read by id. Unfiltered, that is `limit` keys. Filtered, it is a growing number of keys at a
    time (up to `window`), each row checked, until the page is full or `budget` seconds have passed: a
    filter that matches one capture in a million then returns a short page (`partial`) in bounded time
    instead of reading the whole table, and reading goes on from the last capture read.
    """
    filtered, params = filters.where()
    deadline = time.monotonic() + budget
    found: list[tuple[tuple[Any, ...], PageRow]] = []
    step = min(window, 4 * (limit + 1)) if filtered else limit + 1
    while True:
        keys = _keys_after(conn, crawl_id, sort, descending, start, step)
        rows = {
            row[0]: row
            for row in conn.execute(
                f"SELECT {ROW} {BY_ID} WHERE c.crawl_id = ?{filtered} AND c.id IN ({', '.join('?' * len(keys))})",
                (crawl_id, *params, *(key[-1] for key in keys)),
            )
        }
        found += [
            (key, PageRow(**dict(zip(PageRow.__slots__, rows[key[-1]], strict=True))))
            for key in keys
            if key[-1] in rows
        ]
        if len(found) > limit:
            return Read(found[:limit], found[limit - 1][0], False)
        if len(keys) < step:
            return Read(found, None, False)
        start, step = list(keys[-1]), min(window, step * 4)
        if time.monotonic() >= deadline:
            return Read(found, keys[-1], True)


def _keys_after(
    conn: sqlite3.Connection, crawl_id: int, sort: str, descending: bool, start: list[Any] | None, count: int
) -> list[tuple[Any, ...]]:
    """The sort keys (capture id last) of the next `count` captures after `start`, from the sort's index.

    After a key (a, b, …), the captures come in two runs: those with the same first part and a later rest,
    then those with a later first part. Each run is one seek in the index; a single row-value bound would
    seek on the first part only and then read all of its run (the status sort's runs are huge).
    """
    keys = SORT_KEYS[sort]
    columns = ", ".join(keys)
    way, past = ("DESC", "<") if descending else ("ASC", ">")
    select = f"SELECT {columns} FROM captures c WHERE c.crawl_id = ?"

    def order(parts: tuple[str, ...]) -> str:
        return "ORDER BY " + ", ".join(f"{key} {way}" for key in parts) + " LIMIT ?"

    if start is None:
        return conn.execute(f"{select} {order(keys)}", (crawl_id, count)).fetchall()
    rest = keys[1:]  # ordered by these alone: the planner does not see that an expression set equal is constant
    found = conn.execute(
        f"{select} AND {keys[0]} = ? AND ({', '.join(rest)}) {past} ({', '.join('?' * len(rest))}) {order(rest)}",
        (crawl_id, *start, count),
    ).fetchall()
    if len(found) < count:
        found += conn.execute(
            f"{select} AND {keys[0]} {past} ? {order(keys)}", (crawl_id, start[0], count - len(found))
        )
    return found


def encode_cursor(key: tuple[Any, ...]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(token: str, sort: str) -> list[Any]:
    try:
        key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError):
        key = None
    types = _KEY_TYPES[sort]
    if not (
        isinstance(key, list)
        and len(key) == len(types)
        and all(isinstance(v, t) and not isinstance(v, bool) for v, t in zip(key, types, strict=True))
    ):
        raise QueryError("this page's link is damaged or belongs to another sort order: start from the first page")
    return key


def count_pages(conn: sqlite3.Connection, crawl_id: int, filters: Filters, budget: float = SCAN_BUDGET) -> int | None:
    """Captures matching `filters`, or None when counting them takes longer than `budget` seconds."""
    filtered, params = filters.where()
    if not filtered:  # the crawl's captures alone: one index, no join
        return count_within(conn, "SELECT COUNT(*) FROM captures c WHERE c.crawl_id = ?", [crawl_id], budget)
    return count_within(conn, f"SELECT COUNT(*) {FROM} WHERE c.crawl_id = ?{filtered}", [crawl_id, *params], budget)


def count_within(conn: sqlite3.Connection, sql: str, params: list[Any], budget: float) -> int | None:
    """The count `sql` gives, or None when counting takes longer than `budget` seconds."""
    deadline = time.monotonic() + budget
    conn.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)  # SQLite asks every 10,000 steps
    try:
        return int(conn.execute(sql, params).fetchone()[0])
    except sqlite3.OperationalError as exc:
        if "interrupted" not in str(exc):
            raise
        return None
    finally:
        conn.set_progress_handler(None, 0)


def hosts(conn: sqlite3.Connection, crawl_id: int, limit: int = 500) -> list[str]:
    """The crawl's origins, sorted (the first `limit`): what the host filter offers."""
    return [
        h for (h,) in conn.execute("SELECT host FROM hosts WHERE crawl_id = ? ORDER BY host LIMIT ?", (crawl_id, limit))
    ]
