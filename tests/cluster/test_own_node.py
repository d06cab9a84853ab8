"""`webtrawl crawl --redis` is one command to its user, though it fetches through a node of its own, a child
process in a process group of its own (`cluster.ownnode`): what the user does to the command reaches the node
too.

Every test runs the coordinator as a real process against slowed test sites, so the crawl is still going when
the user steps in, and checks the crawl ends complete afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from tests.cluster.processes import (
    Process,
    Sites,
    check_complete,
    coordinator,
    node_pids,
    wait_for_done,
    wait_until_continued,
    wait_until_gone,
    wait_until_stopped,
)
from tests.redis_servers import RedisServer
from webtrawl import stackdump
from webtrawl.store.db import DirectoryLock

pytestmark = pytest.mark.slow

PAGES = 50
DELAY = 0.1
WAIT = 30.0


def test_ctrl_z_stops_the_coordinator_and_its_node_and_fg_continues_both(tmp_path: Path) -> None:
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        # Leases that outlast the stop: the crawl picks up where it was, nothing passes to another node.
        coord = coordinator(sites, server.url, tmp_path / "coord", "--lease-ttl", "60", job=True)
        wait_for_done(server.url, 100)
        [node] = node_pids(server.url)
        try:
            os.killpg(coord.pid, signal.SIGTSTP)  # Ctrl-Z: the terminal signals its foreground process group
            wait_until_stopped(coord.pid)
            wait_until_stopped(node)
            time.sleep(1)  # the requests sent before the stop are answered
            fetched = sum(sites.hits().values())
            time.sleep(2)
            assert sum(sites.hits().values()) == fetched, "pages were fetched while the crawl was stopped"
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.kill(node, signal.SIGCONT)  # a node left stopped would never see its coordinator go
            raise
        finally:
            os.killpg(coord.pid, signal.SIGCONT)  # fg
        wait_until_continued(node)
        code, _out, err = coord.finish()
        assert code == 0, err
        check_complete(sites, tmp_path / "coord")


def test_a_coordinator_killed_while_stopped_leaves_no_node_holding_its_directory(tmp_path: Path) -> None:
    """`kill -9 %1` after Ctrl-Z: the node, stopped with its coordinator, must not stay stopped for ever,
    holding the directory's lock."""
    out = tmp_path / "coord"
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        coord = coordinator(sites, server.url, out, job=True)
        wait_for_done(server.url, 100)
        [node] = node_pids(server.url)
        os.killpg(coord.pid, signal.SIGTSTP)  # Ctrl-Z
        try:
            wait_until_stopped(node)
            coord.popen.kill()
            coord.popen.wait()
            wait_until_gone(node)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.kill(node, signal.SIGCONT)  # it sees its coordinator gone and ends
            raise
        assert not DirectoryLock.held(out)
        code, _out, err = coordinator(sites, server.url, out).finish()  # the same command again goes on
        assert code == 0, err
        check_complete(sites, out)


def test_sigusr1_on_the_coordinator_writes_its_stacks_then_its_nodes(tmp_path: Path) -> None:
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        coord = coordinator(sites, server.url, tmp_path / "coord")
        wait_for_done(server.url, 100)
        [node] = node_pids(server.url)
        coord.popen.send_signal(stackdump.SIGNAL)
        deadline = time.monotonic() + WAIT
        while (dumped := coord.stderr_path.read_text()).count(" asyncio task(s), outermost call first:") < 2:
            assert time.monotonic() < deadline, f"not two processes' stacks: {dumped[-3000:]}"
            time.sleep(0.1)
        code, _out, err = coord.finish()
        assert code == 0, err  # the crawl went on
        check_complete(sites, tmp_path / "coord")
    # One dump after the other on the stderr they share, each whole and naming its process.
    coordinators, nodes = dumped.split(stackdump.HEADER)[1:]
    assert coordinators.startswith(f" (pid {coord.pid})\n") and ", in _coordinate\n" in coordinators, coordinators
    assert nodes.startswith(f" (pid {node})\n") and ", in run_worker\n" in nodes, nodes
    assert ", in run_worker\n" not in coordinators and ", in _coordinate\n" not in nodes


def test_the_directory_is_locked_in_the_coordinators_name(tmp_path: Path) -> None:
    """The lock names the process the user started, though its node writes in the directory too."""
    out = tmp_path / "coord"
    with Sites(pages=PAGES, delay=DELAY) as sites, RedisServer() as server:
        coord = coordinator(sites, server.url, out)
        wait_for_done(server.url, 100)
        code, _out, err = Process(tmp_path / "logs", "another", "crawl", sites.seeds[0], "--out", out).finish(WAIT)
        assert code == 2, err
        assert err.splitlines()[-1] == (
            f"webtrawl: error: {out} is in use by a running crawl (pid {coord.pid}); "
            "wait for it to finish or stop it first"
        )
        code, _out, err = coord.finish()
        assert code == 0, err
        check_complete(sites, out)
