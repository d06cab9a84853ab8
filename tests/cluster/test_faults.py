"""A distributed crawl survives its processes and its Redis failing: nothing lost, little fetched twice.

Every test runs real processes against slowed test sites (so the crawl is still going when the fault
strikes) and checks the coordinator's index at the end: every page captured, nothing left unfinished.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from tests.cluster.processes import (
    KEYS,
    NAME,
    Sites,
    acks_left,
    captures,
    check_complete,
    check_shards,
    coordinator,
    crawl_rows,
    done_in_redis,
    first_child,
    holders,
    node_of,
    node_pids,
    refetched,
    shard_captures,
    state,
    wait_for_crawl,
    wait_for_done,
    wait_until_gone,
    worker,
)
from tests.redis_servers import RedisServer
from webtrawl.cluster.coordinator import RESTORE_MARK
from webtrawl.store.shard import StageFile

pytestmark = pytest.mark.slow

TTL = 3.0
WORKER_CONCURRENCY = 4
DELAY = 0.1
PAGES = 50


def responses_by_node(out: Path) -> dict[str, int]:
    """Captures with a response in the crawl's shards, per node that fetched them."""
    return dict(
        Counter(
            node for (node,) in crawl_rows(out, "SELECT node FROM captures WHERE crawl_id = ? AND status IS NOT NULL")
        )
    )


def ended(out: Path) -> set[str]:
    """URLs the crawl's shards have done or failed."""
    return {url for (url,) in crawl_rows(out, "SELECT url FROM urls WHERE crawl_id = ? AND state IN (2, 3)")}


def test_a_killed_worker_loses_nothing_and_its_partitions_pass_on(tmp_path: Path) -> None:
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        coord = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        victim, survivor = (
            worker(server.url, tmp_path / f"w{i}", "--concurrency", WORKER_CONCURRENCY) for i in range(2)
        )
        dead = node_of(server.url, victim.pid)
        wait_for_done(server.url, 200)
        deadline = time.monotonic() + 20
        # It holds partitions when it dies, and the index has pages it fetched.
        while dead not in holders(server.url).values() or dead not in responses_by_node(tmp_path / "coord"):
            assert time.monotonic() < deadline, "the worker never held a partition"
            time.sleep(0.1)
        os.kill(victim.pid, signal.SIGKILL)
        killed = time.monotonic()
        victim.popen.wait()
        while dead in holders(server.url).values():
            time.sleep(0.1)
        taken_over = time.monotonic() - killed
        code, out, _err = coord.finish()
        assert code == 0
        assert survivor.finish()[0] == 0
        check_complete(sites, tmp_path / "coord")
    assert taken_over <= TTL + 5
    assert refetched(tmp_path / "coord") == set()  # what it had in flight was fetched again, recorded once
    # The run's pages are what the index gathered, the killed node's included, each node's under its id.
    gathered = responses_by_node(tmp_path / "coord")
    assert out.startswith(f"finished: {sum(gathered.values())} pages"), out
    nodes = json.loads((tmp_path / "coord" / f"{NAME}-nodes.json").read_text())
    assert {node: row["pages"] for node, row in nodes.items()} == gathered
    assert nodes[dead]["outcome"] == "lost"
    assert {row["outcome"] for node, row in nodes.items() if node != dead} == {"finished"}
    check_shards(tmp_path / "coord", tmp_path / "w1", dead=tmp_path / "w0")
    assert {node for _url, node, _at in shard_captures(tmp_path / "w0", settled=False)} == {dead}


