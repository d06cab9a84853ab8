"""The archived copies of a crawl spread over three nodes, read from every shard as one crawl: the dashboard
given the coordinator's directory serves each page whichever node fetched it, as the same crawl run embedded
serves it, and the links of a page fetched by one node lead into the archive when another node fetched their
target. (The crawl re-fetches nothing unchanged: a revisit across shards is not in these crawls.)
"""

from __future__ import annotations

import re
import sqlite3
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

import pytest
from starlette.exceptions import StarletteDeprecationWarning

from tests.cluster.conftest import CrawledTwice
from tests.cluster.processes import NAME
from webtrawl.store.replay import nearest_resource_in
from webtrawl.store.shards import Source, Sources, global_id
from webtrawl.web.app import create_app
from webtrawl.web.site import Site

with warnings.catch_warnings():
    # The test client prefers httpx2 to httpx (installed): a test tool's deprecation, not ours.
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.slow

PAGES_PER_SHARD = 10
_STAMP = re.compile(r"/archive/url/\d{14}/")
"""A rewritten link's time: each crawl fetched a page at its own."""


@dataclass(frozen=True, slots=True)
class Page:
    """A page one node fetched, as a reader of the whole crawl names it."""

    id: int
    url: str
    fetched_at: float

    @property
    def stamp(self) -> str:
        return datetime.fromtimestamp(self.fetched_at, UTC).strftime("%Y%m%d%H%M%S")


@pytest.fixture(scope="module")
def sources(crawled_twice: CrawledTwice) -> Iterator[Sources]:
    with Sources.open(crawled_twice.spread, NAME) as sources:
        assert sources.distributed and len(sources.all) == 3 and not sources.unreachable
        yield sources


@pytest.fixture(scope="module")
def spread(crawled_twice: CrawledTwice) -> Iterator[TestClient]:
    with TestClient(create_app(Site(crawled_twice.spread, name=NAME))) as client:
        yield client


@pytest.fixture(scope="module")
def alone(crawled_twice: CrawledTwice) -> Iterator[TestClient]:
    with TestClient(create_app(Site(crawled_twice.alone))) as client:
        yield client


def pages_of(sources: Sources, source: Source, limit: int = PAGES_PER_SHARD) -> list[Page]:
    """The first pages (archived HTML, status 200) the node of `source` fetched."""
    rows = source.conn.execute(
        "SELECT id, url, fetched_at FROM captures WHERE crawl_id = ? AND status = 200 AND content_type = 'text/html' "
        "AND warc_file IS NOT NULL ORDER BY id LIMIT ?",
        (source.crawl_id, limit),
    )
    return [Page(sources.capture_id(source, local), url, at) for local, url, at in rows]


def embedded_id(crawled_twice: CrawledTwice, url: str) -> int:
    conn = sqlite3.connect(f"file:{crawled_twice.alone / 'crawl.db'}?mode=ro", uri=True)
    try:
        (found,) = conn.execute("SELECT id FROM captures WHERE url = ? AND warc_file IS NOT NULL", (url,)).fetchone()
    finally:
        conn.close()
    return int(found)


def without_times(html: str) -> str:
    return _STAMP.sub("/archive/url/STAMP/", html)


def test_every_nodes_pages_are_served_as_the_embedded_crawl_serves_them(
    crawled_twice: CrawledTwice, sources: Sources, spread: TestClient, alone: TestClient
) -> None:
    nodes = set()
    for source in sources.all:
        [(node,)] = source.conn.execute("SELECT DISTINCT node FROM captures WHERE crawl_id = ?", (source.crawl_id,))
        nodes.add(node)
        for page in pages_of(sources, source):
            twin = embedded_id(crawled_twice, page.url)
            copy, expected = spread.get(f"/archive/{page.id}/raw"), alone.get(f"/archive/{twin}/raw")
            assert copy.status_code == expected.status_code == 200, (page, copy.text[:300])
            # the same links archived and not archived: the rewriter asked every shard
            assert without_times(copy.text) == without_times(expected.text), page
            source_copy = spread.get(f"/archive/{page.id}/source")
            assert source_copy.content == alone.get(f"/archive/{twin}/source").content, page
            banner = spread.get(f"/archive/{page.id}")
            assert banner.status_code == 200
            assert f'src="/archive/{page.id}/raw"' in banner.text and f'href="/page/{page.id}"' in banner.text
    assert len(nodes) == 3
    nowhere = spread.get(f"/archive/{global_id(len(sources.all), 1)}")
    assert nowhere.status_code == 404 and "No such capture" in nowhere.text


