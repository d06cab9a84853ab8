"""The coordinator's dashboard shows a crawl spread over three nodes as one crawl: the same overview, pages,
search and page details the dashboard of the same sites crawled alone shows.

Both crawls are read through the app's JSON (the same models its pages render): lists are walked a few rows
at a time, so every step crosses from shard to shard; capture ids differ between the two crawls, so rows are
compared by URL, and an id the spread crawl gives leads to the page it names.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.exceptions import StarletteDeprecationWarning

from tests.cluster.conftest import CrawledTwice
from tests.cluster.processes import NAME
from webtrawl.web.app import create_app
from webtrawl.web.site import Site

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.slow

LIMIT = 19
"""Rows a page of the list: a step crosses from shard to shard (about 110 steps over the crawl)."""


@pytest.fixture(scope="module")
def clients(crawled_twice: CrawledTwice) -> Iterator[tuple[TestClient, TestClient]]:
    """(the dashboard of the crawl alone, the coordinator's dashboard of the spread crawl)."""
    with (
        TestClient(create_app(Site(crawled_twice.alone))) as alone,
        TestClient(create_app(Site(crawled_twice.spread, name=NAME))) as spread,
    ):
        yield alone, spread


def walk(client: TestClient, path: str, **params: Any) -> list[dict[str, Any]]:
    """Every row of a paged list, following `next` from the first page."""
    rows: list[dict[str, Any]] = []
    after = None
    while True:
        page = client.get(path, params={**params, **({"after": after} if after else {})}).json()
        rows += page["rows"]
        if page["next"] is None:
            return rows
        after = page["next"]


def test_the_overview_counts_the_same_crawl(clients: tuple[TestClient, TestClient]) -> None:
    alone, spread = (client.get("/api/overview").json() for client in clients)
    assert spread["captures"] == alone["captures"] > 2000
    for key in ("bytes", "statuses", "failures", "drops", "done", "failed"):
        assert spread[key] == alone[key], key
    assert spread["unindexed"] == 0


@pytest.mark.parametrize(("sort", "direction"), [("url", "asc"), ("fetched", "desc"), ("status", "asc")])
def test_the_pages_list_walks_every_shard_in_one_order(
    clients: tuple[TestClient, TestClient], sort: str, direction: str
) -> None:
    alone, spread = clients
    rows = walk(spread, "/api/pages", sort=sort, dir=direction, limit=LIMIT)
    assert Counter(row["url"] for row in rows) == Counter(row["url"] for row in walk(alone, "/api/pages", limit=500))
    assert len({row["id"] for row in rows}) == len(rows)
    key = {"url": "url", "fetched": "fetched_at", "status": "status"}[sort]
    values = [row[key] or 0 for row in rows]
    assert values == sorted(values, reverse=direction == "desc")
    # Back from the last page, `previous` after `previous`, the same rows come in the same order.
    last = spread.get("/api/pages", params={"sort": sort, "dir": direction, "limit": LIMIT}).json()
    while last["next"]:
        last = spread.get(
            "/api/pages", params={"sort": sort, "dir": direction, "limit": LIMIT, "after": last["next"]}
        ).json()
    back, page = list(last["rows"]), last
    while page["previous"]:
        page = spread.get(
            "/api/pages", params={"sort": sort, "dir": direction, "limit": LIMIT, "before": page["previous"]}
        ).json()
        back = page["rows"] + back
    assert [row["id"] for row in back] == [row["id"] for row in rows]


def test_filters_and_counts_span_the_shards(clients: tuple[TestClient, TestClient]) -> None:
    alone = clients[0]
    host = "/".join(walk(alone, "/api/pages", limit=500)[0]["url"].split("/", 3)[:3])  # an origin
    for filters in ({"status": "200", "depth": "2"}, {"host": host}, {"status": "4xx"}):
        found = [Counter(row["url"] for row in walk(client, "/api/pages", limit=9, **filters)) for client in clients]
        assert found[1] == found[0], filters
        totals = [client.get("/api/pages", params={**filters, "limit": 1}).json()["total"] for client in clients]
        assert totals[1] == totals[0] == sum(found[0].values()), filters


def test_search_finds_every_shards_pages(clients: tuple[TestClient, TestClient]) -> None:
    alone = clients[0]
    first = walk(alone, "/api/pages", status="200", limit=1)[0]
    word = first["title"].split()[0]
    hits = []
    for client in clients:
        found, after = [], None
        while True:
            page = client.get("/api/search", params={"q": word, "limit": 5, **({"after": after} if after else {})})
            body = page.json()
            found += [hit["page"]["url"] for hit in body["hits"]]
            if body["next"] is None:
                break
            after = body["next"]
        hits.append((sorted(found), body["total"]))
    assert hits[1] == hits[0] and hits[0][0]


def test_a_page_shows_its_links_from_every_shard(clients: tuple[TestClient, TestClient]) -> None:
    alone, spread = clients
    ids = {row["url"]: row["id"] for row in walk(alone, "/api/pages", status="200", limit=500)}
    spread_rows = walk(spread, "/api/pages", status="200", limit=500)
    # A page of each shard (the id's high bits name it).
    by_shard: dict[int, dict[str, Any]] = {}
    for row in spread_rows:
        by_shard.setdefault(row["id"] >> 40, row)
    assert len(by_shard) == 3
    for row in by_shard.values():
        mine = spread.get(f"/api/page/{row['id']}").json()
        theirs = alone.get(f"/api/page/{ids[row['url']]}").json()
        assert mine["page"]["url"] == row["url"]
        for direction in ("in_links", "out_links"):
            assert {(link["url"], link["state"]) for link in mine[direction]} == {
                (link["url"], link["state"]) for link in theirs[direction]
            }, direction
            assert mine[direction.replace("links", "total")] == theirs[direction.replace("links", "total")]
            for link in mine[direction][:5]:  # an id leads to the page it names, whichever shard holds it
                if link["capture_id"] is not None:
                    assert spread.get(f"/api/page/{link['capture_id']}").json()["page"]["url"] == link["url"]
        paged = walk(spread, f"/api/page/{row['id']}/in-links", limit=3)
        assert sorted(link["url"] for link in paged) == sorted(link["url"] for link in theirs["in_links"])
        assert [ref["fetched_at"] for ref in mine["captures"]] == sorted(ref["fetched_at"] for ref in mine["captures"])
        assert len(mine["captures"]) == len(theirs["captures"])
    assert spread.get(f"/api/page/{(7 << 40) | 1}").status_code == 404  # a shard the crawl does not have


def test_status_counts_urls_as_the_coordinator_last_published(crawled_twice: CrawledTwice, tmp_path: Path) -> None:
    """The coordinator keeps the crawl's URL counts in its directory (Redis had them; each shard holds its part):
    with its own table of URLs emptied, `status DIR` and the overview still count every URL of the crawl."""
    copy = tmp_path / "coord"
    shutil.copytree(crawled_twice.spread, copy)
    conn = sqlite3.connect(copy / "crawl.db")
    with conn:
        conn.execute("DELETE FROM urls")
    conn.close()
    said = {
        name: subprocess.run(
            [sys.executable, "-m", "webtrawl", "status", str(directory), *extra],
            capture_output=True, text=True, check=True,
        ).stdout
        for name, directory, extra in (("alone", crawled_twice.alone, []), ("spread", copy, ["--name", NAME]))
    }  # fmt: skip
    counts = {
        name: dict(re.findall(r"^  (waiting|running|done|failed|captures) +([\d,]+)", out, re.M))
        for name, out in said.items()
    }
    assert counts["spread"] == counts["alone"] and int(counts["alone"]["done"].replace(",", "")) > 2000
    with TestClient(create_app(Site(copy, name=NAME))) as client:
        overview = client.get("/api/overview").json()
    assert (overview["state"], overview["done"], overview["waiting"]) == (
        "finished",
        int(counts["alone"]["done"].replace(",", "")),
        0,
    )
