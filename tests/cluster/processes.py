"""Distributed crawls run as real processes against twenty local test sites, for the cluster's end-to-end tests.

Each site is its own host key (127.0.0.1 on its own port); a crawl's coordinator and workers are
`python -m webtrawl` subprocesses (output to files, so a chatty process never blocks on a full pipe), so they
can be killed, stopped and restarted as real ones would be.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from tests.sites import SiteServer
from webtrawl import stackdump
from webtrawl.cluster.keys import Keys
from webtrawl.store.shard import StageFile
from webtrawl.store.shards import Sources

SITES = 20
PAGES = 110
PER_HOST = 2
NAME = "dist"
KEYS = Keys(NAME)


class Sites:
    """`count` test sites of `pages` pages served from a thread; `delay` slows every response (seconds); `held`:
    their pages wait for `release` (`SiteServer.hold`)."""

    def __init__(self, *, pages: int = PAGES, delay: float = 0.0, count: int = SITES, held: bool = False) -> None:
        self.servers: list[SiteServer] = []
        self._pages = pages
        self._delay = delay
        self._count = count
        self._held = held
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        for seed in range(self._count):
            server = await SiteServer(pages=self._pages, seed=seed, calendar=False, delay=self._delay).start()
            if self._held:
                server.hold()
            self.servers.append(server)
        self._ready.set()
        while not self._stop.is_set():
            await asyncio.sleep(0.05)
        for server in self.servers:
            await server.aclose()

    def __enter__(self) -> Sites:
        self._thread.start()
        assert self._ready.wait(20)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def release(self) -> None:
        """Let the held sites answer."""
        assert self._loop is not None
        for server in self.servers:
            self._loop.call_soon_threadsafe(server.release)

    @property
    def seeds(self) -> list[str]:
        return [server.url for server in self.servers]

    def expected(self) -> set[str]:
        """Every URL a complete crawl fetches."""
        return {server.site.url(path) for server in self.servers for path in server.site.expected_fetched()}

    def hits(self) -> Counter[str]:
        """Requests for pages (robots.txt and sitemaps left out) per URL, as the sites saw them."""
        return Counter(
            server.site.url(r.path)
            for server in self.servers
            for r in server.log
            if r.path != "/robots.txt" and "sitemap" not in r.path
        )


_started: list[subprocess.Popen] = []


def kill_leftovers() -> None:
    """Kill what a test started and left running: a failed assertion skips the `finish` of the processes
    after it, and a worker whose Redis is gone retries for ever, slowing every test after it."""
    for popen in _started:
        if popen.poll() is None:
            popen.kill()
            popen.wait(10)
    _started.clear()


class Process:
    """A `python -m webtrawl …` subprocess whose output goes to files in `logs`.

    `job`: in a process group of its own, as a shell with job control runs a command: the group a terminal's
    Ctrl-Z and `fg` reach (`os.killpg`). Its parent, this process, is in the same session, so the kernel stops
    it on a SIGTSTP instead of dropping the signal, as it does in an orphaned process group."""

    def __init__(self, logs: Path, label: str, *args: str | Path, job: bool = False) -> None:
        logs.mkdir(parents=True, exist_ok=True)
        self.stdout_path, self.stderr_path = logs / f"{label}.out", logs / f"{label}.err"
        with self.stdout_path.open("w") as out, self.stderr_path.open("w") as err:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "webtrawl", *map(str, args)],
                stdout=out,
                stderr=err,
                text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                process_group=0 if job else None,
            )
        _started.append(self.popen)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stuck(self) -> str:
        """Kill a process that did not end, after it wrote where it was (`webtrawl.stackdump`): its stderr."""
        self.popen.send_signal(stackdump.SIGNAL)
        time.sleep(2)
        self.popen.kill()
        self.popen.wait()
        err = self.stderr_path.read_text()
        at = err.rfind(stackdump.HEADER)
        return f"stderr: {err[-3000:] if at < 0 else err[max(0, at - 2000) :]}"

    def finish(self, timeout: float = 180) -> tuple[int, str, str]:
        """Wait for the exit; returns (exit code, stdout, stderr)."""
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout} s; {self.stuck()}") from None
        return code, self.stdout_path.read_text(), self.stderr_path.read_text()


def coordinator(sites: Sites, url: str, out: Path, *extra: str | Path, job: bool = False) -> Process:
    return Process(
        out.parent / "logs", f"coordinator-{time.monotonic_ns()}",
        "crawl", *sites.seeds, "--redis", url, "--name", NAME, "--out", out, "--delay", "0",
        "--per-host", PER_HOST, "--concurrency", "16", "--partitions", "16", "--lease-ttl", "3", "--retries", "1",
        "-q", *extra, job=job,
    )  # fmt: skip


def worker(url: str, out: Path, *extra: str | Path) -> Process:
    return Process(out.parent / "logs", f"worker-{out.name}", "worker", "--redis", url, "--name", NAME, "--out", out,
                   "-q", *extra)  # fmt: skip


def wait_for_crawl(url: str) -> None:
    with redis.Redis.from_url(url) as client:
        deadline = time.monotonic() + 20
        while not client.exists(KEYS.meta):
            assert time.monotonic() < deadline, "the coordinator did not create the crawl"
            time.sleep(0.1)


def done_in_redis(url: str, partitions: int = 16) -> int:
    """URLs done so far in the whole crawl."""
    with redis.Redis.from_url(url) as client:
        return sum(int(client.hget(KEYS.counters(p), "done") or 0) for p in range(partitions))


def wait_for_done(url: str, at_least: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while done_in_redis(url) < at_least:
        assert time.monotonic() < deadline, f"the crawl did not reach {at_least} pages"
        time.sleep(0.1)


def node_of(url: str, pid: int) -> str:
    """The node id a process registered as."""
    deadline = time.monotonic() + 20
    with redis.Redis.from_url(url) as client:
        while time.monotonic() < deadline:
            for node, info in client.hgetall(KEYS.nodes).items():
                if json.loads(info)["pid"] == pid:
                    return node.decode()
            time.sleep(0.1)
    raise AssertionError(f"no node registered with pid {pid}")


def node_pids(url: str) -> set[int]:
    """The process ids of the nodes registered so far."""
    with redis.Redis.from_url(url) as client:
        return {json.loads(info)["pid"] for info in client.hgetall(KEYS.nodes).values()}


def state(pid: int) -> str | None:
    """Process `pid`'s state as `ps` shows it (R running, S sleeping, T stopped, …); None once it has exited.

    A zombie no one reaps counts as exited once its last thread has: its first thread shows the zombie's
    state as soon as it exits, and the process's files (a lock among them) close with the last one."""
    try:
        shown = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        return None
    return None if shown == "Z" and threads == 1 else shown