@pytest.mark.parametrize("point", ["after-stage", "before-settle"])
def test_a_node_killed_between_its_shard_and_redis_settles_its_batch_when_restarted(
    tmp_path: Path, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after staging a batch (Redis has not seen it) or after Redis accepted it (its shard has not
    written it), a node restarted in its directory writes exactly what Redis accepted into its shard."""
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        coord = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        monkeypatch.setenv("WEBTRAWL_CRASH_AT", f"{point}:3")
        crashing = worker(server.url, tmp_path / "w0", "--concurrency", WORKER_CONCURRENCY)
        monkeypatch.delenv("WEBTRAWL_CRASH_AT")
        assert crashing.popen.wait(120) == -signal.SIGKILL
        assert StageFile(tmp_path / "w0").read()  # it died with a batch staged
        restarted = worker(server.url, tmp_path / "w0", "--concurrency", WORKER_CONCURRENCY)
        assert coord.finish()[0] == 0
        code, _out, err = restarted.finish()
        assert code == 0, err
        check_complete(sites, tmp_path / "coord")
        assert acks_left(server.url) == 0  # the killed node's went once its batch was settled
    check_shards(tmp_path / "coord", tmp_path / "w0")
    # The killed node's captures and its successor's, both ids, in the one shard of the directory.
    assert len({node for _url, node, _at in shard_captures(tmp_path / "w0")}) == 2


def test_a_node_stopped_past_its_lease_completes_nothing_for_the_partitions_it_lost(tmp_path: Path) -> None:
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        coord = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        stalled = worker(server.url, tmp_path / "w0", "--concurrency", WORKER_CONCURRENCY)
        node = node_of(server.url, stalled.pid)
        wait_for_done(server.url, 200)
        while node not in holders(server.url).values():
            time.sleep(0.1)
        os.kill(stalled.pid, signal.SIGSTOP)
        time.sleep(TTL + 3)  # its leases expire and the coordinator's node takes its partitions over
        assert node not in holders(server.url).values()
        os.kill(stalled.pid, signal.SIGCONT)
        assert coord.finish()[0] == 0
        code, _out, err = stalled.finish()
        assert code == 0, err
        check_complete(sites, tmp_path / "coord")
        hits = sites.hits()
    assert "lost the lease" in err
    # What it had in flight when it stopped (fetching, or fetched and waiting for its batch) was fetched again
    # by the node that took over; those results from the stalled node were refused and said so, so every
    # page has one capture for each request but those. (A refused result may be one that made no request: a
    # URL robots.txt disallows fails without one; the node counts the fetched ones apart.)
    assert refetched(tmp_path / "coord") == set()
    refused = re.findall(r"result\(s\) not recorded \((\d+) of them fetched\): its lease passed", err)
    assert sum(hits.values()) - sum(captures(tmp_path / "coord").values()) == sum(map(int, refused))
    check_shards(tmp_path / "coord", tmp_path / "w0")  # the refused results never entered its shard


def test_redis_killed_and_restarted_mid_crawl_loses_nothing(tmp_path: Path) -> None:
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        coord = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w0", "--concurrency", WORKER_CONCURRENCY)
        wait_for_done(server.url, 200)
        time.sleep(1.5)  # the AOF is written every second
        server.kill()
        time.sleep(2)
        server.restart()
        code, _out, err = coord.finish()
        assert code == 0, err
        assert "Redis unreachable" in err and "Redis answers again" in err
        assert helper.finish()[0] == 0
        check_complete(sites, tmp_path / "coord")


def test_redis_gone_while_the_coordinators_node_starts_pauses_the_crawl_instead_of_failing_it(tmp_path: Path) -> None:
    """Redis goes (an administrator restarts it) as the coordinator starts its node, after the coordinator has
    created the crawl and before the node has joined it: the node waits for Redis, as its coordinator does."""
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        coord = coordinator(sites, server.url, tmp_path / "coord")
        node = first_child(coord.pid)  # just started: it loads its modules, long before it connects to Redis
        server.shut_down()
        deadline = time.monotonic() + 30
        # Until it says it waits for Redis, or it has exited (the crawl then fails with it).
        while "Redis unreachable while connecting" not in coord.stderr_path.read_text() and state(node) is not None:
            assert time.monotonic() < deadline, coord.stderr_path.read_text()
            time.sleep(0.1)
        server.restart()
        code, _out, err = coord.finish()
        assert code == 0, err
        assert "Redis unreachable while connecting" in err and "Redis answers again (connecting)" in err
        assert "Traceback" not in err
        check_complete(sites, tmp_path / "coord")


def test_redis_full_mid_crawl_makes_the_crawl_wait_and_loses_nothing(tmp_path: Path) -> None:
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server, redis.Redis.from_url(server.url) as admin:
        coord = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w0", "--concurrency", WORKER_CONCURRENCY)
        wait_for_done(server.url, 200)
        admin.config_set("maxmemory", admin.info("memory")["used_memory"])  # full: every write is refused
        time.sleep(4)
        assert coord.popen.poll() is None and helper.popen.poll() is None, "both wait for room"
        admin.config_set("maxmemory", 0)
        code, _out, err = coord.finish()
        assert code == 0, err
        assert "Redis is full (maxmemory)" in err and "raise its maxmemory" in err
        assert "Traceback" not in err
        assert helper.finish()[0] == 0
        check_complete(sites, tmp_path / "coord")


@pytest.mark.parametrize(("loss", "partition_by"), [("restart without AOF", "host"), ("FLUSHALL", "url")])
def test_a_crawl_redis_forgot_ends_with_one_line_and_goes_on_from_the_coordinators_index(
    tmp_path: Path, loss: str, partition_by: str
) -> None:
    """Redis lost the crawl mid-crawl: nodes must not wait for ever in an empty crawl, nor write into it (nor take
    its empty partitions); the same command again rebuilds the crawl in Redis from the index, and fetches
    nothing the index had. Partitioned by URL, every node meets links other nodes fetched: a node still adding
    them to the empty Redis would have them taken as seen, and fetched again, by the rebuilt crawl."""
    layout = ("--partition-by", partition_by)
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer(appendonly=False) as server:
        coord = coordinator(sites, server.url, tmp_path / "coord", *layout)
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w0", "--concurrency", WORKER_CONCURRENCY)
        wait_for_done(server.url, 200)
        if loss == "FLUSHALL":
            with redis.Redis.from_url(server.url) as admin:
                admin.flushall()
        else:
            server.kill()
            server.restart()
        gone = f"crawl {KEYS.name!r} is no longer in Redis: Redis lost it"
        for process in (coord, helper):
            code, _out, err = process.finish()
            assert code == 2, err
            assert err.splitlines()[-1].startswith(f"webtrawl: error: {gone}"), err
            assert err.splitlines()[-1].endswith("Run Redis with appendonly yes to keep a crawl across restarts")
            assert "Traceback" not in err
        with redis.Redis.from_url(server.url) as client:
            written = client.keys("{dist:p*") + client.keys("{dist:scope*")
            assert written == [], "nodes of the lost crawl wrote into its frontier or scope in the empty Redis"
        gathered = captures(tmp_path / "coord")
        assert gathered and set(gathered) <= sites.expected(), "what was gathered stays in the index"
        had = ended(tmp_path / "coord")
        fetched_before = sites.hits()

        coord = coordinator(sites, server.url, tmp_path / "coord", *layout)
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w1", "--concurrency", WORKER_CONCURRENCY)
        code, _out, err = coord.finish()
        assert code == 0, err
        assert helper.finish()[0] == 0
        check_complete(sites, tmp_path / "coord")
        fetched_again = {url for url in had if sites.hits()[url] > fetched_before[url]}
    assert fetched_again == set(), f"{len(fetched_again)} page(s) the index had were fetched again"
    # The URLs in flight when Redis was lost were fetched again, but their first results never reached the
    # index: every page has one capture.
    assert refetched(tmp_path / "coord") == set()


def shards_ended(*directories: Path) -> set[str]:
    """URLs done or failed in the node shards in `directories`."""
    urls: set[str] = set()
    for directory in directories:
        db = sqlite3.connect(directory / "node.db")
        try:
            urls |= {url for (url,) in db.execute("SELECT url FROM urls WHERE state IN (2, 3)")}
        finally:
            db.close()
    return urls


def test_a_crawl_redis_forgot_is_rebuilt_from_its_shards(tmp_path: Path) -> None:
    """Redis flushed mid-crawl, then a coordinator started in a new directory that lists the old crawl's
    shards (`shards.json`) and nothing else: the shards alone rebuild the crawl, which fetches nothing they
    had, and every page ends in some shard."""
    layout = ("--partition-by", "url")
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer(appendonly=False) as server:
        coord = coordinator(sites, server.url, tmp_path / "coord", *layout)
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w0", "--concurrency", WORKER_CONCURRENCY)
        wait_for_done(server.url, 200)
        while (
            not (tmp_path / "coord" / "shards.json").exists()
            or len(json.loads((tmp_path / "coord" / "shards.json").read_text())) < 2
        ):
            time.sleep(0.1)
        with redis.Redis.from_url(server.url) as admin:
            admin.flushall()
        for process in (coord, helper):
            assert process.finish()[0] == 2
        had = shards_ended(tmp_path / "coord", tmp_path / "w0")
        assert had
        fetched_before = sites.hits()

        (tmp_path / "again").mkdir()
        (tmp_path / "again" / "shards.json").write_text((tmp_path / "coord" / "shards.json").read_text())
        coord = coordinator(sites, server.url, tmp_path / "again", *layout)
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w1", "--concurrency", WORKER_CONCURRENCY)
        code, _out, err = coord.finish()
        assert code == 0, err
        assert helper.finish()[0] == 0
        fetched_again = {url for url in had if sites.hits()[url] > fetched_before[url]}
        expected = sites.expected()
    assert fetched_again == set(), f"{len(fetched_again)} page(s) the shards had were fetched again"
    shards = [tmp_path / d for d in ("coord", "w0", "again", "w1")]
    assert {url for d in shards for url, _node, _at in shard_captures(d, settled=False)} == expected


def settled_any(directory: Path) -> bool:
    """Whether the node shard in `directory` holds an ended URL yet (its node may still be creating it)."""
    try:
        return (directory / "node.db").exists() and bool(shards_ended(directory))
    except sqlite3.OperationalError:  # its tables are not there yet
        return False


def test_a_crawl_redis_forgot_is_rebuilt_without_a_shard_it_cannot_read_only_when_told_to(tmp_path: Path) -> None:
    """Redis flushed mid-crawl, and the worker's shard moved away: the coordinator names the shard and changes
    nothing; told `--refetch-lost`, it rebuilds the crawl from its own shard, and what the lost one held is
    fetched again: every page ends in a shard it can read."""
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer(appendonly=False) as server:
        coord = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w0", "--concurrency", WORKER_CONCURRENCY)
        deadline = time.monotonic() + 60
        while not settled_any(tmp_path / "w0"):
            assert time.monotonic() < deadline, "the worker settled nothing in its shard"
            time.sleep(0.1)
        with redis.Redis.from_url(server.url) as admin:
            admin.flushall()
        for process in (coord, helper):
            assert process.finish()[0] == 2
        lost = shards_ended(tmp_path / "w0")
        (tmp_path / "w0").rename(tmp_path / "elsewhere")

        code, _out, err = coordinator(sites, server.url, tmp_path / "coord").finish()
        assert code == 2, err
        last = err.splitlines()[-1]
        assert last.startswith(
            f"webtrawl: error: crawl {NAME!r} is to be rebuilt in Redis from its shards, but 1 of"
        ), err
        assert str((tmp_path / "w0").resolve()) in last and "--refetch-lost" in last and "Traceback" not in err
        with redis.Redis.from_url(server.url) as client:
            assert client.hexists(KEYS.meta, RESTORE_MARK), "a refused restore was taken as done"
            assert set(client.keys("{dist:p*")) == {KEYS.counters(p).encode() for p in range(16)}, "URLs went back"

        coord = coordinator(sites, server.url, tmp_path / "coord", "--refetch-lost")
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w1", "--concurrency", WORKER_CONCURRENCY)
        code, _out, err = coord.finish()
        assert code == 0, err
        assert helper.finish()[0] == 0
        assert "rebuilding crawl 'dist' without the shard at" in err
        check_complete(sites, tmp_path / "coord")
    assert lost and lost <= ended(tmp_path / "coord"), "what the lost shard held was not fetched again"


def test_a_flushed_redis_that_keeps_its_data_on_disk_is_not_told_to(tmp_path: Path) -> None:
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:  # appendonly yes
        coord = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w0", "--concurrency", WORKER_CONCURRENCY)
        wait_for_done(server.url, 20)
        with redis.Redis.from_url(server.url) as admin:
            admin.flushall()
        for process in (coord, helper):
            code, _out, err = process.finish()
            assert code == 2, err
            last = err.splitlines()[-1]
            assert last.startswith(f"webtrawl: error: crawl {KEYS.name!r} is no longer in Redis"), err
            assert last.endswith("Redis keeps its data on disk (appendonly yes): it was flushed (FLUSHALL, FLUSHDB) "
                                 "or lost its files")  # fmt: skip


def test_a_restarted_coordinator_gathers_every_capture_once(tmp_path: Path) -> None:
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        first = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w0", "--concurrency", WORKER_CONCURRENCY)
        wait_for_done(server.url, 200)
        own_node = next(pid for pid in node_pids(server.url) if pid != helper.pid)  # the coordinator's child
        os.kill(first.pid, signal.SIGKILL)
        first.popen.wait()
        wait_until_gone(own_node)  # with its coordinator, as if it lived in its process
        second = coordinator(sites, server.url, tmp_path / "coord")  # waits for the dead one's lease to expire
        code, _out, err = second.finish()
        assert code == 0, err
        assert helper.finish()[0] == 0
        check_complete(sites, tmp_path / "coord")
    assert refetched(tmp_path / "coord") == set()  # one capture per fetch, though results were read twice


def test_pause_resume_and_stop_from_the_command_line(tmp_path: Path) -> None:
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        coord = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w0", "--concurrency", WORKER_CONCURRENCY)
        wait_for_done(server.url, 100)

        def control(command: str, *obeyed: str) -> None:
            from tests.cluster.processes import Process

            code, out, err = Process(tmp_path / "logs", command, "control", command, "--redis", server.url,
                                     "--name", NAME).finish(30)  # fmt: skip
            assert code == 0, err
            first, *nodes = out.splitlines()
            assert first == f"crawl {NAME!r}: {command} sent"
            assert len(nodes) == 2 and all(line.split()[1] in obeyed for line in nodes), out  # both nodes obeyed

        control("pause", "paused")
        time.sleep(2 + 1)  # obeyed within 2 s; fetches in flight end
        paused_at = sum(sites.hits().values())
        time.sleep(2)
        assert sum(sites.hits().values()) == paused_at  # nothing fetched while paused
        control("resume", "running")
        time.sleep(3)
        assert sum(sites.hits().values()) > paused_at
        control("stop", "stopping", "left")
        code, out, err = coord.finish(30)
        assert code == 0, err
        assert out.startswith("stopped: "), out
        assert helper.finish(30)[0] == 0
        assert done_in_redis(server.url) < len(sites.expected())  # it stopped before the end


def test_max_pages_stops_every_node_and_ctrl_c_stops_one(tmp_path: Path) -> None:
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        coord = coordinator(sites, server.url, tmp_path / "coord", "--max-pages", "300")
        wait_for_crawl(server.url)
        leaving, staying = (
            worker(server.url, tmp_path / f"w{i}", "--concurrency", WORKER_CONCURRENCY) for i in range(2)
        )
        node = node_of(server.url, leaving.pid)
        wait_for_done(server.url, 100)
        os.kill(leaving.pid, signal.SIGINT)  # Ctrl-C: this worker leaves, the crawl goes on
        code, out, err = leaving.finish(30)
        assert code == 130, err
        assert "Traceback" not in err and out.startswith(f"{node}: interrupted: "), out
        assert node not in holders(server.url).values()  # it gave its partitions back on the way out
        code, out, err = coord.finish()
        assert code == 0, err
        assert out.startswith("max-pages: "), out
        assert staying.finish(30)[0] == 0
        assert 300 <= done_in_redis(server.url) < len(sites.expected())


def test_ctrl_c_while_a_coordinator_waits_for_the_lease_exits_at_once(tmp_path: Path) -> None:
    with Sites(pages=10) as sites, RedisServer() as server:
        with redis.Redis.from_url(server.url) as client:
            client.set(KEYS.coordinator, "another", px=60_000)  # a coordinator that may have died
        waiting = coordinator(sites, server.url, tmp_path / "coord", "--lease-ttl", "30")  # it waits up to 31 s
        for _ in range(300):  # until it says it waits, however slow the start
            if "waiting for it to expire" in waiting.stderr_path.read_text():
                break
            time.sleep(0.1)
        assert waiting.popen.poll() is None, waiting.stderr_path.read_text()
        os.kill(waiting.pid, signal.SIGINT)
        code, out, err = waiting.finish(10)
        assert code == 130, err
        assert "Traceback" not in err and "Aborted" not in err
        assert err.rstrip().endswith("interrupted: run the same command again to resume")
        assert out == ""
        with redis.Redis.from_url(server.url) as client:
            assert client.get(KEYS.coordinator) == b"another"  # not taken, not dropped
