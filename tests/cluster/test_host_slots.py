"""One site spread over every node (`--partition-by url`): its request slots, kept in Redis for the whole crawl,
come back when a node stops, dies or stalls past its lease, instead of holding the others below `--per-host`."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from tests.cluster.processes import KEYS, NAME, Process, captures, node_of, unfinished, wait_for_crawl, wait_for_done
from tests.cluster.processes import worker as start_worker
from tests.redis_servers import RedisServer, blocking_client
from tests.sites import SiteServer
from webtrawl.cluster.hostlimits import HOLD, SharedHostLimits
from webtrawl.cluster.keys import Keys
from webtrawl.cluster.redisconn import connect
from webtrawl.cluster.scripts import Scripts
from webtrawl.config import PolitenessConfig
from webtrawl.frontier.hosts import HostQueue
from webtrawl.politeness import Politeness
from webtrawl.urls import origin

PAGES = 600
DELAY = 0.05
"""Seconds each response takes, so a node always has requests (and slots) in flight."""
TTL = 3


@contextmanager
def served() -> Iterator[SiteServer]:
    """A slowed site served from a thread."""
    ready, stop, servers = threading.Event(), threading.Event(), []

    async def serve() -> None:
        async with SiteServer(pages=PAGES, calendar=False, delay=DELAY) as server:
            servers.append(server)
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(20)
    try:
        yield servers[0]
    finally:
        stop.set()
        thread.join(10)


def coordinator(site: SiteServer, url: str, out: Path) -> Process:
    return Process(
        out.parent / "logs", f"coordinator-{time.monotonic_ns()}",
        "crawl", site.url, "--redis", url, "--name", NAME, "--out", out, "--partition-by", "url",
        "--per-host", "4", "--delay", "0", "--concurrency", "4", "--partitions", "16", "--lease-ttl", TTL,
        "--retries", "1", "-q",
    )  # fmt: skip


def worker(url: str, out: Path) -> Process:
    return start_worker(url, out, "--concurrency", "4")


def slots(url: str, site: SiteServer) -> dict[str, int]:
    """The site's shared request slots now: slot id (`node-NN:seq`) → when it expires (ms, Redis' clock)."""
    with redis.Redis.from_url(url) as client:
        return {slot.decode(): int(expiry) for slot, expiry in client.zrange(KEYS.host_slots(origin(site.url)), 0, -1,
                                                                            withscores=True)}  # fmt: skip


def redis_now(url: str) -> int:
    with redis.Redis.from_url(url) as client:
        seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def held_by(node: str, url: str, site: SiteServer, timeout: float = 30) -> dict[str, int]:
    """The slots `node` holds, once it holds some."""
    deadline = time.monotonic() + timeout
    while not (mine := {slot: at for slot, at in slots(url, site).items() if slot.startswith(f"{node}:")}):
        assert time.monotonic() < deadline, f"{node} never held a slot of the site"
        time.sleep(0.05)
    return mine


def stop_holding_slots(process: Process, node: str, url: str, site: SiteServer) -> dict[str, int]:
    """SIGSTOP `process` at a moment its node holds slots of the site; returns them."""
    for _ in range(100):
        os.kill(process.pid, signal.SIGSTOP)
        mine = {slot: at for slot, at in slots(url, site).items() if slot.startswith(f"{node}:")}
        if mine:
            return mine
        os.kill(process.pid, signal.SIGCONT)
        time.sleep(0.1)
    raise AssertionError(f"{node} never held a slot when stopped")


def check_complete(site: SiteServer, out: Path) -> None:
    expected = {site.site.url(path) for path in site.site.expected_fetched()}
    assert set(captures(out)) == expected
    assert unfinished(out) == 0


@pytest.mark.slow
def test_nodes_that_stop_give_their_slots_back(tmp_path: Path) -> None:
    with served() as site, RedisServer() as server:
        coord = coordinator(site, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        helper = worker(server.url, tmp_path / "w0")
        node = node_of(server.url, helper.pid)
        held_by(node, server.url, site)
        code, _out, err = Process(tmp_path / "logs", "stop", "control", "stop", "--redis", server.url,
                                 "--name", NAME).finish(30)  # fmt: skip
        assert code == 0, err
        assert coord.finish(60)[0] == 0
        assert helper.finish(60)[0] == 0
        left = slots(server.url, site)
        assert left == {}, f"slots still held after every node stopped: {left}"
        # Started again, the crawl takes the slots at once and ends complete.
        code, _out, err = coordinator(site, server.url, tmp_path / "coord").finish()
        assert code == 0, err
        check_complete(site, tmp_path / "coord")


@pytest.mark.slow
def test_a_killed_nodes_slots_expire_with_its_leases(tmp_path: Path) -> None:
    with served() as site, RedisServer() as server:
        coord = coordinator(site, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        victim, survivor = worker(server.url, tmp_path / "w0"), worker(server.url, tmp_path / "w1")
        dead = node_of(server.url, victim.pid)
        wait_for_done(server.url, 50)
        held_by(dead, server.url, site)
        mine = stop_holding_slots(victim, dead, server.url, site)
        os.kill(victim.pid, signal.SIGKILL)
        victim.popen.wait()
        killed_at = redis_now(server.url)
        # Renewed with its leases, never for longer than one lease's TTL: by then they are the others' again.
        assert all(at <= killed_at + TTL * 1000 for at in mine.values()), (killed_at, mine)
        code, _out, err = coord.finish()
        assert code == 0, err
        assert survivor.finish()[0] == 0
        check_complete(site, tmp_path / "coord")


@pytest.mark.slow
def test_a_node_that_stalls_past_its_lease_loses_its_slots_with_it(tmp_path: Path) -> None:
    with served() as site, RedisServer() as server:
        coord = coordinator(site, server.url, tmp_path / "coord")
        wait_for_crawl(server.url)
        stalled = worker(server.url, tmp_path / "w0")
        node = node_of(server.url, stalled.pid)
        wait_for_done(server.url, 50)
        held_by(node, server.url, site)
        stopped = set(stop_holding_slots(stalled, node, server.url, site))
        time.sleep(TTL + 3)  # its leases expire and the coordinator's node takes its partitions over
        now = redis_now(server.url)
        kept = {slot: at for slot, at in slots(server.url, site).items() if slot in stopped and at > now}
        assert kept == {}, "a stalled node kept its slots past its lease"
        os.kill(stalled.pid, signal.SIGCONT)
        time.sleep(2 * 2 + 0.5)  # two heartbeats: a renewal of what it held would have happened
        now = redis_now(server.url)
        revived = {slot: at for slot, at in slots(server.url, site).items() if slot in stopped and at > now}
        assert revived == {}, "slots of a lost lease were renewed"
        code, _out, err = coord.finish()
        assert code == 0, err
        assert stalled.finish()[0] == 0
        check_complete(site, tmp_path / "coord")


async def test_a_node_refused_a_hosts_slots_holds_none_and_gives_back_only_its_own(redis_url: str) -> None:
    """Slots of two hosts, one taken by another node first: the refused host leaves nothing to renew or give."""
    client, sync = await connect(redis_url), blocking_client(redis_url)
    keys, config = Keys("slots"), PolitenessConfig(per_host=1, delay=0.0)
    script = Scripts(sync).host_slots
    try:
        other = SharedHostLimits(client, keys, "node-01", config, Politeness(config), ttl=60, share=lambda: 1.0)
        mine = SharedHostLimits(client, keys, "node-02", config, Politeness(config), ttl=60, share=lambda: 1.0)
        assert (await other.take("http://a.test", 1))[0] == 1
        assert (await mine.take("http://a.test", 1))[0] == 0  # refused: node-01 holds its one slot
        assert (await mine.take("http://b.test", 1))[0] == 1
        assert (mine.held("http://a.test"), mine.held("http://b.test")) == (0, 1)
        mine.renew(script)
        mine.release_all(script)
        assert sync.zrange(keys.host_slots("http://b.test"), 0, -1) == []
        assert [slot.decode() for slot in sync.zrange(keys.host_slots("http://a.test"), 0, -1)] == ["node-01:1"]
        assert mine.held("http://b.test") == 0
    finally:
        await client.aclose()
        sync.close()


@pytest.mark.parametrize(("delay", "kept"), [(0.0, 2), (0.5, 0)])
async def test_a_node_keeps_a_hosts_slots_between_claims_only_when_it_has_no_pace_to_keep(
    redis_url: str, delay: float, kept: int
) -> None:
    """Without a delay, the slots of requests that ended stay with the node that asks for the host again (its
    next claim needs none from Redis), and go back once it stops asking; with one, each start is paced in Redis."""
    client, sync = await connect(redis_url), blocking_client(redis_url)
    keys, config = Keys(f"keep-{delay}"), PolitenessConfig(per_host=2, delay=delay)
    host = "http://a.test"
    politeness = Politeness(config)
    limits = SharedHostLimits(client, keys, "node-01", config, politeness, ttl=60, share=lambda: 1.0)
    try:
        mono = time.monotonic()
        for _ in range(2):  # as a claim does: reserve, then ask Redis for the slots
            politeness.reserve(host, mono)
        plan = {0: [(1, 2)]}
        await limits.cut(plan, {1: host}, HostQueue({}), mono)
        assert plan == {0: [(1, 2 if delay == 0 else 1)]}  # with a delay, one start at a time
        for _ in range(plan[0][0][1]):
            politeness.release(host)
        await limits.settle(mono)
        assert len(sync.zrange(keys.host_slots(host), 0, -1)) == limits.held(host) == kept
        await asyncio.sleep(HOLD)  # asked for no more: the heartbeat gives them back, as a claim would
        limits.renew(Scripts(sync).host_slots)
        assert sync.zrange(keys.host_slots(host), 0, -1) == [] and limits.held(host) == 0
    finally:
        await client.aclose()
        sync.close()


async def test_a_claim_refused_its_hosts_slot_hands_out_nothing_while_a_request_runs_without_one(
    redis_url: str,
) -> None:
    """A request running without a slot here (robots.txt's fetch takes none) is no debt of the next claim: a
    claim Redis refuses (another node just took the host's paced slot) hands out nothing and undoes its own
    reservation only."""
    client, sync = await connect(redis_url), blocking_client(redis_url)
    keys, config = Keys("debt"), PolitenessConfig(per_host=2, delay=0.5)
    host = "http://a.test"
    politeness = Politeness(config)
    mine = SharedHostLimits(client, keys, "node-01", config, politeness, ttl=60, share=lambda: 0.5)
    other = SharedHostLimits(client, keys, "node-02", config, Politeness(config), ttl=60, share=lambda: 0.5)
    try:
        assert (await other.take(host, 1))[0] == 1  # its start paces the host for half a second
        mono = time.monotonic()
        politeness.reserve(host, mono)  # running here without a slot
        politeness.reserve(host, mono)  # the claim's
        plan = {0: [(1, 1)]}
        await mine.cut(plan, {1: host}, HostQueue({}), mono)
        assert plan == {0: []}
        assert politeness.active(host) == 1 and mine.held(host) == 0
        assert [slot.decode() for slot in sync.zrange(keys.host_slots(host), 0, -1)] == ["node-02:1"]
    finally:
        await client.aclose()
        sync.close()
