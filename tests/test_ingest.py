"""`store.ingest`: a node's results settled into a real shard database, at least once and in any order."""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from webtrawl.cluster.wire import decode_completion, encode_completion
from webtrawl.frontier.seen import SeenCache
from webtrawl.models import Capture, Completion, Entry, NewURL, Resource, Verdict, WarcLocation
from webtrawl.store.batches import record_site_files
from webtrawl.store.crawls import open_crawl
from webtrawl.store.db import Database, connect, transaction
from webtrawl.store.detail import detail
from webtrawl.store.export import export
from webtrawl.store.index import capture_row, drop_counts, failure_counts, index_captures, status_counts
from webtrawl.store.ingest import Item, apply_items, ingest_drops
from webtrawl.store.links import link_page
from webtrawl.store.schema import MIGRATIONS
from webtrawl.store.shards import Sources, source_of
from webtrawl.urls import fingerprint, origin


def one_source(read: Callable[..., Any]) -> Callable[..., Any]:
    """`read` (a reader of a crawl's sources) over the test crawl's database, as the dashboard reads it."""
    return lambda conn, *args: read(Sources([source_of(conn, "test")], [], distributed=False), *args)


T0 = 1_700_000_000.0
WARC = "node-02-20231114221320-00001.warc.gz"


class Crawl:
    """A shard's database as a node has it, driven through its writer thread like the real one."""

    def __init__(self, db: Database, crawl_id: int, seen: SeenCache | None = None) -> None:
        self.db = db
        self.id = crawl_id
        self.seen = seen

    async def ingest(self, items: Sequence[Item]) -> int:
        """Apply `items` in one transaction, as a node settles a batch (`store.shard.settle`)."""
        new_links = None if self.seen is None else self.seen.fresh

        def apply(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                return apply_items(conn, self.id, items, new_links=new_links)

        return await self.db.run(apply)

    async def query(self, sql: str, *args: object) -> list[tuple]:
        return await self.db.run(lambda conn: conn.execute(sql, args).fetchall())

    async def url(self, path: str) -> tuple:
        """(state, depth, attempts, reason, not_before) of one URL."""
        (row,) = await self.query(
            "SELECT state, depth, attempts, reason, not_before FROM urls WHERE crawl_id = ? AND fp = ?",
            self.id,
            fingerprint(full(path)),
        )
        return row

    async def tables(self) -> dict[str, list[tuple]]:
        """Every row the crawl has, in a stable order."""
        return {
            table: await self.query(f"SELECT * FROM {table} ORDER BY {order}")
            for table, order in (
                ("hosts", "id"),
                ("urls", "id"),
                ("captures", "id"),
                ("links", "src_fp, dst_fp"),
                ("dropped", "fp"),
            )
        }


@pytest.fixture(params=["every-link", "seen-links-skipped"])
async def crawl(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Crawl]:
    """The coordinator skips links it recorded before (`SeenCache`): every test holds with and without."""
    db = await Database(tmp_path / "crawl.db").open()
    crawl_id, _ = await db.run(open_crawl, "test", {"seeds": []})
    yield Crawl(db, crawl_id, SeenCache() if request.param == "seen-links-skipped" else None)
    await db.close()


def full(path: str) -> str:
    return path if "://" in path else f"http://a.test{path}"


def entry(path: str, depth: int = 1, attempts: int = 0) -> Entry:
    url = full(path)
    return Entry(
        url=url, fp=fingerprint(url), host=origin(url), depth=depth, kind="link", referrer_fp=None, attempts=attempts
    )


def child(path: str, depth: int = 2, referrer: str | None = None) -> NewURL:
    url = full(path)
    return NewURL(
        url=url,
        fp=fingerprint(url),
        host=origin(url),
        depth=depth,
        referrer_fp=fingerprint(full(referrer)) if referrer else None,
    )


def fetched(
    path: str,
    *children: str,
    depth: int = 1,
    attempts: int = 0,
    status: int = 200,
    verdict: Verdict = "done",
    text: str = "",
    drops: Sequence[tuple[str, str]] = (),
) -> Completion:
    """A fetched page's completion, with a capture in WARC and its links one level deeper."""
    e = entry(path, depth, attempts)
    capture = Capture(
        fp=e.fp,
        url=e.url,
        fetched_at=T0 + attempts,
        status=status,
        content_type="text/html",
        size=100 + len(text),
        title=f"title of {path}",
        text=text,
        warc=WarcLocation(file=WARC, offset=1000 * (attempts + 1), length=500, payload_digest="sha1:ABC"),
    )
    return Completion(
        entry=e,
        verdict=verdict,
        reason=None if verdict == "done" else f"HTTP {status}",
        not_before=T0 + 60 if verdict == "retry" else None,
        capture=capture,
        children=[child(c, depth + 1, path) for c in children],
        drops=list(drops),
    )


async def test_applying_a_batch_twice_adds_nothing(crawl: Crawl) -> None:
    batch = [
        ("p1:1-0", fetched("/", "/a", "/b", "http://b.test/", depth=0, drops=[("http://x.test/", "off-site")]), "n1"),
        ("p1:2-0", fetched("/a", "/b", "/c", depth=1), "node-01"),
        ("p2:1-0", Completion(entry=entry("/robots-says-no"), verdict="failed", reason="blocked by robots.txt"), "n2"),
        ("p2:2-0", fetched("/busy", status=503, verdict="retry"), "n2"),
    ]
    assert await crawl.ingest(batch) == 4
    first = await crawl.tables()
    assert await crawl.ingest(batch) == 0
    assert await crawl.ingest(batch[::-1]) == 0
    assert await crawl.tables() == first
    assert len(first["captures"]) == 3 and len(first["links"]) == 5 and len(first["dropped"]) == 1
    assert [row[2] for row in first["hosts"]] == ["http://a.test", "http://b.test"]


async def test_a_key_listed_twice_in_one_batch_is_applied_once(crawl: Crawl) -> None:
    item = ("p1:1-0", fetched("/"), "node-01")
    assert await crawl.ingest([item, item]) == 1
    assert await crawl.query("SELECT COUNT(*) FROM captures") == [(1,)]


async def test_a_decoded_staged_entry_is_applied_as_it_was_staged(crawl: Crawl) -> None:
    sent = fetched("/", "/a", depth=0, text="hello")
    received, node = decode_completion(encode_completion(sent, "node-03"))
    assert await crawl.ingest([("p5:1700000000000-0", received, node)]) == 1
    assert await crawl.query("SELECT url, node, ingest_key, warc_file, warc_offset FROM captures") == [
        ("http://a.test/", "node-03", "p5:1700000000000-0", WARC, 1000)
    ]


async def test_site_files_indexed_twice_are_indexed_once(crawl: Crawl) -> None:
    at = WarcLocation(file=WARC, offset=0, length=310, payload_digest="sha1:ROBOTS")
    robots = Resource(url=full("/robots.txt"), target=full("/robots.txt"), fetched_at=T0, status=200,
                      content_type="text/plain", warc=at)  # fmt: skip
    sitemap = replace(robots, url=full("/sitemap.xml"), target=full("/sitemap.xml"), status=404,
                      warc=replace(at, offset=310, payload_digest="sha1:GONE"))  # fmt: skip
    for _ in range(2):  # a node killed after staging them stages them again
        await crawl.db.run(record_site_files, crawl.id, [robots, sitemap], "node-02")
    indexed = "SELECT page_fp, url, status, warc_offset, payload_digest, node, site_file FROM resources ORDER BY id"
    assert await crawl.query(indexed) == [
        (fingerprint(full("/robots.txt")), full("/robots.txt"), 200, 0, "sha1:ROBOTS", "node-02", 1),
        (fingerprint(full("/sitemap.xml")), full("/sitemap.xml"), 404, 310, "sha1:GONE", "node-02", 1),
    ]  # fmt: skip
    assert await crawl.query("SELECT COUNT(*) FROM urls") == [(0,)]  # no URL of the crawl


async def test_a_child_arriving_after_its_own_completion_stays_done(crawl: Crawl) -> None:
    assert await crawl.ingest([("p2:1-0", fetched("/b", depth=1), "node-02")]) == 1
    assert await crawl.ingest([("p1:1-0", fetched("/", "/b", depth=0), "node-01")]) == 1
    assert await crawl.url("/b") == (2, 1, 1, None, 0.0)
    assert await crawl.query("SELECT src_fp, dst_fp FROM links") == [(fingerprint(full("/")), fingerprint(full("/b")))]


async def test_a_child_found_closer_lowers_a_waiting_url_only(crawl: Crawl) -> None:
    await crawl.ingest([("p1:1-0", fetched("/deep", "/far", "/retried", "/finished", depth=4), "n")])
    await crawl.ingest([("p1:2-0", fetched("/retried", depth=5, status=503, verdict="retry"), "n")])
    await crawl.ingest([("p1:3-0", fetched("/finished", depth=5), "n")])
    assert await crawl.ingest([("p1:4-0", fetched("/", "/far", "/retried", "/finished", depth=0), "n")]) == 1
    assert await crawl.url("/far") == (0, 1, 0, None, 0.0)
    assert await crawl.url("/retried") == (0, 1, 1, "HTTP 503", T0 + 60)  # still waiting for its retry
    assert await crawl.url("/finished") == (2, 5, 1, None, 0.0)
    await crawl.ingest([("p1:5-0", fetched("/x", "/far", depth=6), "n")])
    assert (await crawl.url("/far"))[1] == 1


async def test_a_seed_whose_page_links_to_itself_is_recorded_as_a_seed(crawl: Crawl) -> None:
    """Its links are written before its own row: the kind the frontier handed it out with is the one kept."""
    page = fetched("/", "/", "/a", depth=0)
    await crawl.ingest([("p1:1-0", replace(page, entry=replace(page.entry, kind="seed")), "n")])
    assert await crawl.query("SELECT kind, depth, state FROM urls WHERE fp = ?", fingerprint(full("/"))) == [
        ("seed", 0, 2)
    ]


async def test_a_completion_keeps_the_smaller_depth(crawl: Crawl) -> None:
    await crawl.ingest([("p1:1-0", fetched("/", "/a", depth=0), "n")])  # /a waiting at depth 1
    await crawl.ingest([("p1:2-0", fetched("/a", depth=3), "n")])
    assert await crawl.url("/a") == (2, 1, 1, None, 0.0)


async def test_a_retry_then_done_ends_done_with_two_attempts(crawl: Crawl) -> None:
    retry = ("p1:1-0", fetched("/a", status=503, verdict="retry"), "node-01")
    done = ("p1:2-0", fetched("/a", attempts=1), "node-04")
    assert await crawl.ingest([retry]) == 1
    assert await crawl.url("/a") == (0, 1, 1, "HTTP 503", T0 + 60)
    assert await crawl.ingest([done]) == 1
    assert await crawl.url("/a") == (2, 1, 2, None, 0.0)
    assert await crawl.ingest([retry]) == 0  # a late duplicate does not roll the URL back
    assert await crawl.url("/a") == (2, 1, 2, None, 0.0)
    assert await crawl.query("SELECT status, node FROM captures ORDER BY id") == [(503, "node-01"), (200, "node-04")]


async def test_a_retry_and_its_done_in_one_batch_end_done(crawl: Crawl) -> None:
    batch = [
        ("p1:1-0", fetched("/a", status=503, verdict="retry"), "n"),
        ("p1:2-0", fetched("/a", attempts=1), "n"),
    ]
    assert await crawl.ingest(batch) == 2
    assert await crawl.url("/a") == (2, 1, 2, None, 0.0)


async def test_a_duplicate_without_a_capture_changes_nothing(crawl: Crawl) -> None:
    failed = Completion(entry=entry("/private"), verdict="failed", reason="blocked by robots.txt")
    assert await crawl.ingest([("p1:1-0", failed, "n")]) == 1
    before = await crawl.tables()
    assert await crawl.ingest([("p1:1-0", failed, "n")]) == 0
    assert await crawl.tables() == before
    assert await crawl.url("/private") == (3, 1, 1, "blocked by robots.txt", 0.0)


async def test_a_url_refused_for_a_budget_stays_out_whichever_arrives_first(crawl: Crawl) -> None:
    home = str(fingerprint(full("/")))
    assert await crawl.ingest([("p1:1-0", fetched("/", "/a", "/late-drop", depth=0), "node-01")]) == 1
    early = [["http://a.test/early-drop", "template-budget", home]]
    late = [["http://a.test/late-drop", "host-budget", home], ["http://a.test/a", "host-budget", home]]
    assert await crawl.db.run(ingest_drops, crawl.id, early) == 1
    await crawl.ingest([("p1:2-0", fetched("/a", "/early-drop", "/kept"), "node-01")])  # /a done, then a stale drop
    assert await crawl.db.run(ingest_drops, crawl.id, late) == 1  # /a was taken: its drop is stale, not logged
    assert await crawl.db.run(ingest_drops, crawl.id, late + early) == 0
    urls = await crawl.query("SELECT url, state FROM urls ORDER BY id")
    assert urls == [("http://a.test/a", 2), ("http://a.test/", 2), ("http://a.test/kept", 0)]
    assert len(await crawl.query("SELECT * FROM links")) == 4  # a link to a refused URL is still a link
    assert await crawl.db.run(drop_counts, crawl.id) == {"host-budget": 1, "template-budget": 1}
    assert await crawl.query("SELECT referrer_fp FROM dropped WHERE url LIKE '%drop'") == [(int(home),)] * 2
    assert await crawl.query("SELECT COUNT(*) FROM dropped") == [(2,)]
    await crawl.ingest([("p1:3-0", fetched("/kept", "/late-drop", "/early-drop"), "node-01")])  # linked again
    assert [url for (url,) in await crawl.query("SELECT url FROM urls") if "drop" in url] == []


async def test_other_drops_are_recorded_without_removing_a_url(crawl: Crawl) -> None:
    await crawl.ingest([("p1:1-0", fetched("/", "/deep", depth=0), "node-01")])
    drops = [["http://a.test/deep", "too-deep", ""], ["http://other.test/", "off-site", ""]]
    assert await crawl.db.run(ingest_drops, crawl.id, drops) == 1  # /deep is in the crawl: not a drop
    assert await crawl.url("/deep") == (0, 1, 0, None, 0.0)
    assert await crawl.query("SELECT url, reason, referrer_fp FROM dropped ORDER BY url") == [
        ("http://other.test/", "off-site", None),
    ]
    assert await crawl.db.run(drop_counts, crawl.id) == {"off-site": 1}


async def test_reports_and_export_read_an_ingested_crawl(crawl: Crawl, tmp_path: Path) -> None:
    await crawl.ingest(
        [
            ("p1:1-0", fetched("/", "/a", "/gone", depth=0, drops=[("http://x.test/", "off-site")]), "node-01"),
            ("p1:2-0", fetched("/gone", depth=1, status=404, verdict="failed"), "node-01"),
            ("p2:1-0", fetched("/a", "/b", depth=1, drops=[("http://x.test/", "off-site")]), "node-02"),
            ("p2:2-0", fetched("/big", depth=1, drops=[("http://a.test/" + "x/" * 50, "too deep")]), "node-02"),
        ]
    )
    conn = connect(tmp_path / "crawl.db", readonly=True)
    try:
        assert status_counts(conn, crawl.id) == {200: 3, 404: 1}
        assert failure_counts(conn, crawl.id) == {"HTTP 404": 1}
        assert drop_counts(conn, crawl.id) == {"off-site": 1, "too deep": 1}
        out = io.StringIO()
        assert export([source_of(conn, "test")], "jsonl", out) == 4
    finally:
        conn.close()
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r["url"], r["status"], r["depth"], r["warc_file"]) for r in rows] == [
        ("http://a.test/", 200, 0, WARC),
        ("http://a.test/gone", 404, 1, WARC),
        ("http://a.test/a", 200, 1, WARC),
        ("http://a.test/big", 200, 1, WARC),
    ]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webtrawl", "status", str(tmp_path), "--name", "test", stdout=asyncio.subprocess.PIPE
    )
    status, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0
    counts = {line.split()[0]: line.split()[1] for line in status.decode().splitlines()[1:]}
    assert counts == {"waiting": "1", "running": "0", "done": "3", "failed": "1", "captures": "4"}


