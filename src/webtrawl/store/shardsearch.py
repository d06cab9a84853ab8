"""Search across a distributed crawl's shards, ranked as one index of the whole crawl would rank it.

Each shard has its own FTS5 index, whose bm25 weighs a word by how rare it is *in that shard*: a word
common on one node's pages and rare on another's would rank a page by where it was fetched. So every hit is
scored again with the crawl's statistics. FTS5's bm25 of a query is a sum over its phrases of the phrase's
IDF times a part that depends on the page (how often the phrase occurs in each column, weighted, against the
page's length); each shard scores each phrase alone with FTS5's own bm25 (so the weights and that part stay
FTS5's), the shard's IDF is divided out and the crawl's (from the phrase's matches in every shard) put in.
Only the average page length stays each shard's own: shards of one crawl differ little in it. Python's
sqlite3 cannot register an FTS5 ranking function, so the sum is made here.

Hits are then merged best first and paged by keyset on (score, shard, capture id), as a one-index search
pages on (score, id). A hit's capture id is its `shards.global_id`.
"""

from __future__ import annotations

import math
import sqlite3
from collections import defaultdict
from typing import Any

from .browse import (
    BM25,
    BY_ID,
    OPERATORS,
    RANK_AT_MOST,
    ROW,
    Filters,
    Hit,
    PageRow,
    QueryError,
    SearchResult,
    decode_cursor,
    encode_cursor,
    fts_parts,
    new_marks,
    segments,
    snippets_of,
)
from .index import unindexed
from .shards import Source, Sources, global_id

Key = tuple[Any, ...]
"""A hit's place in the merged order: (score, shard, id) ranked, (shard, id) in capture order."""


def idf(pages: int, matching: int) -> float:
    """FTS5's inverse document frequency (`fts5_bm25`: floored just above 0 for a word on most pages)."""
    value = math.log((pages - matching + 0.5) / (matching + 0.5))
    return value if value > 0 else 1e-6


def search_shards(
    shards: Sources,
    text: str,
    filters: Filters,
    *,
    after: str | None = None,
    limit: int = 20,
    rank_at_most: int = RANK_AT_MOST,
) -> SearchResult:
    """One page of the captures of every shard matching `text`, best first (`store.browse.search` for one
    index; here without a time budget)."""
    parts = fts_parts(text)
    query = " ".join(parts)
    phrases = [part for part in parts if part not in OPERATORS]  # a phrase given twice counts twice, as in FTS5
    try:
        ranked, start = _start(shards.all, query, after, rank_at_most)
        keys = _ranked(shards.all, query, phrases) if ranked else _in_capture_order(shards.all, query)
        keys.sort()
        if start:
            keys = [key for key in keys if list(key) > start]
        found = _rows(shards.all, keys, filters, limit)
        marks = new_marks()
        snippets = _shard_snippets(shards.all, query, found[:limit], marks)
    except sqlite3.OperationalError as exc:
        if "fts5" not in str(exc) and "syntax error" not in str(exc):
            raise
        raise QueryError(
            "this search cannot be read: AND, OR and NOT need words on both sides, and parentheses must "
            'pair up (put words in quotes, like "and", to search for them)'
        ) from None
    hits = []
    for key, number, row in found[:limit]:
        local = row[0]
        page = PageRow(**dict(zip(PageRow.__slots__, (global_id(number, local), *row[1:]), strict=True)))
        title, snippet = snippets[number, local]
        hits.append(
            Hit(
                page=page,
                score=key[0] if ranked else None,
                title=segments(title, marks),
                snippet=segments(snippet, marks),
            )
        )
    cursor = encode_cursor(found[limit - 1][0]) if len(found) > limit else None
    behind = sum(unindexed(shard.conn) for shard in shards.all)
    return SearchResult(hits, cursor, behind, ranked=ranked)


def _start(shards: list[Source], query: str, after: str | None, rank_at_most: int) -> tuple[bool, list[Any]]:
    """Whether to rank, and the cursor's key (as `browse._search_start`, over every shard)."""
    if after is None:
        matching = sum(_count(shard.conn, query) for shard in shards)
        return matching <= rank_at_most, []
    try:
        return True, decode_cursor(after, "shard search")
    except QueryError:
        return False, decode_cursor(after, "shard search in capture order")


