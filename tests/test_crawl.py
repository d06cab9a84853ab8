"""End-to-end crawls of the generated test site, in process: what a user sees in the crawl directory."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

from tests.crawls import (
    check_warcs,
    connect,
    dropped,
    fast_config,
    fetched_depths,
    last_statuses,
    request_counts,
)
from tests.sites import SiteServer
from webtrawl import Crawler, IdentityMismatch, ScopeConfig, StoreLocked
from webtrawl.parse.guarded import OFFLOAD_AFTER
from webtrawl.store.db import DirectoryLock
from webtrawl.store.export import export
from webtrawl.store.shards import source_of

RETRIED = "/broken/"
"""The test site's page that always answers 500: fetched once per attempt."""


async def crawl_site(server: SiteServer, out: Path, **settings: object):
    config = fast_config(server.url, out, max_depth=server.site.deepest, **settings)
    return await Crawler(config).run()


async def test_crawl_fetches_exactly_the_ground_truth_once(site_server: SiteServer, tmp_path: Path) -> None:
    site = site_server.site
    expected = site.expect(max_depth=site.deepest)
    # More pages than a run reads inline: the rest are read in the parse worker process, to the same result.
    assert len(expected.fetched) > OFFLOAD_AFTER
    report = await crawl_site(site_server, tmp_path)

    assert report.outcome == "finished"
    assert fetched_depths(tmp_path) == expected.fetched
    assert last_statuses(tmp_path) == expected.status
    counts = request_counts(site_server.log)
    assert {path for path, n in counts.items() if n > 1} == {RETRIED}
    assert counts[RETRIED] == 4  # max_attempts
    assert set(counts) == set(expected.fetched)
    # nothing outside the scope or disallowed by robots.txt was requested
    assert {r.host for r in site_server.log} == {site.host}
    assert not set(counts) & expected.robots_blocked
    # every response is archived once, robots.txt and the sitemap guessed at included
    assert check_warcs(tmp_path) == len(site_server.log)


async def test_drops_are_recorded_with_their_reason(site_server: SiteServer, tmp_path: Path) -> None:
    site = site_server.site
    expected = site.expect(max_depth=site.deepest)
    report = await crawl_site(site_server, tmp_path)

    assert dropped(tmp_path, "out-of-scope") == set(expected.dropped["scope"])
    assert dropped(tmp_path, "binary-extension") == set(expected.dropped["binary"])
    assert dropped(tmp_path, "repeated-path-segments") == set(expected.dropped["repeated-segments"])
    too_deep = dropped(tmp_path, "too-deep")
    assert too_deep >= expected.dropped["depth"]
    # robots.txt is read when a URL is fetched, not when it is found: one found only too deep is a drop
    assert too_deep - expected.dropped["depth"] <= expected.dropped["robots"]
    blocked = {
        url
        for (url,) in connect(tmp_path).execute(
            "SELECT url FROM urls WHERE state = 3 AND reason = 'blocked by robots.txt'"
        )
    }
    assert blocked == set(expected.dropped["robots"])
    assert report.drops["out-of-scope"] == len(expected.dropped["scope"])
    assert report.failures["blocked by robots.txt"] == len(expected.dropped["robots"])


async def test_frontier_hands_out_breadth_first(site_server: SiteServer, tmp_path: Path) -> None:
    """Per host, no URL was handed out while a fetchable URL of smaller depth was known and waiting."""
    await crawl_site(site_server, tmp_path)
    rows = (
        connect(tmp_path)
        .execute("SELECT host_id, depth, added_seq, claim_seq, attempts FROM urls WHERE claim_seq IS NOT NULL")
        .fetchall()
    )
    by_host = defaultdict(list)
    for row in rows:
        by_host[row[0]].append(row)
    violations = [
        (u, v)
        for urls in by_host.values()
        for u in urls
        for v in urls
        if v[1] < u[1] and v[4] == 1 and v[2] < u[3] < v[3]
    ]
    assert not violations
    assert len(rows) > 300


async def test_max_pages_then_resume_completes_without_refetching(site_server: SiteServer, tmp_path: Path) -> None:
    site = site_server.site
    first = await crawl_site(site_server, tmp_path, max_pages=60)
    assert first.outcome == "max-pages"
    assert first.done_total == 60
    again = await crawl_site(site_server, tmp_path, max_pages=60)
    assert again.outcome == "max-pages" and again.pages == 0

    final = await crawl_site(site_server, tmp_path)
    assert final.outcome == "finished"
    assert fetched_depths(tmp_path) == site.expect(max_depth=site.deepest).fetched
    counts = request_counts(site_server.log)
    assert {path for path, n in counts.items() if n > 1} <= {RETRIED}
    check_warcs(tmp_path)


async def test_resume_with_another_scope_is_refused(site_server: SiteServer, tmp_path: Path) -> None:
    await crawl_site(site_server, tmp_path, max_pages=5)
    config = fast_config(site_server.url, tmp_path, max_depth=site_server.site.deepest)
    changed = replace(config, scope=ScopeConfig(max_depth=site_server.site.deepest, deny=("/x/",)))
    with pytest.raises(IdentityMismatch, match=r"scope\.deny"):
        await Crawler(changed).run()
    # tunables may change
    await Crawler(replace(config, concurrency=3, max_pages=10)).run()


