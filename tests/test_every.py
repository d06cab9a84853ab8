"""`webtrawl crawl URL --recrawl --every D` as a user runs it: re-crawl passes that repeat until Ctrl-C.

Each pass fetches again, conditionally, what is due; its report is printed and the command sleeps until the
next one. Ctrl-C in that sleep ends the command at once; Ctrl-C during a pass stops it as any crawl stops
(fetches in flight are kept, the rest waits for the next run). The command runs in a process group of its
own and is interrupted with `killpg`, as a terminal's Ctrl-C reaches every process of the foreground job.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from email.utils import formatdate
from pathlib import Path

import pytest
from aiohttp import web

from tests.crawls import check_warcs, path_of
from tests.test_cli import webtrawl
from tests.test_recrawl import ChangingSite, serving, warc_types

pytestmark = pytest.mark.slow

LIMIT = 10.0
"""Seconds any one wait may take: a loop that hangs fails its test instead of hanging the suite."""
EVERY = ("--recrawl", "--every", "1s", "--min-interval", "0.1s")
"""Revisit intervals far below the 1 s between passes: every page is due at every pass."""
QUICK = ("--delay", "0", "--ignore-robots", "--no-sitemaps", "--per-host", "1", "--concurrency", "1")
"""One fetch at a time, in depth order, and no request but the pages themselves."""
NEXT_PASS = "next re-crawl pass in 1 s (Ctrl-C to stop)"
PAGES = ("/", "/changes", "/same", "/dated")
FIRST_MODIFIED = 1_700_000_000


def http_date(at: float) -> str:
    return formatdate(at, usegmt=True)


class PassSite(ChangingSite):
    """/changes is new at every request (with a later Last-Modified); the other pages never change.

    `hold = (path, n)` keeps the n-th request for `path` unanswered until `release` is set, so a test can
    interrupt a pass in its middle.
    """

    def __init__(self) -> None:
        super().__init__()
        self.set("/", "home", links=PAGES[1:], etag='"home"')
        self.set("/same", "never changes", etag='"same"')
        self.set("/dated", "never changes either", modified=FIRST_MODIFIED)
        self.version = 0
        self.seen: Counter[str] = Counter()
        self.hold: tuple[str, int] | None = None
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        self.seen[request.path] += 1
        if request.path == "/changes":
            self.version += 1
            self.set("/changes", f"version {self.version}", modified=FIRST_MODIFIED + self.version)
        if self.hold == (request.path, self.seen[request.path]):
            self.held.set()
            await asyncio.wait_for(self.release.wait(), LIMIT)
        return await super().handle(request)

    def asked(self, since: int = 0) -> dict[str, list[tuple[int, str | None]]]:
        """Path → (status, validator sent) of each request from the `since`-th on."""
        found: dict[str, list[tuple[int, str | None]]] = {}
        for path, headers, status in self.requests[since:]:
            found.setdefault(path, []).append(
                (status, headers.get("If-None-Match") or headers.get("If-Modified-Since"))
            )
        return found


class Running:
    """The command in its subprocess; stderr is read line by line as the test waits on it."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.err: list[str] = []
        self.stdout = ""
        self.took = 0.0
        """Seconds from `interrupt` to the exit."""
        self._interrupted_at = 0.0
        self._out = asyncio.ensure_future(proc.stdout.read()) if proc.stdout else None

    @property
    def stderr(self) -> str:
        return "".join(self.err)

    async def until(self, fragment: str, count: int = 1) -> None:
        """Read stderr until `count` of its lines hold `fragment`."""
        assert self.proc.stderr is not None
        async with asyncio.timeout(LIMIT):
            while sum(fragment in line for line in self.err) < count:
                line = await self.proc.stderr.readline()
                assert line, f"the command ended before saying {fragment!r}:\n{self.stderr}"
                self.err.append(line.decode())

    def interrupt(self) -> None:
        """Ctrl-C, as a terminal sends it: SIGINT to the whole process group."""
        self._interrupted_at = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGINT)

    async def exit(self) -> int:
        """Wait for the exit; return its code (stdout and stderr are then complete)."""
        assert self.proc.stderr is not None
        async with asyncio.timeout(LIMIT):
            self.err.append((await self.proc.stderr.read()).decode())
            code = await self.proc.wait()
        self.took = time.monotonic() - self._interrupted_at
        if self._out is not None:
            self.stdout = (await self._out).decode()
        return code

    async def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        if self._out is not None:
            await self._out