def _count(conn: sqlite3.Connection, query: str) -> int:
    (matching,) = conn.execute("SELECT COUNT(*) FROM captures_fts WHERE captures_fts MATCH ?", (query,)).fetchone()
    return int(matching)


def _ranked(shards: list[Source], query: str, phrases: list[str]) -> list[Key]:
    """Every match of every shard with its score under the crawl's statistics (see the module's words)."""
    pages = {shard.number: _indexed(shard.conn) for shard in shards}
    matching = {(shard.number, phrase): _count(shard.conn, phrase) for shard in shards for phrase in set(phrases)}
    crawl_pages = sum(pages.values())
    crawl_idf = {phrase: idf(crawl_pages, sum(matching[s.number, phrase] for s in shards)) for phrase in set(phrases)}
    keys: list[Key] = []
    for shard in shards:
        scores: dict[int, float] = defaultdict(float)
        for (rowid,) in shard.conn.execute("SELECT rowid FROM captures_fts WHERE captures_fts MATCH ?", (query,)):
            scores[rowid] = 0.0
        for phrase in phrases:
            if not matching[shard.number, phrase]:
                continue
            scale = crawl_idf[phrase] / idf(pages[shard.number], matching[shard.number, phrase])
            for rowid, score in shard.conn.execute(
                f"SELECT rowid, {BM25} FROM captures_fts WHERE captures_fts MATCH ? "
                "AND rowid IN (SELECT rowid FROM captures_fts WHERE captures_fts MATCH ?)",
                (phrase, query),
            ):
                scores[rowid] += score * scale
        keys += [(score, shard.number, rowid) for rowid, score in scores.items()]
    return keys


def _indexed(conn: sqlite3.Connection) -> int:
    """Pages in the shard's search index (the N of its IDF)."""
    (pages,) = conn.execute("SELECT COUNT(*) FROM captures_fts_docsize").fetchone()
    return int(pages)


def _in_capture_order(shards: list[Source], query: str) -> list[Key]:
    return [
        (shard.number, rowid)
        for shard in shards
        for (rowid,) in shard.conn.execute("SELECT rowid FROM captures_fts WHERE captures_fts MATCH ?", (query,))
    ]


def _rows(shards: list[Source], keys: list[Key], filters: Filters, limit: int) -> list[tuple[Key, int, tuple]]:
    """The first `limit` + 1 matches in `keys` order that pass `filters`: (key, shard number, row)."""
    by_number = {shard.number: shard for shard in shards}
    filtered, params = filters.where()
    found: list[tuple[Key, int, tuple]] = []
    position, batch = 0, limit + 1
    while len(found) <= limit and position < len(keys):
        chunk = keys[position : position + batch]
        position += batch
        wanted: dict[int, list[int]] = defaultdict(list)
        for key in chunk:
            wanted[key[-2]].append(key[-1])
        rows: dict[tuple[int, int], tuple] = {}
        for number, ids in wanted.items():
            shard = by_number[number]
            for row in shard.conn.execute(
                f"SELECT {ROW} {BY_ID} WHERE c.crawl_id = ?{filtered} AND c.id IN ({', '.join('?' * len(ids))})",
                (shard.crawl_id, *params, *ids),
            ):
                rows[number, row[0]] = row
        found += [(key, key[-2], rows[key[-2], key[-1]]) for key in chunk if (key[-2], key[-1]) in rows]
        batch = min(batch * 4, 4000)
    return found


def _shard_snippets(
    shards: list[Source], query: str, found: list[tuple[Key, int, tuple]], marks: tuple[str, str]
) -> dict[tuple[int, int], tuple[str, str]]:
    wanted: dict[int, list[int]] = defaultdict(list)
    for _key, number, row in found:
        wanted[number].append(row[0])
    snippets = {}
    for shard in shards:
        if wanted[shard.number]:
            for local, pair in snippets_of(shard.conn, query, wanted[shard.number], marks).items():
                snippets[shard.number, local] = pair
    return snippets