async def test_a_crawl_whose_identity_lists_a_seed_twice_resumes(site_server: SiteServer, tmp_path: Path) -> None:
    """Coordinators used to keep a seed given twice twice in the identity they stored: such a crawl resumes."""
    await crawl_site(site_server, tmp_path, max_pages=2)
    db = sqlite3.connect(tmp_path / "crawl.db")
    (stored,) = db.execute("SELECT identity FROM crawls").fetchone()
    identity = json.loads(stored)
    identity["seeds"] = identity["seeds"] * 2
    with db:
        db.execute("UPDATE crawls SET identity = ?", (json.dumps(identity),))
    db.close()
    report = await crawl_site(site_server, tmp_path)
    assert report.outcome == "finished"


async def test_second_process_on_the_same_directory_is_refused(site_server: SiteServer, tmp_path: Path) -> None:
    lock = DirectoryLock(tmp_path)
    lock.acquire()
    try:
        with pytest.raises(StoreLocked, match="in use by a running crawl"):
            await crawl_site(site_server, tmp_path)
    finally:
        lock.release()


ADOPTING = """
import sys
from pathlib import Path
from webtrawl.store.db import DirectoryLock
DirectoryLock(Path(sys.argv[1]), adopted=int(sys.argv[2])).acquire()
print("holding", flush=True)
sys.stdin.read()
"""
"""A child process started with a held lock's descriptor, as `crawl --redis` starts its node: it opens the
directory as its own, then lives until its stdin closes."""


async def test_a_lock_handed_to_a_child_process_holds_the_directory_until_both_are_gone(
    site_server: SiteServer, tmp_path: Path
) -> None:
    """The parent let go of it (a parent killed with kill -9 closes its descriptor just so): the directory
    stays locked, in the parent's name, until the child is gone too."""
    lock = DirectoryLock(tmp_path)
    lock.acquire()
    command = [sys.executable, "-c", ADOPTING, str(tmp_path), str(lock.fd)]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=(lock.fd,)
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline() == "holding\n"
        lock.release()
        with pytest.raises(StoreLocked, match=rf"in use by a running crawl \(pid {os.getpid()}\)"):
            await crawl_site(site_server, tmp_path)
    # The child has read the end of its stdin and exited.
    assert not DirectoryLock.held(tmp_path)


async def test_named_crawls_share_a_directory_without_mixing(site_server: SiteServer, tmp_path: Path) -> None:
    await crawl_site(site_server, tmp_path, name="one", max_pages=10)
    await crawl_site(site_server, tmp_path, name="two", max_pages=20)
    conn = connect(tmp_path)
    done = dict(
        conn.execute(
            "SELECT c.name, COUNT(*) FROM urls u JOIN crawls c ON c.id = u.crawl_id WHERE state = 2 GROUP BY c.name"
        )
    )
    assert done == {"one": 10, "two": 20}
    names = sorted(p.name.split("-")[0] for p in (tmp_path / "warc").glob("*.warc.gz"))
    assert names == ["one", "two"]


async def test_every_fetched_page_is_searchable_by_its_words(site_server: SiteServer, tmp_path: Path) -> None:
    site = site_server.site
    await crawl_site(site_server, tmp_path)
    conn = connect(tmp_path)
    fetched = fetched_depths(tmp_path)
    pages = [(path, info) for path, info in site.pages.items() if path in fetched and info.word]
    assert len(pages) > 250
    for path, info in pages:
        hits = conn.execute("SELECT url FROM captures_fts WHERE captures_fts MATCH ?", (info.word,)).fetchall()
        assert hits == [(site.url(path),)], info.word
    (unindexed,) = conn.execute("SELECT COUNT(*) FROM captures WHERE id > (SELECT upto FROM fts_progress)").fetchone()
    assert unindexed == 0


async def test_every_failed_capture_has_its_reason_in_the_export(site_server: SiteServer, tmp_path: Path) -> None:
    await crawl_site(site_server, tmp_path)
    rows = io.StringIO()
    export([source_of(connect(tmp_path), "default")], "jsonl", rows)
    captures = [(row["url"], row["status"], row["error"]) for row in map(json.loads, rows.getvalue().splitlines())]
    failed = [(url, status, error) for url, status, error in captures if status is not None and status >= 400]
    assert {status for _url, status, _error in failed} >= {404, 500}
    assert [(url, status, error) for url, status, error in failed if error != f"HTTP {status}"] == []
    assert [url for url, status, error in captures if status is None and not error] == []


async def test_the_drop_log_holds_exactly_the_urls_refused_and_never_taken(
    site_server: SiteServer, tmp_path: Path
) -> None:
    site = site_server.site
    expected = site.expect(max_depth=2)
    report = await Crawler(fast_config(site_server.url, tmp_path, max_depth=2)).run()
    conn = connect(tmp_path)
    # Pages two levels down link back to the seed and to pages at depth 1: those links are refused as too
    # deep there, but the URLs were taken from closer pages.
    too_deep = dropped(tmp_path, "too-deep")
    assert too_deep >= expected.dropped["depth"]
    # robots.txt is read when a URL is fetched, not when it is found: one found only too deep is a drop
    assert too_deep - expected.dropped["depth"] <= expected.dropped["robots"]
    assert conn.execute("SELECT COUNT(*) FROM dropped d JOIN urls u USING (crawl_id, fp)").fetchone() == (0,)
    (in_table,) = conn.execute("SELECT COUNT(*) FROM dropped").fetchone()
    assert sum(report.drops.values()) == in_table
