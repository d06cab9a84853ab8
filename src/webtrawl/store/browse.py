"""What the dashboard's browsing views read: a crawl's captures page by page, and search (one capture: `detail`).

The pages list pages with a keyset (the sort key of the last row shown, as an opaque cursor), never from
an OFFSET, so the thousandth page costs what the first does: a range scan of its sort's index (migration
4 in `schema.py`) from the cursor. A filter is checked row by row along that index, so a filter that
matches few captures would read far to fill a page: such a page reads in windows and stops after a time
budget, returning what it found and a cursor that goes on from the last capture read.

Search ranks every match (bm25, in FTS5: the one cost that grows with the number of matches), reads the
captures in rank order only until a page is full, and builds the title and text snippets of that page's
captures only, because a snippet costs a read of the page's text. Snippets come back as segments, each
marked matched or not, so whoever shows them escapes every character and adds only its own highlighting.
The marks FTS5 puts around matches carry a random nonce, so a page's text cannot forge them.

Both say how many captures they hold in all (`count_pages`, `count_matches`): a count, unlike a page, reads
every match, so it stops after a time budget and is then left unsaid.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Literal

from .index import TITLE, unindexed

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
BM25 = "bm25(captures_fts, 10.0, 4.0, 1.0)"
"""A match in the title counts ten times one in the text, one in the URL four times."""
_STATUS = re.compile(r"(?:(\d{3})|([1-5])xx|(none))")
_TOKEN = re.compile(r'\s*(?:("[^"]*")(\*?)|(\(|\))|([^\s"()]+)|("))')
"""One piece of a typed query: a quoted phrase (and a star), a parenthesis, a word (never holding a quote),
or a quote left open."""


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
RANK_AT_MOST = 100_000
"""Matches a search ranks (bm25 over 100,000 matches takes ~0.2 s); words that match more captures list them
in capture order: ranking a million takes seconds."""


def list_pages(
    conn: sqlite3.Connection,
    crawl_id: int,
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
    one after the cursor `after`, or the one before the cursor `before` (read backwards along the index)."""
    backwards = before is not None
    cursor = before if backwards else after
    start = decode_cursor(cursor, sort) if cursor is not None else None
    read = read_pages(conn, crawl_id, filters, sort, descending != backwards, start, limit, window, budget)
    return page_list(read, cursor, backwards)


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
        return _count(conn, "SELECT COUNT(*) FROM captures c WHERE c.crawl_id = ?", [crawl_id], budget)
    return _count(conn, f"SELECT COUNT(*) {FROM} WHERE c.crawl_id = ?{filtered}", [crawl_id, *params], budget)


def count_matches(
    conn: sqlite3.Connection, crawl_id: int, text: str, filters: Filters, budget: float = SCAN_BUDGET
) -> int | None:
    """Captures matching the search `text` and `filters`, or None when counting takes longer than `budget`."""
    filtered, params = filters.where()
    sql = (
        f"SELECT COUNT(*) {FROM} WHERE c.crawl_id = ?{filtered} "
        "AND c.id IN (SELECT rowid FROM captures_fts WHERE captures_fts MATCH ?)"
    )
    return _count(conn, sql, [crawl_id, *params, fts_query(text)], budget)


def _count(conn: sqlite3.Connection, sql: str, params: list[Any], budget: float) -> int | None:
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


# -- search ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    match: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Hit:
    page: PageRow
    score: float | None
    """bm25: lower is better; None when the search is not ranked."""
    title: list[Segment]
    snippet: list[Segment]


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[Hit]
    next: str | None
    unindexed: int
    """Captures too recent to be in the search index yet."""
    partial: bool = False
    """The page ran out of time with fewer hits than asked for: `next` reads on."""
    ranked: bool = True
    """False when the words match too many captures to rank (see `RANK_AT_MOST`): hits come in capture order."""


OPERATORS = frozenset(("AND", "OR", "NOT", "(", ")"))
"""The parts of an FTS5 query (`fts_parts`) that are no phrase."""


def fts_query(text: str) -> str:
    """The FTS5 query for what a person typed: every word and phrase quoted, so only these keep a meaning:
    "a phrase", a trailing * (prefix), AND / OR / NOT and parentheses. Raises QueryError for an unclosed quote
    or a lone *; a misplaced operator is left for FTS5 to refuse (see `search`)."""
    return " ".join(fts_parts(text))


def fts_parts(text: str) -> list[str]:
    """`fts_query` as its parts: quoted phrases (a prefix's with its *) and `OPERATORS`."""
    parts: list[str] = []
    pos = 0
    while match := _TOKEN.match(text, pos):
        pos = match.end()
        phrase, star, paren, word, stray = match.groups()
        if stray:
            raise QueryError('a quotation mark is not closed: put a phrase between two " marks')
        if phrase:
            parts.append(phrase + star)
        elif paren or word in ("AND", "OR", "NOT"):
            parts.append(paren or word)
        else:
            bare = word.rstrip("*")
            if not bare:
                raise QueryError("* alone matches nothing: put it after the start of a word, as in crawl*")
            parts.append(f'"{bare}"' + ("*" if bare != word else ""))  # a word holds no quote: see _TOKEN
    return parts