def test_the_archive_by_url_finds_a_page_whichever_node_fetched_it(sources: Sources, spread: TestClient) -> None:
    for source in sources.all:
        (page,) = pages_of(sources, source, 1)
        address = f"/archive/url/{page.stamp}/{page.url}"
        visit = spread.get(address, headers={"Sec-Fetch-Dest": "document"}, follow_redirects=False)
        assert visit.status_code == 302 and visit.headers["location"] == f"/archive/{page.id}"
        copy = spread.get(f"/archive/url/2099/{page.url}")  # any time finds the one capture there is
        assert copy.status_code == 200 and copy.text == spread.get(f"/archive/{page.id}/raw").text
    assert spread.get(f"/archive/url/2099/{page.url}never-crawled/").status_code == 404


def test_a_link_to_a_page_another_node_fetched_leads_into_the_archive(sources: Sources, spread: TestClient) -> None:
    archived = {source.number: fingerprints(source) for source in sources.all}
    # Nodes split hosts between them as they join, so some shard (not each) has such a link.
    pairs = [pair for source in sources.all if (pair := linked_elsewhere(sources, source, archived)) is not None]
    assert pairs, "no page links to a page only another shard holds"
    for page, target in pairs:
        rewritten = spread.get(f"/archive/{page.id}/raw").text
        address = f"/archive/url/{page.stamp}/{target.url}"
        assert f'href="{address}"' in rewritten, (page, target)
        assert f'not-archived?url={quote(target.url, safe="")}"' not in rewritten  # whole: a root's is a prefix
        followed = spread.get(address)
        assert followed.status_code == 200 and followed.text == spread.get(f"/archive/{target.id}/raw").text


def fingerprints(source: Source) -> dict[int, int]:
    """The archived pages of `source`: fingerprint → id there."""
    rows = source.conn.execute(
        "SELECT fp, id FROM captures WHERE crawl_id = ? AND status = 200 AND warc_file IS NOT NULL", (source.crawl_id,)
    )
    return dict(rows.fetchall())


def linked_elsewhere(sources: Sources, source: Source, archived: dict[int, dict[int, int]]) -> tuple[Page, Page] | None:
    """A page of `source` and a page it links to that only another shard holds, if any."""
    elsewhere = {
        fp: (holder, local)
        for holder in sources.all
        if holder is not source
        for fp, local in archived[holder.number].items()
        if fp not in archived[source.number]
    }
    links = source.conn.execute(
        "SELECT c.id, c.url, c.fetched_at, l.dst_fp FROM captures c JOIN links l ON l.crawl_id = c.crawl_id "
        "AND l.src_fp = c.fp WHERE c.crawl_id = ? AND c.status = 200 AND c.content_type = 'text/html' ORDER BY c.id",
        (source.crawl_id,),
    )
    for local, url, at, target in links:
        if target in elsewhere:
            holder, held = elsewhere[target]
            row = holder.conn.execute("SELECT url, fetched_at FROM captures WHERE id = ?", (held,)).fetchone()
            return Page(sources.capture_id(source, local), url, at), Page(sources.capture_id(holder, held), *row)
    return None


def test_a_response_two_nodes_got_is_found_nearest_in_time_across_shards(sources: Sources, spread: TestClient) -> None:
    """Each node reads the robots.txt of the hosts it crawls: one read by two nodes is in two shards."""
    got: dict[str, list[tuple[float, int]]] = {}
    for source in sources.all:
        for url, at in source.conn.execute(
            "SELECT url, fetched_at FROM resources WHERE crawl_id = ? AND url LIKE '%/robots.txt'", (source.crawl_id,)
        ):
            got.setdefault(url, []).append((at, source.number))
    shared = [(url, fetches) for url, fetches in got.items() if len({number for _, number in fetches}) > 1]
    if not shared:
        pytest.skip("each host's robots.txt was read by one node only in this crawl")
    url, fetches = shared[0]
    for at, number in fetches:
        nearest = nearest_resource_in(sources.all, url, at)
        assert nearest is not None and nearest.source.number == number and nearest.capture.fetched_at == at
        stamp = datetime.fromtimestamp(at, UTC).strftime("%Y%m%d%H%M%S")
        assert spread.get(f"/archive/url/{stamp}/{url}").status_code == 200
