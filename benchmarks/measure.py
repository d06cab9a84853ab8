"""Run one crawler as a child process and turn what it did into figures; print them as a table.

Time, CPU and memory come from the kernel's accounting of the child (`os.wait4`), so they cover the
whole crawler process, start-up included, and nothing of the harness or of nginx.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Usage:
    """What the kernel says one child process used."""

    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    exit_code: int
    timed_out: bool
    cpu_at_ready: float = 0.0
    """For a process run beside others (`run_measured_together`): its CPU seconds when the last of them was
    started, what its start-up cost before the job's work began."""


@dataclass(frozen=True)
class Result:
    """One crawler's figures, as printed in the table."""

    crawler: str
    pages: int
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    coverage: float | None
    disallowed_fetched: int
    exit_code: int
    note: str = ""
    stages: dict[str, float] = field(default_factory=dict)
    """webtrawl's CPU seconds by stage, as the crawl measured them (`webtrawl.cpu`); empty for others."""

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu_seconds / self.pages if self.pages else float("nan")


class PeakWatcher:
    """The largest resident set of a child process and of every process it starts (a crawler's workers),
    summed: each process's `VmHWM`, read from Linux's `/proc` every `every` seconds until the child ends.
    The sum of the processes' own peaks is at least the peak of their sum, so the figure errs high.

    A process started by another is counted from its `exec` on: between fork and exec it is still its
    parent, and its `VmHWM` there is the parent's. Sampling a crawl's parse worker in that window counted
    the crawl twice (246 MB where the processes peaked at 196). A child that never execs (a forked
    worker) is therefore not counted.

    `ru_maxrss` from `wait4` cannot be used for that: a child forked (or vforked) from this harness carries
    the harness's own high-water mark across `exec`, so every child looked at least as big as the harness
    (76 MB for wget, which peaks at 14 MB). `VmHWM` belongs to the program's own memory, which `exec`
    creates anew.
    """

    def __init__(self, pid: int, every: float = 0.02) -> None:
        self.peak_kib = 0
        self._pid = pid
        self._peaks: dict[int, int] = {}
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set() and Path(f"/proc/{self._pid}").exists():
            for pid in _tree(self._pid):
                if pid != self._pid and _not_yet_exec(pid):
                    continue
                peak = _own_peak_kib(pid)
                if peak is not None:
                    self._peaks[pid] = max(self._peaks.get(pid, 0), peak)
            self.peak_kib = sum(self._peaks.values())
            self._stop.wait(self._every)

    def peak_mb(self, fallback_kib: int) -> float:
        """The peak seen, in MB; `fallback_kib` (`ru_maxrss`) where /proc could not be read."""
        self._stop.set()
        self._thread.join()
        return (self.peak_kib or fallback_kib) / 1024


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants, from each thread's `children` list in /proc."""
    found, pending = [], [pid]
    while pending:
        parent = pending.pop()
        found.append(parent)
        for children in Path(f"/proc/{parent}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                pending.extend(int(child) for child in children.read_text().split())
    return found


_PF_FORKNOEXEC = 0x40
"""The kernel's flag (`/proc/PID/stat`, field 9) of a process forked and not yet exec'd."""


def _not_yet_exec(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:  # ended
        return True
    return bool(int(fields[6]) & _PF_FORKNOEXEC)  # fields from the third on: state, ppid, …, flags


def _own_peak_kib(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # ended (or not Linux)
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None


def run_measured(command: Sequence[str], *, timeout: float, stdout: IO[bytes] | None = None) -> Usage:
    """Run `command` to its end (killed after `timeout` seconds) and return what it used.

    On any interruption (Ctrl-C, an error in the harness) the child is stopped before the error goes on.
    """
    started = time.perf_counter()
    process = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=stdout)
    watcher = PeakWatcher(process.pid)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        process.kill()

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
    finally:
        timer.cancel()
        if process.returncode is None:
            _stop(process)
    return Usage(
        seconds=seconds,
        cpu_seconds=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=watcher.peak_mb(usage.ru_maxrss),  # Linux reports KiB
        exit_code=process.returncode,
        timed_out=expired.is_set(),
    )


def run_measured_together(
    commands: Sequence[Sequence[str]], *, timeout: float, before: Callable[[int], None] | None = None
) -> list[Usage]:
    """Run the processes of one job side by side (a coordinator and its workers); each one's usage, in order.

    Command i starts once `before(i)` returns (a worker may need the coordinator to have set things up).
    Every process's seconds count from the first start, so the largest is the job's wall time. All are killed
    `timeout` seconds after the first start, and stopped on any interruption, as `run_measured` does.
    """
    started = time.perf_counter()
    processes: list[subprocess.Popen[bytes]] = []
    usages: dict[int, Usage] = {}
    expired = threading.Event()

    def reap(i: int, process: subprocess.Popen[bytes]) -> None:
        watcher = PeakWatcher(process.pid)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        usages[i] = Usage(
            seconds=time.perf_counter() - started,
            cpu_seconds=usage.ru_utime + usage.ru_stime,
            peak_rss_mb=watcher.peak_mb(usage.ru_maxrss),
            exit_code=process.returncode,
            timed_out=expired.is_set(),
        )

    threads = []
    at_ready: list[float] = []
    try:
        for i, command in enumerate(commands):
            if before is not None:
                before(i)
            if i == len(commands) - 1:
                at_ready = [_cpu_seconds(process.pid) for process in processes]
            processes.append(subprocess.Popen(list(command), stdin=subprocess.DEVNULL))
            threads.append(threading.Thread(target=reap, args=(i, processes[-1]), daemon=True))
            threads[-1].start()
        for thread in threads:
            thread.join(max(0.0, started + timeout - time.perf_counter()))
        if any(thread.is_alive() for thread in threads):
            expired.set()
            for process in processes:
                process.kill()
            for thread in threads:
                thread.join()
    finally:
        for process in processes:
            if process.returncode is None:
                _stop(process)
    return [dataclasses.replace(usages[i], cpu_at_ready=cpu) for i, cpu in enumerate([*at_ready, 0.0])]


def _cpu_seconds(pid: int) -> float:
    """The CPU seconds process `pid` has used so far (user and system, from /proc/PID/stat); 0 when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def read_jsonl(path: Path) -> list[dict[str, object]]:
    """Rows of a JSON-lines file; a missing file has none."""
    if not path.exists():
        return []
    with path.open("rb") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def fetched_paths(rows: Iterable[dict[str, object]]) -> set[str]:
    """URL paths (with their query) fetched with status 200, robots.txt left out."""
    paths = set()
    for row in rows:
        if row.get("status", row.get("status_code")) != 200 or not isinstance(row.get("url"), str):
            continue
        parts = urlsplit(str(row["url"]))
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        if path != "/robots.txt":
            paths.add(path)
    return paths


def summarize(
    crawler: str,
    usage: Usage,
    paths: set[str],
    manifest: dict[str, list[str]] | None,
    note: str = "",
    stages: dict[str, float] | None = None,
) -> Result:
    """Figures for one run; coverage and robots checks only when the site's manifest is known."""
    coverage = None
    disallowed = 0
    if manifest is not None:
        expected = set(manifest["pages"])
        coverage = len(paths & expected) / len(expected) if expected else None
        disallowed = len(paths & set(manifest["disallowed"]))
    if usage.timed_out:
        note = f"{note}; timed out".lstrip("; ")
    return Result(
        crawler=crawler,
        pages=len(paths),
        seconds=usage.seconds,
        cpu_seconds=usage.cpu_seconds,
        peak_rss_mb=usage.peak_rss_mb,
        coverage=coverage,
        disallowed_fetched=disallowed,
        exit_code=usage.exit_code,
        note=note,
        stages=stages or {},
    )


def webtrawl_stages(out: Path) -> dict[str, float]:
    """The CPU seconds by stage a webtrawl crawl in `out` recorded in its last snapshot (empty if none)."""
    try:
        conn = sqlite3.connect(f"file:{out / 'crawl.db'}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT snapshot FROM crawl_live ORDER BY updated_at DESC LIMIT 1").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return {}
    return dict(json.loads(row[0]).get("cpu_seconds") or {}) if row else {}


def print_stages(result: Result) -> None:
    """webtrawl's CPU per page by stage, beside the total the harness measured."""
    if not result.stages or not result.pages:
        return
    total = sum(result.stages.values())
    rows = [
        (stage, f"{1000 * seconds / result.pages:.3f}", f"{100 * seconds / total:.0f}%" if total else "-")
        for stage, seconds in result.stages.items()
    ]
    rows.append(("all stages", f"{1000 * total / result.pages:.3f}", "100%"))
    print_columns(("webtrawl stage", "CPU ms/page", "share"), rows)
    print(f"(the harness measured {result.cpu_ms_per_page:.3f} ms/page for every webtrawl process)")


def print_columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print a table after a blank line: the first column left-aligned, the figures right-aligned."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    print()
    for number, row in enumerate((header, *rows)):
        cells = [row[0].ljust(widths[0]), *(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))]
        print(" | ".join(cells))
        if number == 0:
            print("-+-".join("-" * width for width in widths))