def search(
    conn: sqlite3.Connection,
    crawl_id: int,
    text: str,
    filters: Filters,
    *,
    after: str | None = None,
    limit: int = 20,
    budget: float = SCAN_BUDGET,
    rank_at_most: int = RANK_AT_MOST,
) -> SearchResult:
    """One page of the captures matching `text`, best first, with highlighted titles and snippets.

    FTS5 ranks every match (its cost grows with their number, so words that match more than
    `rank_at_most` captures list them in capture order instead); then captures are read in that order, a
    growing batch at a time, only until the page is full: the crawl and the filters are checked on those.
    Like a filtered pages list, it stops after `budget` seconds of reading with what it found (`partial`).
    """
    query = fts_query(text)
    filtered, params = filters.where()
    found: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []  # (cursor key, row)
    try:
        ranked, start = _search_start(conn, query, after, rank_at_most)
        if ranked:
            order = f"SELECT rowid, {BM25} AS score FROM captures_fts WHERE captures_fts MATCH ?"
            if start:  # LIMIT -1 keeps the subquery whole: merged into this one, it would compute bm25 twice
                order = f"SELECT rowid, score FROM ({order} LIMIT -1) WHERE (score, rowid) > (?, ?)"
            order += " ORDER BY score, rowid"
        else:
            order = "SELECT rowid, NULL FROM captures_fts WHERE captures_fts MATCH ?"
            order += " AND rowid > ? ORDER BY rowid" if start else " ORDER BY rowid"
        matches = conn.execute(order, (query, *start))
        batch, deadline, exhausted = limit + 1, None, False
        last_read: tuple[Any, ...] = ()  # the key of the last match read: where a page cut short resumes
        while len(found) <= limit and not exhausted and (deadline is None or time.monotonic() < deadline):
            scored = matches.fetchmany(batch)  # the first fetch waits for the ranking: the budget starts after it
            deadline = deadline or time.monotonic() + budget
            exhausted = len(scored) < batch
            rows = {
                row[0]: row
                for row in conn.execute(
                    f"SELECT {ROW} {BY_ID} WHERE c.crawl_id = ?{filtered} AND c.id IN ({', '.join('?' * len(scored))})",
                    (crawl_id, *params, *(rowid for rowid, _ in scored)),
                )
            }
            keys = [((score, rowid) if ranked else (rowid,), rowid) for rowid, score in scored]
            found += [(key, rows[rowid]) for key, rowid in keys if rowid in rows]
            last_read = keys[-1][0] if keys else last_read
            batch = min(batch * 4, 4000)
        matches.close()
        marks = new_marks()
        snippets = snippets_of(conn, query, [row[0] for _, row in found[:limit]], marks)
    except sqlite3.OperationalError as exc:
        raise unreadable(exc) from None
    hits = [
        Hit(
            page=PageRow(**dict(zip(PageRow.__slots__, row, strict=True))),
            score=key[0] if ranked else None,
            title=segments(snippets[row[0]][0], marks),
            snippet=segments(snippets[row[0]][1], marks),
        )
        for key, row in found[:limit]
    ]
    if len(found) > limit:
        next_key, partial = found[limit - 1][0], False
    elif exhausted:
        next_key, partial = (), False
    else:  # out of time
        next_key, partial = last_read, True
    cursor = encode_cursor(next_key) if next_key else None
    return SearchResult(hits, cursor, unindexed(conn), partial=partial, ranked=ranked)


def _search_start(conn: sqlite3.Connection, query: str, after: str | None, rank_at_most: int) -> tuple[bool, list[Any]]:
    """Whether to rank, and the cursor's key: a next page keeps its first page's order; a first page ranks
    unless the words match more than `rank_at_most` captures (of any crawl: counting is cheap, filtering not)."""
    if after is None:
        (matching,) = conn.execute("SELECT COUNT(*) FROM captures_fts WHERE captures_fts MATCH ?", (query,)).fetchone()
        return matching <= rank_at_most, []
    try:
        return True, decode_cursor(after, "search")
    except QueryError:
        return False, decode_cursor(after, "search in capture order")


def new_marks() -> tuple[str, str]:
    """Marks to put around matched words, new for each search: a page cannot contain marks it cannot guess,
    so no page can make its own text look matched."""
    nonce = secrets.token_hex(8)
    return f"\ue000{nonce}[", f"]{nonce}\ue001"


def unreadable(exc: sqlite3.OperationalError) -> QueryError:
    """The QueryError to raise for a query FTS5 could not read; any other error is raised again."""
    if "fts5" not in str(exc) and "syntax error" not in str(exc):
        raise exc
    return QueryError(
        "this search cannot be read: AND, OR and NOT need words on both sides, and parentheses must "
        'pair up (put words in quotes, like "and", to search for them)'
    )


def snippets_of(
    conn: sqlite3.Connection, query: str, ids: list[int], marks: tuple[str, str]
) -> dict[int, tuple[str, str]]:
    if not ids:
        return {}
    return {
        rowid: (title, snippet)
        for rowid, title, snippet in conn.execute(
            "SELECT rowid, highlight(captures_fts, 0, ?1, ?2), snippet(captures_fts, 2, ?1, ?2, '…', 24) "
            f"FROM captures_fts WHERE captures_fts MATCH ?3 AND rowid IN ({', '.join('?' * len(ids))})",
            (*marks, query, *ids),
        )
    }


def segments(marked: str, marks: tuple[str, str]) -> list[Segment]:
    """Split a highlighted string at its marks. A mark out of turn is dropped, so the segments alternate
    whatever the string holds."""
    out: list[Segment] = []
    inside = False
    for part in re.split(f"({re.escape(marks[0])}|{re.escape(marks[1])})", marked):
        if part in marks:
            inside = part == marks[0]
        elif part and out and out[-1].match == inside:
            out[-1] = Segment(out[-1].text + part, inside)
        elif part:
            out.append(Segment(part, inside))
    return out