async def test_index_captures_makes_ingested_captures_searchable(crawl: Crawl) -> None:
    await crawl.ingest(
        [
            ("p1:1-0", fetched("/", depth=0, text="the quick brown zebra"), "node-01"),
            ("p2:1-0", fetched("/b", text="nothing to see"), "node-02"),
        ]
    )
    assert await crawl.db.run(index_captures) == 2
    assert await crawl.query(
        "SELECT c.url, c.node FROM captures_fts f JOIN captures c ON c.id = f.rowid WHERE captures_fts MATCH 'zebra'"
    ) == [("http://a.test/", "node-01")]


async def test_a_pages_in_links_are_listed_once_the_index_has_caught_up(crawl: Crawl) -> None:
    await crawl.ingest(
        [
            ("p1:1-0", fetched("/", "/b", "/c", depth=0), "node-01"),
            ("p2:1-0", fetched("/b", "/c"), "node-02"),
            ("p2:2-0", fetched("/c", "/"), "node-02"),
        ]
    )
    while await crawl.db.run(index_captures):
        pass

    async def linked(path: str, direction: str) -> set[str]:
        (capture,) = await crawl.query("SELECT id FROM captures WHERE url = ?", full(path))
        page = await crawl.db.run(one_source(link_page), capture[0], direction)
        assert page is not None and page.total == len(page.rows)
        return {row.url for row in page.rows}

    assert await linked("/c", "in") == {full("/"), full("/b")}
    assert await linked("/", "in") == {full("/c")}
    assert await linked("/", "out") == {full("/b"), full("/c")}
    found = await crawl.db.run(
        one_source(detail), (await crawl.query("SELECT id FROM captures WHERE url = ?", full("/c")))[0][0]
    )
    assert found is not None and {row.url for row in found.in_links} == {full("/"), full("/b")}


