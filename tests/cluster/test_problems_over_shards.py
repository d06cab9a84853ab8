"""The dashboard's failed and dropped URLs of a crawl spread over three nodes' shards are those of the same
sites crawled into one database: the same URLs with the same reasons, counted alike, each dropped URL once
however many nodes dropped it, paged across shards, and every capture and referrer one of the crawl's.

The test sites fail in three ways (404s, a page that always answers 500, pages robots.txt disallows) and
drop in three (binary extensions, repeated path segments, links out of scope, some linked from every site).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.cluster.conftest import CrawledTwice
from tests.cluster.processes import NAME
from tests.web.test_browse import TestClient, walk
from webtrawl.store.db import DB_NAME, NODE_DB
from webtrawl.store.problems import drop_counts_of, failure_counts_of
from webtrawl.store.shards import Sources, load_places, save_places
from webtrawl.web.app import create_app
from webtrawl.web.site import Site

pytestmark = pytest.mark.slow

LIMIT = 7
"""Rows per page: small, so the lists page on within a shard and from one shard to the next."""


@pytest.fixture(scope="module")
def alone(crawled_twice: CrawledTwice) -> Iterator[TestClient]:
    with TestClient(create_app(Site(crawled_twice.alone))) as client:
        yield client


@pytest.fixture(scope="module")
def spread(crawled_twice: CrawledTwice) -> Iterator[TestClient]:
    with TestClient(create_app(Site(crawled_twice.spread, name=NAME))) as client:
        yield client


@pytest.fixture(scope="module")
def sources(crawled_twice: CrawledTwice) -> Iterator[Sources]:
    with Sources.open(crawled_twice.spread, NAME) as sources:
        assert sources.distributed and len(sources.all) == 3 and not sources.unreachable
        yield sources


def listed(client: TestClient, name: str, reason: str = "") -> list[tuple[str, str]]:
    """(url, reason) of every row of list `name`, every page followed through its `next` cursor."""
    query = urlencode({"limit": LIMIT, **({"reason": reason} if reason else {})})
    return [(row["url"], row["reason"]) for row in walk(client, f"/api/{name}?{query}")]


def shard_rows(sources: Sources, sql: str, *params: Any) -> list[tuple]:
    """The rows `sql` reads in every shard."""
    return [row for source in sources.all for row in source.conn.execute(sql, params)]


def copied(directory: Path, sources: Sources, tmp_path: Path) -> Path:
    """A copy of the crawl in `directory` (in `tmp_path/coord`) and of its shards (`tmp_path/shardN`), which
    its list of shards names, so a test may change what they hold."""
    copy = tmp_path / "coord"
    copy.mkdir()
    with closing(sqlite3.connect(f"file:{directory / DB_NAME}?mode=ro", uri=True)) as gathered:
        backup(gathered, copy / DB_NAME)
    places = load_places(directory)
    for source in sources.all:
        shard = tmp_path / f"shard{source.number}"
        shard.mkdir()
        backup(source.conn, shard / NODE_DB)
        places[source.number] = replace(places[source.number], path=str(shard))
    save_places(copy, places)
    return copy


def backup(conn: sqlite3.Connection, path: Path) -> None:
    with closing(sqlite3.connect(path)) as target:
        conn.backup(target)


@pytest.mark.parametrize("name", ["failed", "dropped"])
def test_the_lists_over_shards_hold_what_one_database_holds_each_url_once(
    alone: TestClient, spread: TestClient, name: str
) -> None:
    expected = listed(alone, name)
    got = listed(spread, name)
    assert len(expected) > 3 * LIMIT, "the lists page on across shards"
    assert len(got) == len({url for url, _ in got})
    assert sorted(got) == sorted(expected)

    first = spread.get(f"/api/{name}").json()
    assert first["reasons"] == alone.get(f"/api/{name}").json()["reasons"]
    assert first["total"] == len(expected) and sum(first["reasons"].values()) == len(expected)
    assert len(first["reasons"]) == 3
    for reason, count in first["reasons"].items():
        only = listed(spread, name, reason)
        assert sorted(only) == sorted((url, why) for url, why in expected if why == reason) and len(only) == count
        assert spread.get(f"/api/{name}", params={"reason": reason}).json()["total"] == count


def test_counts_by_reason_over_shards_are_one_databases(crawled_twice: CrawledTwice, sources: Sources) -> None:
    with Sources.open(crawled_twice.alone, "default") as one:
        assert not one.distributed
        assert failure_counts_of(sources) == failure_counts_of(one)
        assert drop_counts_of(sources) == drop_counts_of(one)
    assert len(shard_rows(sources, "SELECT fp FROM dropped")) > sum(drop_counts_of(sources).values())


def test_a_url_several_nodes_dropped_is_listed_once(sources: Sources, spread: TestClient) -> None:
    dropped_by = Counter(url for (url,) in shard_rows(sources, "SELECT url FROM dropped"))
    taken = {url for (url,) in shard_rows(sources, "SELECT url FROM urls")}
    assert {url for url, shards in dropped_by.items() if shards > 1} - taken, "some URLs are dropped by several nodes"
    rows = Counter(url for url, _reason in listed(spread, "dropped"))
    assert set(rows) == set(dropped_by) - taken and set(rows.values()) == {1}


def test_a_url_one_shard_dropped_and_another_took_is_not_listed(
    crawled_twice: CrawledTwice, sources: Sources, spread: TestClient, tmp_path: Path
) -> None:
    before = listed(spread, "dropped")
    dropped_by = Counter(url for (url,) in shard_rows(sources, "SELECT url FROM dropped"))
    url, reason = next((url, reason) for url, reason in before if dropped_by[url] < len(sources.all))
    ((fp,),) = set(shard_rows(sources, "SELECT fp FROM dropped WHERE url = ?", url))
    taker = next(
        s for s in sources.all if s.conn.execute("SELECT 1 FROM dropped WHERE fp = ?", (fp,)).fetchone() is None
    )
    copy = copied(crawled_twice.spread, sources, tmp_path)
    with closing(sqlite3.connect(tmp_path / f"shard{taker.number}" / NODE_DB)) as shard, shard:
        shard.execute(  # the URL as the taker's shard holds a link it found: waiting
            "INSERT INTO urls(crawl_id, fp, url, host_id, depth, kind, state, added_seq, discovered_at, updated_at) "
            "SELECT crawl_id, ?, ?, host_id, depth, 'link', 0, added_seq, discovered_at, updated_at FROM urls LIMIT 1",
            (fp, url),
        )

    with TestClient(create_app(Site(copy, name=NAME))) as client:
        assert sorted(listed(client, "dropped")) == sorted(set(before) - {(url, reason)})
        reasons = client.get("/api/dropped").json()["reasons"]
    assert reasons[reason] == spread.get("/api/dropped").json()["reasons"][reason] - 1


def test_a_failed_url_other_shards_hold_as_waiting_is_listed_once_as_failed(
    sources: Sources, spread: TestClient
) -> None:
    failed = {url for (url,) in shard_rows(sources, "SELECT url FROM urls WHERE state = 3")}
    waiting = {url for (url,) in shard_rows(sources, "SELECT url FROM urls WHERE state = 0")}
    assert failed & waiting, "pages of other nodes link the failed URLs"
    assert Counter(url for url, _reason in listed(spread, "failed")) == Counter(failed)


def test_a_failed_url_another_shard_ended_later_is_that_shards(
    crawled_twice: CrawledTwice, sources: Sources, spread: TestClient, tmp_path: Path
) -> None:
    """A failed URL revisited by another node, which fetched it: its latest ended row is what it came to, so it
    leaves the failed list and its counts."""
    before = listed(spread, "failed")
    url, reason = before[0]
    ((fp, at),) = set(shard_rows(sources, "SELECT fp, updated_at FROM urls WHERE url = ? AND state = 3", url))
    revisitor = next(
        s for s in sources.all if not s.conn.execute("SELECT 1 FROM urls WHERE fp = ? AND state = 3", (fp,)).fetchone()
    )
    copy = copied(crawled_twice.spread, sources, tmp_path)
    with closing(sqlite3.connect(tmp_path / f"shard{revisitor.number}" / NODE_DB)) as shard, shard:
        shard.execute(  # done there, after it failed (it may have been waiting there, linked from its pages)
            "INSERT INTO urls(crawl_id, fp, url, host_id, depth, kind, state, added_seq, discovered_at, updated_at) "
            "SELECT crawl_id, ?, ?, host_id, depth, 'link', 2, added_seq, discovered_at, ? FROM urls LIMIT 1 "
            "ON CONFLICT(crawl_id, fp) DO UPDATE SET state = 2, updated_at = excluded.updated_at",
            (fp, url, at + 60),
        )

    with TestClient(create_app(Site(copy, name=NAME))) as client:
        assert sorted(listed(client, "failed")) == sorted(set(before) - {(url, reason)})
        reasons = client.get("/api/failed").json()["reasons"]
    assert reasons.get(reason, 0) == spread.get("/api/failed").json()["reasons"][reason] - 1


def test_the_lists_read_the_shards_not_the_index_the_coordinator_gathers(
    crawled_twice: CrawledTwice, sources: Sources, spread: TestClient, tmp_path: Path
) -> None:
    copy = copied(crawled_twice.spread, sources, tmp_path)
    with closing(sqlite3.connect(copy / DB_NAME)) as gathered, gathered:
        gathered.execute("DELETE FROM dropped")
        gathered.execute("DELETE FROM urls WHERE state = 3")
    with TestClient(create_app(Site(copy, name=NAME))) as client:
        for name in ("failed", "dropped"):
            assert sorted(listed(client, name)) == sorted(listed(spread, name))


def test_the_html_lists_page_on_across_shards(alone: TestClient, spread: TestClient) -> None:
    for name in ("failed", "dropped"):
        first = spread.get(f"/{name}?limit={LIMIT}")
        assert first.status_code == 200
        assert f'id="total">{len(listed(alone, name))} URLs<' in first.text
        cursor = spread.get(f"/api/{name}?limit={LIMIT}").json()["next"]
        assert 'id="next" rel="next"' in first.text and f"after={cursor}" in first.text
        assert spread.get(f"/api/{name}?after=nonsense").status_code == 400


def test_captures_and_referrers_are_the_crawls_captures(sources: Sources, spread: TestClient) -> None:
    failed = walk(spread, f"/api/failed?limit={LIMIT}")
    with_capture = [row for row in failed if row["capture_id"] is not None]
    assert {row["reason"] for row in with_capture} == {"HTTP 404", "HTTP 500 (after 2 attempts)"}
    for row in with_capture:
        assert captured(sources, row["capture_id"])[1] == row["url"]

    dropped = walk(spread, f"/api/dropped?limit={LIMIT}")
    assert all(row["referrer"] for row in dropped), "every drop of the test sites was linked from a page"
    shards = set()
    for row in dropped:
        shard, url = captured(sources, row["referrer_capture_id"])
        assert url == row["referrer"]
        shards.add(shard)
    assert len(shards) > 1, "the referrers' captures are in more than one shard"


def captured(sources: Sources, capture_id: int) -> tuple[int, str]:
    """The shard number and URL of the capture a reader names `capture_id`."""
    found = sources.locate(capture_id)
    assert found is not None, capture_id
    source, local = found
    row = source.conn.execute("SELECT url FROM captures WHERE id = ?", (local,)).fetchone()
    assert row is not None, capture_id
    return source.number, str(row[0])