def wait_until_gone(pid: int, timeout: float = 20) -> None:
    """Until process `pid` has exited."""
    wait_for_state(pid, lambda shown: shown is None, "has not exited", timeout)


def wait_until_stopped(pid: int, timeout: float = 20) -> None:
    """Until process `pid` is stopped (Ctrl-Z, SIGSTOP)."""
    wait_for_state(pid, lambda shown: shown == "T", "is not stopped", timeout)


def wait_until_continued(pid: int, timeout: float = 20) -> None:
    """Until process `pid` runs again after it was stopped."""
    wait_for_state(pid, lambda shown: shown not in ("T", None), "is not running", timeout)


def wait_for_state(pid: int, wanted: Callable[[str | None], bool], failure: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not wanted(state(pid)):
        assert time.monotonic() < deadline, f"process {pid} {failure} after {timeout} s (state {state(pid)})"
        time.sleep(0.05)


def first_child(pid: int, timeout: float = 20) -> int:
    """The first process that process `pid` starts, as soon as it exists (so before it does much)."""
    deadline = time.monotonic() + timeout
    while True:
        for children in Path(f"/proc/{pid}/task").glob("*/children"):
            with contextlib.suppress(FileNotFoundError):
                if found := children.read_text().split():
                    return int(found[0])
        assert time.monotonic() < deadline, f"process {pid} started no process within {timeout} s"
        time.sleep(0.005)


def holders(url: str, partitions: int = 16) -> dict[int, str]:
    """Partition → the node holding its lease now."""
    with redis.Redis.from_url(url) as client:
        tokens = {p: client.get(KEYS.lease(p)) for p in range(partitions)}
    return {p: token.decode().rsplit(":", 1)[0] for p, token in tokens.items() if token}


def check_complete(sites: Sites, out: Path) -> None:
    """Every page is captured in the crawl in `out` (read as its sources, every shard), and no URL is left
    unfinished."""
    found, expected = set(captures(out)), sites.expected()
    assert found == expected, f"missing {sorted(expected - found)[:5]}, unexpected {sorted(found - expected)[:5]}"
    assert unfinished(out) == 0


def crawl_rows(out: Path, sql: str, name: str = NAME) -> list[tuple[Any, ...]]:
    """The rows `sql` gives in every source of crawl `name` in `out`, as its readers read it (every shard of a
    distributed crawl); `?` in `sql` is the source's crawl id."""
    with Sources.open(out, name) as sources:
        return [row for source in sources.all for row in source.conn.execute(sql, (source.crawl_id,))]


def captures(out: Path) -> Counter[str]:
    """Captures per URL in the crawl."""
    return Counter(url for (url,) in crawl_rows(out, "SELECT url FROM captures WHERE crawl_id = ?"))


def unfinished(out: Path, name: str = NAME) -> int:
    """URLs of the crawl neither done nor failed (in any shard: the others may hold it waiting, as a link)."""
    states = crawl_rows(out, "SELECT fp, state IN (2, 3) FROM urls WHERE crawl_id = ?", name)
    return len({fp for fp, _ended in states} - {fp for fp, ended in states if ended})


def refetched(out: Path) -> set[str]:
    """URLs with more than one capture although the first was not a server error (so not a retry)."""
    fetched = crawl_rows(out, "SELECT url, COALESCE(status, 0) FROM captures WHERE crawl_id = ?")
    counts = Counter(url for url, _status in fetched)
    lowest: dict[str, int] = {}
    for url, status in fetched:
        lowest[url] = min(status, lowest.get(url, status))
    return {url for url, n in counts.items() if n > 1 and 0 < lowest[url] < 500}


def shard_captures(directory: Path, *, settled: bool = True) -> set[tuple[str, str, float]]:
    """(url, node, fetched at) of every capture in the node shard in `directory`; `settled`: its stage must
    be empty (no batch of it waits for the next node started there)."""
    db = sqlite3.connect(directory / "node.db")
    try:
        if settled:
            assert not StageFile(directory).read()
        return set(db.execute("SELECT url, node, fetched_at FROM captures"))
    finally:
        db.close()


def check_shards(out: Path, *nodes: Path, dead: Path | None = None) -> None:
    """Each capture of the crawl in `out` is in exactly one of the node shards in `out` and `nodes`, and each
    shard's search index has caught up.

    `dead`: the directory of a node killed for good, which may have died with a batch Redis accepted that
    its shard had staged and not yet settled (the next node started there would settle it)."""
    shards = [shard_captures(directory) for directory in (out, *nodes)]
    if dead is not None:
        shards.append(shard_captures(dead, settled=False))
    union = set().union(*shards)
    assert sum(map(len, shards)) == len(union)
    assert len(union) == sum(captures(out).values())  # the crawl, read as its readers read it, is these shards
    for directory in (out, *nodes):
        db = sqlite3.connect(directory / "node.db")
        try:
            (last,) = db.execute("SELECT COALESCE(MAX(id), 0) FROM captures").fetchone()
            assert db.execute("SELECT upto FROM fts_progress").fetchone() == (last,)
        finally:
            db.close()


def acks_left(url: str, partitions: int = 16) -> int:
    """Acknowledgement fields still in the crawl's partitions (`complete.lua`)."""
    with redis.Redis.from_url(url) as client:
        return sum(client.hlen(KEYS.acks(p)) for p in range(partitions))


def crawl_on_three_nodes(sites: Sites, url: str, tmp_path: Path) -> None:
    """The coordinator's node (in `coord`) and two workers (`w0`, `w1`) crawl `sites` to the end."""
    coord = coordinator(sites, url, tmp_path / "coord")
    wait_for_crawl(url)
    workers = [worker(url, tmp_path / f"w{i}") for i in range(2)]
    code, _out, err = coord.finish()
    assert code == 0, err
    for process in workers:
        code, _out, err = process.finish()
        assert code == 0, err