@asynccontextmanager
async def running(*args: str, stdout: int = asyncio.subprocess.PIPE) -> AsyncIterator[Running]:
    """`webtrawl ARGS` started in a new session (its own process group); killed on the way out if still alive."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "webtrawl",
        *args,
        stdout=stdout,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    command = Running(proc)
    try:
        yield command
    finally:
        await command.close()


async def status(out: Path) -> dict[str, int]:
    """The counts `webtrawl status DIR` shows: waiting, running, done, failed, captures, and revisits scheduled."""
    code, shown, err = await webtrawl("status", str(out))
    assert code == 0, err
    counts = {label: int(n.replace(",", "")) for label, n in re.findall(r"^ +([a-z]+) +([\d,]+)", shown, re.M)}
    due = re.search(
        r"revisits +([\d,]+) due now, ([\d,]+) within an hour, ([\d,]+) within a day, ([\d,]+) later", shown
    )
    counts["revisits"] = sum(int(n.replace(",", "")) for n in due.groups()) if due else 0
    return counts


async def exported(out: Path) -> dict[str, list[tuple[int, str]]]:
    """Path → (status, payload digest) of each capture, oldest first, from `webtrawl export DIR`."""
    code, jsonl, err = await webtrawl("export", str(out), "--format", "jsonl")
    assert code == 0, err
    found: dict[str, list[tuple[int, str]]] = {}
    for row in map(json.loads, jsonl.splitlines()):
        found.setdefault(path_of(row["url"]), []).append((row["status"], row["payload_digest"]))
    return found


async def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_passes_repeat_conditionally_until_ctrl_c_in_the_sleep(tmp_path: Path) -> None:
    site = PassSite()
    async with serving(site), running("crawl", site.url + "/", "--out", str(tmp_path), *EVERY, *QUICK) as crawl:
        await crawl.until(NEXT_PASS, count=3)
        await asyncio.sleep(0.3)  # a person reads the line, then presses Ctrl-C: the command is in its 1 s sleep
        crawl.interrupt()
        code = await crawl.exit()

    assert code == 130, crawl.stderr
    assert "Traceback" not in crawl.stderr and "Aborted" not in crawl.stderr
    assert crawl.stderr.count(NEXT_PASS) == 3
    assert crawl.stdout.count("finished: crawl 'default'") == 3  # one report per pass
    assert re.findall(r"pages this run +(\d+)", crawl.stdout) == ["4", "4", "4"]

    asked = site.asked()
    assert asked["/same"] == [(200, None), (304, '"same"'), (304, '"same"')]
    assert asked["/dated"] == [(200, None), *[(304, http_date(FIRST_MODIFIED))] * 2]
    assert asked["/changes"] == [
        (200, None),
        (200, http_date(FIRST_MODIFIED + 1)),
        (200, http_date(FIRST_MODIFIED + 2)),
    ]
    assert asked["/"] == [(200, None), (304, '"home"'), (304, '"home"')]

    assert await status(tmp_path) == {
        "waiting": 0, "running": 0, "done": 4, "failed": 0, "captures": 12, "revisits": 4,
    }  # fmt: skip
    captures = await exported(tmp_path)
    changes = captures["/changes"]
    assert [s for s, _d in changes] == [200, 200, 200] and len({d for _s, d in changes}) == 3  # history kept
    for path in ("/same", "/dated"):
        assert [s for s, _d in captures[path]] == [200, 304, 304]
        assert len({d for _s, d in captures[path]}) == 1  # a revisit keeps the content's digest
    records = warc_types(tmp_path)
    assert records["/changes"] == [("response", None)] * 3
    for path in ("/same", "/dated"):
        assert records[path] == [("response", None), *[("revisit", "server-not-modified")] * 2]
    check_warcs(tmp_path)


async def test_ctrl_c_during_a_pass_stops_it_and_a_plain_recrawl_resumes_without_loss(tmp_path: Path) -> None:
    site = PassSite()
    site.hold = ("/", 2)  # the second pass's first fetch: its other pages are still waiting
    async with serving(site):
        async with running("crawl", site.url + "/", "--out", str(tmp_path), *EVERY, *QUICK) as crawl:
            await asyncio.wait_for(site.held.wait(), LIMIT)
            crawl.interrupt()
            await crawl.until("stopping: fetches in flight get up to 5 s to finish")
            site.release.set()
            code = await crawl.exit()
        assert code == 130, crawl.stderr
        assert "Traceback" not in crawl.stderr
        assert crawl.stderr.count(NEXT_PASS) == 1
        assert "interrupted: run the same command again to resume" in crawl.stderr
        assert crawl.stdout.count("finished: crawl 'default'") == 1
        assert "interrupted: crawl 'default'" in crawl.stdout
        assert re.findall(r"still waiting +(\d+)", crawl.stdout) == ["0", "3"]
        # the fetch in flight was kept; the pages the pass had not reached wait for the next run
        assert await status(tmp_path) == {
            "waiting": 3, "running": 0, "done": 1, "failed": 0, "captures": 5, "revisits": 1,
        }  # fmt: skip

        before = len(site.requests)
        code, out, err = await webtrawl(
            "crawl", site.url + "/", "--out", str(tmp_path), "--recrawl", "--min-interval", "0.1s", *QUICK, "-q"
        )
        assert code == 0, err
        assert out.startswith("finished: 4 pages")
        assert site.asked(before) == {
            "/": [(304, '"home"')],
            "/changes": [(200, http_date(FIRST_MODIFIED + 1))],
            "/same": [(304, '"same"')],
            "/dated": [(304, http_date(FIRST_MODIFIED))],
        }

    assert await status(tmp_path) == {
        "waiting": 0, "running": 0, "done": 4, "failed": 0, "captures": 9, "revisits": 4,
    }  # fmt: skip
    captures = await exported(tmp_path)
    assert {path: [s for s, _d in rows] for path, rows in captures.items()} == {
        "/": [200, 304, 304], "/changes": [200, 200], "/same": [200, 304], "/dated": [200, 304],
    }  # fmt: skip
    check_warcs(tmp_path)


def fill(pipe: int) -> None:
    """Fill the pipe, so the next write to it blocks (a terminal paused with Ctrl-S, a pager that stopped reading)."""
    os.set_blocking(pipe, False)
    try:
        while True:
            os.write(pipe, b"." * 4096)
    except BlockingIOError:
        pass
    try:
        while True:
            os.write(pipe, b".")
    except BlockingIOError:
        pass
    os.set_blocking(pipe, True)


def drain(pipe: int) -> None:
    """Read the pipe until its writers close it."""
    while os.read(pipe, 65536):
        pass


def writing_to_a_pipe(pid: int) -> bool:
    """Whether the process's main thread is blocked writing to a full pipe (Linux: its wait channel)."""
    return "pipe_write" in Path(f"/proc/{pid}/wchan").read_text()


async def test_ctrl_c_while_a_pass_report_is_written_ends_the_loop_with_130(tmp_path: Path) -> None:
    site = PassSite()
    read, write = os.pipe()
    fill(write)
    async with (
        serving(site),
        running("crawl", site.url + "/", "--out", str(tmp_path), *EVERY, *QUICK, stdout=write) as crawl,
    ):
        os.close(write)  # the command holds the only writer: the pipe ends when the command does
        try:
            # the first pass is over and its report waits on the full pipe: between the pass and the sleep
            await eventually(lambda: writing_to_a_pipe(crawl.proc.pid), "the report to block on the pipe")
            crawl.interrupt()
        finally:
            reader = asyncio.ensure_future(asyncio.to_thread(drain, read))  # the terminal takes output again
        try:
            code = await crawl.exit()
        finally:
            await crawl.close()
            await reader
            os.close(read)
    assert code == 130, crawl.stderr
    assert "Traceback" not in crawl.stderr and "Aborted" not in crawl.stderr
    assert NEXT_PASS not in crawl.stderr  # the loop ended: no second pass
    assert site.seen == dict.fromkeys(PAGES, 1)
