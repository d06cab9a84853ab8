"""What rendering costs: the JS site rendered, and the generated test site crawled plain and rendered.

    .venv/bin/python benchmarks/render_bench.py [--pages 1000] [--long 5000]

For each crawl: pages/s, CPU ms per page (the crawler and every process it started and reaped: Playwright's
driver and Chromium), peak memory of the crawler's whole process tree (the sum of its processes' PSS, sampled
from /proc every 0.2 s), and requests the site received per page. `--long N` adds a rendered crawl of N pages
that prints the tree's memory every 500 pages (it should stay flat: contexts are recycled).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.measure import print_columns, run_measured
from tests.sites import SiteServer
from tests.sites.jsapp import JsSite


def tree_memory(root: int) -> int:
    """Bytes of memory `root` and all its descendants use now: the sum of their PSS (each shared page
    counted once across them, which a sum of RSS would count in every Chromium process)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
            except (OSError, ValueError):
                continue
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    total = 0
    for pid in tree:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
                break
    return total


class Sampler(threading.Thread):
    """Samples the memory of the newest child of this process's tree, and its done count every 500 pages."""

    def __init__(self, out: Path, every: int | None) -> None:
        super().__init__(daemon=True)
        self.out, self.every, self.peak, self.marks = out, every, 0, []
        self.stop = threading.Event()

    def run(self) -> None:
        next_mark = self.every
        while not self.stop.wait(0.2):
            kids = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
            if not kids:
                continue
            memory = tree_memory(int(kids[-1]))
            self.peak = max(self.peak, memory)
            if next_mark is not None and (self.out / "crawl.db").exists():
                try:
                    with sqlite3.connect(f"file:{self.out / 'crawl.db'}?mode=ro", uri=True) as conn:
                        (done,) = conn.execute("SELECT COUNT(*) FROM urls WHERE state = 2").fetchone()
                except sqlite3.Error:
                    continue
                if done >= next_mark:
                    self.marks.append((done, memory))
                    next_mark += self.every or 0


def serve(start: Callable[[], object]) -> tuple[object, asyncio.AbstractEventLoop]:
    """Start an async site on a loop of its own thread (the crawler runs as a child process)."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    site = asyncio.run_coroutine_threadsafe(start(), loop).result()  # type: ignore[arg-type]
    return site, loop


def crawl(label: str, url: str, requests: Callable[[], int], pages: int, render: bool, every: int | None) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        before = requests()
        command = [sys.executable, "-m", "webtrawl", "crawl", url, "--out", str(out), "--delay", "0", "--per-host",
                   "8", "--concurrency", "16", "--max-pages", str(pages), "-q"]  # fmt: skip
        if render:
            command += ["--render", "--render-timeout", "10", "--render-concurrency", "2"]
        sampler = Sampler(out, every)
        sampler.start()
        usage = run_measured(command, timeout=3600, stdout=open(os.devnull, "wb"))  # noqa: SIM115
        sampler.stop.set()
        sampler.join()
        with sqlite3.connect(out / "crawl.db") as conn:
            (done,) = conn.execute("SELECT COUNT(*) FROM captures").fetchone()
        for at, memory in sampler.marks:
            print(f"  {label}: {at:,} pages done, process tree {memory / 2**20:,.0f} MB (PSS)")
        done = max(done, 1)
        return [label, f"{done:,}", f"{done / usage.seconds:,.1f}", f"{usage.cpu_seconds * 1000 / done:,.1f}",
                f"{sampler.peak / 2**20:,.0f}", f"{(requests() - before) / done:,.2f}"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--long", type=int, default=0, help="also a rendered crawl of this many pages")
    args = parser.parse_args()
    js, _ = serve(lambda: JsSite().start())
    generated, _ = serve(lambda: SiteServer(pages=max(args.pages, args.long) + 100).__aenter__())
    rows = [
        crawl("JS site, rendered", js.url, lambda: len(js.requests), 200, True, None),  # type: ignore[attr-defined]
        crawl("test site, plain", generated.url, lambda: len(generated.log), args.pages, False, None),  # type: ignore[attr-defined]
        crawl("test site, rendered", generated.url, lambda: len(generated.log), args.pages, True, None),  # type: ignore[attr-defined]
    ]
    if args.long:
        rows.append(crawl("long rendered", generated.url, lambda: len(generated.log), args.long, True, 500))  # type: ignore[attr-defined]
    print_columns(["crawl", "pages", "pages/s", "CPU ms/page", "peak MB (tree PSS)", "requests/page"], rows)


if __name__ == "__main__":
    main()
