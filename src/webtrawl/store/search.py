"""Full-text search over one crawl database: what a person typed turned into an FTS5 query, the matches ranked
(bm25) and paged, and their title and text snippets marked (a crawl of several shards: `store.shardsearch`).

Search ranks every match (bm25, in FTS5: the one cost that grows with the number of matches), reads the
captures in rank order only until a page is full, and builds the title and text snippets of that page's
captures only, because a snippet costs a read of the page's text. Snippets come back as segments, each
marked matched or not, so whoever shows them escapes every character and adds only its own highlighting.
The marks FTS5 puts around matches carry a random nonce, so a page's text cannot forge them. How many
captures match (`count_matches`) is counted under a time budget and left unsaid past it.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from .browse import (
    BY_ID,
    FROM,
    ROW,
    SCAN_BUDGET,
    Filters,
    PageRow,
    QueryError,
    count_within,
    decode_cursor,
    encode_cursor,
)
from .index import unindexed

BM25 = "bm25(captures_fts, 10.0, 4.0, 1.0)"
"""A match in the title counts ten times one in the text, one in the URL four times."""
RANK_AT_MOST = 100_000
"""Matches a search ranks (bm25 over 100,000 matches takes ~0.2 s); words that match more captures list them
in capture order: ranking a million takes seconds."""
_TOKEN = re.compile(r'\s*(?:("[^"]*")(\*?)|(\(|\))|([^\s"()]+)|("))')
"""One piece of a typed query: a quoted phrase (and a star), a parenthesis, a word (never holding a quote),
or a quote left open."""


def count_matches(
    conn: sqlite3.Connection, crawl_id: int, text: str, filters: Filters, budget: float = SCAN_BUDGET
) -> int | None:
    """Captures matching the search `text` and `filters`, or None when counting takes longer than `budget`."""
    filtered, params = filters.where()
    sql = (
        f"SELECT COUNT(*) {FROM} WHERE c.crawl_id = ?{filtered} "
        "AND c.id IN (SELECT rowid FROM captures_fts WHERE captures_fts MATCH ?)"
    )
    return count_within(conn, sql, [crawl_id, *params, fts_query(text)], budget)


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
