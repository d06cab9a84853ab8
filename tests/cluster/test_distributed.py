"""A distributed crawl end to end: a coordinator that fetches too and two workers, real processes, a real Redis.

The crawl, read as its shards, must end up as an embedded crawl's would: every page captured once (server
errors are asked again, as their retries allow), every request the sites saw recorded, per-host limits
held across nodes.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import warnings
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from starlette.exceptions import StarletteDeprecationWarning

from tests.cluster.processes import (
    NAME,
    PER_HOST,
    Process,
    Sites,
    acks_left,
    captures,
    check_shards,
    coordinator,
    crawl_rows,
    unfinished,
    wait_for_crawl,
    worker,
)
from tests.redis_servers import RedisServer
from webtrawl.store.shards import Sources
from webtrawl.web.app import create_app
from webtrawl.web.site import Site as DashboardSite

with warnings.catch_warnings():
    # The test client prefers httpx2 to httpx (installed): a test tool's deprecation, not ours.
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient


@pytest.mark.slow
def test_a_coordinator_and_two_workers_crawl_every_page_once(tmp_path: Path) -> None:
    with Sites() as sites, RedisServer() as server:
        coord = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        workers = [worker(server.url, tmp_path / f"w{i}") for i in range(2)]
        code, stdout, stderr = coord.finish()
        assert code == 0, stderr
        assert stdout.startswith("finished: "), stdout
        for process in workers:
            code, _out, err = process.finish()
            assert code == 0, err
        status = Process(tmp_path / "logs", "status", "status", "--redis", server.url, "--name", NAME)
        code, shown, err = status.finish(30)
        assert code == 0, err
        expected, hits = sites.expected(), sites.hits()
        in_flight = [max(server.max_in_flight.values()) for server in sites.servers]
        assert acks_left(server.url) == 0  # each node, its shard settled, took its acknowledgements away

    captured = captures(tmp_path / "coord")
    assert set(captured) == expected
    assert unfinished(tmp_path / "coord") == 0
    assert hits == captured  # every request has its capture, none counted twice (only 5xx pages are asked again)
    assert max(in_flight) <= PER_HOST
    nodes = {node for (node,) in crawl_rows(tmp_path / "coord", "SELECT node FROM captures WHERE crawl_id = ?")}
    assert nodes == {"node-01", "node-02", "node-03"}  # every node got work, the workers joining after the start
    hosts = {url.split("/", 3)[2] for url in captured}
    robots = {f"http://{host}/robots.txt" for host in hosts}
    assert "crawl 'dist' (finished)" in shown
    counts = {line.split()[0]: line.split()[1] for line in shown.splitlines()[1:6]}
    done = {url for (url,) in crawl_rows(tmp_path / "coord", "SELECT url FROM urls WHERE crawl_id = ? AND state = 2")}
    assert counts["done"] == f"{len(done):,}" and counts["waiting"] == counts["running"] == "0"
    for node in ("node-01", "node-02", "node-03"):
        assert node in shown
    assert "Bloom filters:" in shown and "estimated URLs lost to false positives" in shown
    check_shards(tmp_path / "coord", tmp_path / "w0", tmp_path / "w1")  # each node indexed what it fetched
    in_shards = set()
    for directory in ("coord", "w0", "w1"):
        shard = sqlite3.connect(tmp_path / directory / "node.db")
        in_shards |= {url for (url,) in shard.execute("SELECT url FROM resources WHERE status = 200 AND site_file")}
        shard.close()
    assert in_shards == robots  # and the robots.txt files it read for the crawl, archived by their nodes
    # Export reads the shards: every capture once, and the CDXJ lines of every response, in order.
    code, exported, err = webtrawl(tmp_path, "export", tmp_path / "coord", "--format", "jsonl")
    assert code == 0 and err == "", err
    assert Counter(json.loads(line)["url"] for line in exported.splitlines()) == captured
    code, exported, err = webtrawl(tmp_path, "export", tmp_path / "coord", "--format", "cdxj")
    assert code == 0 and err == "", err
    archived = crawl_rows(tmp_path / "coord", "SELECT url FROM captures WHERE crawl_id = ? AND warc_file IS NOT NULL")
    archived += crawl_rows(tmp_path / "coord", "SELECT url FROM resources WHERE crawl_id = ? AND warc_file IS NOT NULL")
    assert Counter(json.loads(line.split(" ", 2)[2])["url"] for line in exported.splitlines()) == Counter(
        url for (url,) in archived
    )
    assert exported.splitlines() == sorted(exported.splitlines(), key=lambda line: line.split(" ", 2)[:2])
    # `show` reads a page's record in the directory of the node that fetched it, given the coordinator's.
    [(url,)] = crawl_rows(
        tmp_path / "coord", "SELECT url FROM captures WHERE crawl_id = ? AND node = 'node-02' AND status = 200 LIMIT 1"
    )
    with Sources.open(tmp_path / "coord", NAME) as shards:  # the first page each node fetched, named crawl-wide
        fetched_by = {
            node: shards.capture_id(source, local)
            for source in shards.all
            for node, local in source.conn.execute(
                "SELECT node, MIN(id) FROM captures WHERE status = 200 AND content_type = 'text/html' GROUP BY node"
            )
        }
    assert set(fetched_by) == {"node-01", "node-02", "node-03"}
    # The dashboard shows the archived copy of a page whichever node fetched it: its WARC file in that node's.
    dashboard = TestClient(create_app(DashboardSite(tmp_path / "coord", name=NAME)))
    for node, capture_id in fetched_by.items():
        copy = dashboard.get(f"/archive/{capture_id}/raw")
        assert copy.status_code == 200 and b"<html" in copy.content.lower(), node
    assert "cannot be read from this machine" not in dashboard.get("/").text
    code, shown_page, err = webtrawl(tmp_path, "show", tmp_path / "coord", url, "--decoded")
    assert code == 0, err
    assert shown_page.startswith("HTTP/1.1 200")
    # The WACZ package holds every node's WARC files.
    code, _out, err = webtrawl(tmp_path, "export", tmp_path / "coord", "--format", "wacz", "-o", tmp_path / "c.wacz")
    assert code == 0, err
    with zipfile.ZipFile(tmp_path / "c.wacz") as package:
        packed = {Path(name).name for name in package.namelist() if name.startswith("archive/")}
    per_node = [{p.name for p in (tmp_path / d / "warc").glob("*.warc.gz")} for d in ("coord", "w0", "w1")]
    assert all(per_node) and packed == set().union(*per_node)
    # The coordinator's directory lists every shard; one this machine cannot read is named.
    listed = json.loads((tmp_path / "coord" / "shards.json").read_text())
    assert sorted(Path(shard["path"]) for shard in listed) == sorted(
        (tmp_path / d).resolve() for d in ("coord", "w0", "w1")
    )
    (tmp_path / "w1").rename(tmp_path / "w1-moved")
    code, shown, err = Process(tmp_path / "logs", "status-dir", "status", tmp_path / "coord").finish(30)
    assert code == 0, err
    assert "shards            3" in shown
    per_shard = [line for line in shown.splitlines() if " captures (" in line and " at " in line]
    assert len(per_shard) == 2  # each shard it can read, with its captures and nodes
    unreachable = [line for line in shown.splitlines() if "cannot be read" in line]
    assert len(unreachable) == 1 and str((tmp_path / "w1").resolve()) in unreachable[0], shown
    code, exported, err = webtrawl(tmp_path, "export", tmp_path / "coord")
    assert code == 0 and "cannot be read here: its pages are left out" in err and len(err.splitlines()) == 1, err
    assert 0 < len(exported.splitlines()) < len(captured)
    code, _out, err = webtrawl(tmp_path, "export", tmp_path / "coord", "--format", "wacz", "-o", tmp_path / "d.wacz")
    assert code == 2 and "cannot be read here" in err and not (tmp_path / "d.wacz").exists()
    overview = dashboard.get("/").text
    assert "1 shard(s) of this crawl cannot be read from this machine" in overview
    assert str((tmp_path / "w1").resolve()) in overview
    lost = [f"{place['host']}:{place['path']}" for place in listed if place["path"] == str((tmp_path / "w1").resolve())]
    assert dashboard.get("/api/pages").json()["unreachable_shards"] == lost
    assert dashboard.get("/api/search", params={"q": "page"}).json()["unreachable_shards"] == lost
    moved = [capture_id for node, capture_id in fetched_by.items() if node in unreachable[0]]
    assert moved and dashboard.get(f"/archive/{moved[0]}/raw").status_code == 404
    merge_copied_shards(tmp_path)


def webtrawl(tmp_path: Path, *args: str | Path) -> tuple[int, str, str]:
    return Process(tmp_path / "logs", f"webtrawl-{args[0]}", *args).finish(60)


def merge_copied_shards(tmp_path: Path) -> None:
    """The shard of w1, moved where this machine cannot find it, is folded in from its copy; once only."""
    coord, listing = tmp_path / "coord", tmp_path / "coord" / "shards.json"
    # Bad input first: each is one line, and nothing changes.
    before = listing.read_text()
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "node.db").write_bytes(b"not a database" * 100)
    shutil.copytree(tmp_path / "w0", tmp_path / "other")
    db = sqlite3.connect(tmp_path / "other" / "node.db")
    db.execute("UPDATE crawls SET identity = json_set(identity, '$.seeds', json('[\"http://elsewhere.test/\"]'))")
    db.commit()
    db.close()
    for bad, says in [
        (tmp_path / "corrupt", "file is not a database"),
        (tmp_path / "other", "is a shard of another crawl"),
        (tmp_path / "nowhere", "holds no shard"),
    ]:
        code, _out, err = webtrawl(tmp_path, "merge", coord, bad)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
        assert listing.read_text() == before
    code, out, err = webtrawl(tmp_path, "merge", coord, tmp_path / "w1-moved")
    assert code == 0, err
    assert "folded in as" in out
    with Sources.open(coord, NAME) as shards:
        assert len(shards.all) == 3 and shards.unreachable == []
        folded = {url for shard in shards.all for (url,) in shard.conn.execute("SELECT url FROM captures")}
    assert folded == set(captures(coord))  # every page of the crawl, read from the shards
    after = listing.read_text()
    code, out, err = webtrawl(tmp_path, "merge", coord, tmp_path / "w1-moved")
    assert code == 0 and "nothing changed" in out, err
    assert listing.read_text() == after
    code, shown, err = webtrawl(tmp_path, "status", coord)
    assert code == 0 and "cannot be read" not in shown, shown


@pytest.mark.slow
def test_an_embedded_crawl_goes_on_distributed_from_its_directory(tmp_path: Path) -> None:
    """One machine was not enough: the same crawl directory, run with --redis, rebuilds the crawl in Redis from
    its index and crawls the rest, fetching nothing twice."""
    with Sites() as sites, RedisServer() as server:
        embedded = Process(
            tmp_path / "logs", "embedded", "crawl", *sites.seeds, "--name", NAME, "--out", tmp_path / "coord",
            "--delay", "0", "--per-host", PER_HOST, "--retries", "1", "--max-pages", "200", "-q",
        )  # fmt: skip
        code, out, err = embedded.finish()
        assert code == 0, err
        assert out.startswith("max-pages: ")
        before = captures(tmp_path / "coord")
        coord = coordinator(sites, server.url, tmp_path / "coord")
        code, out, err = coord.finish()
        assert code == 0, err
        assert out.startswith("finished: ")
        hits = sites.hits()
    captured = captures(tmp_path / "coord")
    assert set(before) < set(captured) == sites.expected()
    assert unfinished(tmp_path / "coord") == 0
    assert hits == captured  # one request per capture, in either run
    # Its export holds the pages of both runs, each once (the embedded run's are in no node's shard).
    code, exported, err = webtrawl(tmp_path, "export", tmp_path / "coord")
    assert code == 0, err
    assert Counter(json.loads(line)["url"] for line in exported.splitlines()) == captured
