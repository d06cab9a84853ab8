"""Search over a distributed crawl's shards finds what one index of the same site finds, in nearly its order.

A crawl of the test sites embedded, and the same sites distributed over three nodes (a coordinator that
fetches and two workers); every query is asked of both: the same pages match, scored alike (crawl-wide
statistics, not each shard's own, weigh the words and the page lengths), and the best ten agree but for ties.
"""

from __future__ import annotations

import itertools
import sqlite3

import pytest

import webtrawl
from tests.cluster.conftest import CrawledTwice
from tests.cluster.processes import NAME, crawl_rows
from webtrawl.store.browse import Filters
from webtrawl.store.export import iso_time
from webtrawl.store.search import SearchResult, search
from webtrawl.store.shards import Sources, split_id
from webtrawl.store.shardsearch import search_shards

pytestmark = pytest.mark.slow


def every_hit(page: callable) -> list[tuple[str, float | None]]:  # type: ignore[valid-type]
    """(url, score) of every hit, page after page."""
    hits, after = [], None
    while True:
        result: SearchResult = page(after)
        hits += [(hit.page.url, hit.score) for hit in result.hits]
        if result.next is None:
            return hits
        after = result.next


def test_search_over_shards_finds_what_one_index_finds(crawled_twice: CrawledTwice) -> None:
    coord = crawled_twice.spread
    one = sqlite3.connect(f"file:{crawled_twice.alone / 'crawl.db'}?mode=ro", uri=True)
    one.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, captures_fts, row)")
    (indexed,) = one.execute("SELECT COUNT(*) FROM captures_fts_docsize").fetchone()
    # Words on a third of the pages or fewer (in title, URL or text): one on most pages has no weight in bm25
    # (its IDF is floored), and its pages would tie.
    weighed = one.execute(
        "SELECT doc, term FROM terms WHERE doc <= ? AND term GLOB '[a-z][a-z][a-z][a-z]*' ORDER BY doc DESC, term",
        (indexed // 3,),
    ).fetchall()
    common = [word for _n, word in weighed[:3]]
    rare = [word for n, word in reversed(weighed) if n >= 5][:2]
    both = next(
        f"{a} {b}"
        for a, b in itertools.combinations([word for _n, word in weighed[:30]], 2)
        if one.execute("SELECT COUNT(*) FROM captures_fts WHERE captures_fts MATCH ?", (f"{a} {b}",)).fetchone()[0] >= 3
    )
    queries = [*common, *rare, both, f"{common[2]} OR {rare[0]}", f"{common[0][:3]}*"]
    with Sources.open(coord, NAME) as shards:
        assert len(shards.all) == 3 and not shards.unreachable
        for query in queries:
            alone = every_hit(lambda after, q=query: search(one, 1, q, Filters(), after=after, limit=7))
            spread = every_hit(lambda after, q=query: search_shards(shards, q, Filters(), after=after, limit=7))
            assert sorted(url for url, _ in spread) == sorted(url for url, _ in alone), query
            # One index's best ten, with the pages that tie with its tenth (pages of the same text score alike).
            assert alone, query
            tenth = alone[min(9, len(alone) - 1)][1]
            top = {url for url, score in alone if score is not None and score <= tenth + 1e-9}
            assert len(top & {url for url, _ in spread[:10]}) >= min(8, len(alone)), query
            assert [score for _, score in spread] == sorted(score for _, score in spread)  # best first, page after page
            # Words that match too many pages to rank list them shard by shard in capture order, page by page.
            unranked = every_hit(
                lambda after, q=query: search_shards(shards, q, Filters(), after=after, limit=7, rank_at_most=0)
            )
            assert sorted(url for url, _ in unranked) == sorted(url for url, _ in alone)
            assert {score for _, score in unranked} == {None}
            # Scored with the crawl's statistics (IDF, average page length), a page scores as in one index
            # (each shard's own put them 1.5-33% apart on these sites).
            scores = dict(alone)
            for url, score in spread:
                assert score == pytest.approx(scores[url], rel=1e-9), (query, url)
        with webtrawl.open(coord) as crawl:  # the Python API reads the shards as one crawl
            assert crawl.unreachable_shards == []
            every = every_hit(lambda after: search_shards(shards, common[0], Filters(), after=after, limit=1000))
            assert [(h.page.url, h.score) for h in crawl.search(common[0], limit=1000)] == every
            in_index = crawl_rows(coord, "SELECT url, fetched_at FROM captures WHERE crawl_id = ?")
            assert sorted((c.url, c.fetched_at) for c in crawl.captures()) == sorted(
                (url, iso_time(at)) for url, at in in_index
            )
        # A hit names its capture crawl-wide: the shard that holds it, and its id there.
        for hit in search_shards(shards, common[0], Filters(), limit=5).hits:
            number, local = split_id(hit.page.id)
            assert number is not None
            holder = next(source for source in shards.all if source.number == number)
            (url,) = holder.conn.execute("SELECT url FROM captures WHERE id = ?", (local,)).fetchone()
            assert url == hit.page.url