def test_ingest_keys_are_unique_within_a_crawl_and_embedded_captures_have_none(tmp_path: Path) -> None:
    assert capture_row(fetched("/").capture)[-2:] == (None, None)  # type: ignore[arg-type]
    conn = connect(tmp_path / "crawl.db")
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)
        columns = {name for _cid, name, *_ in conn.execute("PRAGMA table_info(captures)")}
        assert {"node", "ingest_key"} <= columns
        conn.execute("INSERT INTO captures(crawl_id, fp, url, fetched_at) VALUES (1, 1, 'http://a.test/', 0)")
        conn.execute("INSERT INTO captures(crawl_id, fp, url, fetched_at) VALUES (1, 1, 'http://a.test/', 1)")
        conn.execute("INSERT INTO captures(crawl_id, fp, url, fetched_at, ingest_key) VALUES (2, 1, 'u', 0, 'p1:1-0')")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(
                "INSERT INTO captures(crawl_id, fp, url, fetched_at, ingest_key) VALUES (2, 1, 'u', 1, 'p1:1-0')"
            )
        conn.execute("INSERT INTO captures(crawl_id, fp, url, fetched_at, ingest_key) VALUES (3, 1, 'u', 0, 'p1:1-0')")
    finally:
        conn.close()


def test_a_database_of_the_first_schema_is_migrated_with_its_captures(tmp_path: Path) -> None:
    old = sqlite3.connect(tmp_path / "crawl.db")
    old.executescript(f"{MIGRATIONS[0]}; PRAGMA user_version = 1;")
    old.execute("INSERT INTO captures(crawl_id, fp, url, fetched_at) VALUES (1, 1, 'http://a.test/', 0)")
    old.commit()
    old.close()
    conn = connect(tmp_path / "crawl.db")
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)
        assert conn.execute("SELECT url, node, ingest_key FROM captures").fetchall() == [("http://a.test/", None, None)]
    finally:
        conn.close()


