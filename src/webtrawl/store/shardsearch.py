"""Search across a distributed crawl's shards, ranked as one index of the whole crawl would rank it.

Each shard has its own FTS5 index, whose bm25 weighs a word by how rare it is *in that shard*, and a page's
length against *that shard's* average: a page would rank by where it was fetched. So every hit is scored
again with the crawl's statistics. FTS5's bm25 of a query is a sum over its phrases of the phrase's IDF
times `f·(k1+1) / (f + k1·(1 − b + b·|D|/avgdl))` (f: the phrase's weighted hits in the page, |D|: the
page's length). Each shard scores each phrase alone with FTS5's own bm25; the shard's IDF is divided out,
f is solved back from the part left (the page's length is in the index's `docsize` table, the shard's
average in its "averages" record), and the part is made again with the crawl's average and multiplied by the
crawl's IDF (from the phrase's matches in every shard). The result is the score one index of the whole
crawl gives, to float precision. Python's sqlite3 cannot register an FTS5 ranking function, so the sum is
made here.

Hits are then merged best first and paged by keyset on (score, shard, capture id), as a one-index search
pages on (score, id). A hit's capture id is its `shards.global_id`.
"""

from __future__ import annotations

import itertools
import math
import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .browse import BY_ID, ROW, Filters, PageRow, QueryError, decode_cursor, encode_cursor
from .index import unindexed
from .search import (
    BM25,
    OPERATORS,
    RANK_AT_MOST,
    Hit,
    SearchResult,
    fts_parts,
    new_marks,
    segments,
    snippets_of,
    unreadable,
)
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
    """One page of the captures of every shard matching `text`, best first (`store.search.search` for one
    index; here without a time budget)."""
    parts = fts_parts(text)
    query = " ".join(parts)
    phrases = [part for part in parts if part not in OPERATORS]  # a phrase given twice counts twice, as in FTS5
    try:
        ranked, start = _start(shards.all, query, after, rank_at_most)
        if ranked:
            keys = iter([key for key in sorted(_ranked(shards.all, query, phrases)) if list(key) > start])
        else:
            keys = _in_capture_order(shards.all, query, start)
        found = _rows(shards.all, keys, filters, limit)
        marks = new_marks()
        snippets = _shard_snippets(shards.all, query, found[:limit], marks)
    except sqlite3.OperationalError as exc:
        raise unreadable(exc) from None
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
    sizes = {shard.number: _sizes(shard.conn) for shard in shards}
    matching = {(shard.number, phrase): _count(shard.conn, phrase) for shard in shards for phrase in set(phrases)}
    crawl = Sizes(sum(size.pages for size in sizes.values()), sum(size.tokens for size in sizes.values()))
    crawl_idf = {phrase: idf(crawl.pages, sum(matching[s.number, phrase] for s in shards)) for phrase in set(phrases)}
    keys: list[Key] = []
    for shard in shards:
        scores: dict[int, float] = defaultdict(float)
        for (rowid,) in shard.conn.execute("SELECT rowid FROM captures_fts WHERE captures_fts MATCH ?", (query,)):
            scores[rowid] = 0.0
        own = sizes[shard.number]
        for phrase in phrases:
            if not matching[shard.number, phrase]:
                continue
            shard_idf = idf(own.pages, matching[shard.number, phrase])
            for rowid, score, length in shard.conn.execute(
                f"SELECT f.rowid, {BM25}, d.sz FROM captures_fts f JOIN captures_fts_docsize d ON d.id = f.rowid "
                "WHERE captures_fts MATCH ? AND f.rowid IN (SELECT rowid FROM captures_fts WHERE captures_fts MATCH ?)",
                (phrase, query),
            ):
                part = _rescaled(-score / shard_idf, sum(_varints(length)), own.average, crawl.average)
                scores[rowid] -= crawl_idf[phrase] * part
        keys += [(score, shard.number, rowid) for rowid, score in scores.items()]
    return keys


K1, B = 1.2, 0.75
"""FTS5's bm25 parameters (`fts5_aux.c`)."""


def _rescaled(part: float, length: int, average: float, crawl_average: float) -> float:
    """A phrase's page-dependent part of bm25, `f·(k1+1) / (f + k1·(1 − b + b·|D|/avgdl))`, given with the shard's
    average page length, taken to the crawl's: the (weighted) frequency f is solved back from it."""
    if part <= 0 or part >= K1 + 1 or not average or not crawl_average:
        return part
    frequency = part * K1 * (1 - B + B * length / average) / (K1 + 1 - part)
    return frequency * (K1 + 1) / (frequency + K1 * (1 - B + B * length / crawl_average))


@dataclass(frozen=True, slots=True)
class Sizes:
    pages: int
    """Pages in the search index (the N of its IDF)."""
    tokens: int
    """Tokens in all of them, every column."""

    @property
    def average(self) -> float:
        return self.tokens / self.pages if self.pages else 0.0


def _sizes(conn: sqlite3.Connection) -> Sizes:
    """The index's page and token counts, as FTS5 keeps them for bm25 (its "averages" record: the row count,
    then each column's token count, as varints)."""
    row = conn.execute("SELECT block FROM captures_fts_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return Sizes(0, 0)
    pages, *columns = _varints(row[0])
    return Sizes(pages, sum(columns))


def _varints(data: bytes) -> list[int]:
    """SQLite's variable-length integers, one after the other (FTS5 writes its sizes with them)."""
    values, i = [], 0
    while i < len(data):
        value = 0
        for n in range(9):
            byte = data[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values


def _in_capture_order(shards: list[Source], query: str, start: list[Any]) -> Iterator[Key]:
    """The matches after `start` (shard, id), shard by shard, each in id order: read only as far as a page
    needs, however many there are."""
    after_shard, after_id = start or (-1, 0)
    for shard in sorted(shards, key=lambda s: s.number):
        if shard.number < after_shard:
            continue
        floor = after_id if shard.number == after_shard else 0
        for (rowid,) in shard.conn.execute(
            "SELECT rowid FROM captures_fts WHERE captures_fts MATCH ? AND rowid > ? ORDER BY rowid", (query, floor)
        ):
            yield shard.number, rowid


def _rows(shards: list[Source], keys: Iterator[Key], filters: Filters, limit: int) -> list[tuple[Key, int, tuple]]:
    """The first `limit` + 1 matches in `keys` order that pass `filters`: (key, shard number, row)."""
    by_number = {shard.number: shard for shard in shards}
    filtered, params = filters.where()
    found: list[tuple[Key, int, tuple]] = []
    batch = limit + 1
    while len(found) <= limit and (chunk := list(itertools.islice(keys, batch))):
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