def test_a_database_of_schema_10_keeps_its_in_links_in_their_own_table(tmp_path: Path) -> None:
    old = sqlite3.connect(tmp_path / "crawl.db")
    old.executescript(f"{';'.join(MIGRATIONS[:10])}; PRAGMA user_version = 10;")
    old.executemany("INSERT INTO links(crawl_id, src_fp, dst_fp) VALUES (1, ?, ?)", [(1, 3), (2, 3), (3, 1)])
    old.commit()
    old.close()
    conn = connect(tmp_path / "crawl.db")
    try:
        assert conn.execute("SELECT dst_fp, src_fp FROM links_in ORDER BY 1, 2").fetchall() == [(1, 3), (3, 1), (3, 2)]
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'links_dst'").fetchall() == []
    finally:
        conn.close()


def test_a_database_whose_drop_log_lists_taken_urls_is_cleaned_when_opened(tmp_path: Path) -> None:
    old = sqlite3.connect(tmp_path / "crawl.db")
    old.executescript(f"{';'.join(MIGRATIONS[:8])}; PRAGMA user_version = 8;")
    old.execute("INSERT INTO hosts(id, crawl_id, host) VALUES (1, 1, 'a.test')")
    old.execute(
        "INSERT INTO urls(crawl_id, fp, url, host_id, depth, kind, added_seq, discovered_at, updated_at) "
        "VALUES (1, 1, 'http://a.test/', 1, 0, 'seed', 0, 0, 0)"
    )
    old.execute("INSERT INTO dropped(crawl_id, fp, url, reason) VALUES (1, 1, 'http://a.test/', 'too-deep')")
    old.execute("INSERT INTO dropped(crawl_id, fp, url, reason) VALUES (1, 2, 'http://a.test/deep', 'too-deep')")
    old.commit()
    old.close()
    conn = connect(tmp_path / "crawl.db")
    try:
        assert conn.execute("SELECT url FROM dropped").fetchall() == [("http://a.test/deep",)]
        conn.execute(  # found closer later: it leaves the log as it enters the crawl
            "INSERT INTO urls(crawl_id, fp, url, host_id, depth, kind, added_seq, discovered_at, updated_at) "
            "VALUES (1, 2, 'http://a.test/deep', 1, 1, 'link', 0, 0, 0)"
        )
        assert conn.execute("SELECT url FROM dropped").fetchall() == []
    finally:
        conn.close()
