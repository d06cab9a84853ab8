"""What the terminal shows: a live display while crawling (or a log line every few seconds when stdout
is not a terminal), and the report at the end."""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .cluster.events import Event, Gathering, LeaseHeld, Requeued, Restored
from .crawler import Crawler
from .models import FrontierCounts
from .stats import CrawlReport

REFRESH = 0.5
"""Seconds between two updates of the live display."""
PLAIN_EVERY = 5.0
"""Seconds between two log lines in plain mode."""


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{secs:02}"


class Progress:
    """Shows a running crawl; use as `async with Progress(crawler):` around `crawler.run()`."""

    def __init__(self, crawler: Crawler, *, plain: bool, console: Console | None = None) -> None:
        self._crawler = crawler
        self._plain = plain
        self._console = console or Console(stderr=plain)
        self._task: asyncio.Task[None] | None = None
        self._counts = FrontierCounts()

    async def __aenter__(self) -> Progress:
        self._task = asyncio.create_task(self._show())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _refresh_counts(self) -> None:
        frontier = self._crawler.frontier
        if frontier is not None:
            with contextlib.suppress(Exception):  # the display must never break the crawl
                self._counts = await frontier.counts()

    async def _show(self) -> None:
        if self._plain:
            while True:
                await asyncio.sleep(PLAIN_EVERY)
                await self._refresh_counts()
                self._console.print(self._line(), highlight=False, soft_wrap=True)
        with Live(self._table(), console=self._console, refresh_per_second=4, transient=True) as live:
            tick = 0
            while True:
                await asyncio.sleep(REFRESH)
                if tick % 2 == 0:
                    await self._refresh_counts()
                tick += 1
                live.update(self._table())

    def _line(self) -> str:
        stats, counts = self._crawler.stats, self._counts
        pages_s, _bytes_s = stats.rates()
        return (
            f"[{_duration(stats.elapsed)}] {stats.pages} pages ({pages_s:.1f}/s), {_size(stats.bytes)}, "
            f"{stats.fetching} in flight, {counts.waiting} waiting, {counts.done} done, "
            f"{counts.failed} failed, {stats.errors} errors"
        )

    def _table(self) -> Group:
        stats, counts = self._crawler.stats, self._counts
        pages_s, bytes_s = stats.rates()
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column(justify="right")
        table.add_row("elapsed", _duration(stats.elapsed))
        table.add_row("pages", f"{stats.pages:,}  ({pages_s:,.1f}/s)")
        table.add_row("bytes", f"{_size(stats.bytes)}  ({_size(bytes_s)}/s)")
        table.add_row("in flight", f"{stats.fetching}")
        table.add_row("done / failed", f"{counts.done:,} / {counts.failed:,}")
        table.add_row("errors", f"{stats.errors:,}")
        if self._crawler.config.render.enabled:
            table.add_row("rendered", _rendered(stats.render_counts()))
        depths = "  ".join(f"{d}:{n:,}" for d, n in sorted(counts.waiting_by_depth.items())[:10])
        table.add_row("waiting", f"{counts.waiting:,}" + (f"  by depth {depths}" if depths else ""))
        return Group(Text(f"webtrawl — crawl {self._crawler.config.name!r}", style="bold cyan"), table)


def _rendered(counts: dict[str, float]) -> str:
    """Rendering counters in a few words (see `Stats.render_counts`)."""
    return (
        f"{counts['rendered']:,.0f} pages in {counts['render_seconds']:,.1f} s, {counts['subresources']:,.0f} "
        f"subresources, {counts['render_timeouts']:,.0f} cut by the timeout, {counts['browser_restarts']:,.0f} "
        "browser restarts"
    )


def report_line(report: CrawlReport) -> str:
    """The end-of-run report in one line (`--quiet`), for scripts and logs."""
    return (
        f"{report.outcome}: {report.pages} pages, {report.bytes} bytes in {report.elapsed:.1f} s "
        f"({report.pages_per_second:.1f} pages/s); {report.done_total} done, "
        f"{report.failed_total} failed, {report.waiting} waiting"
    )


def print_report(report: CrawlReport, console: Console | None = None) -> None:
    """The end-of-run report: totals, rate, and counts by status, failure and drop reason."""
    console = console or Console()
    console.print(f"[bold]{report.outcome}[/bold]: crawl {report.name!r}")
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column(justify="right")
    summary.add_row("pages this run", f"{report.pages:,}")
    summary.add_row("bytes", _size(report.bytes))
    summary.add_row("elapsed", f"{report.elapsed:.1f} s")
    summary.add_row("pages/s", f"{report.pages_per_second:,.1f}")
    summary.add_row("done (whole crawl)", f"{report.done_total:,}")
    summary.add_row("failed (whole crawl)", f"{report.failed_total:,}")
    summary.add_row("still waiting", f"{report.waiting:,}")
    if report.render:
        summary.add_row("rendered", _rendered(report.render))
    if report.media:
        media = report.media
        summary.add_row(
            "media files",
            f"{media['stored']:,} ({_size(media['bytes'])}), {media['duplicates']:,} duplicates, "
            f"{media['failed']:,} failed",
        )
    console.print(summary)
    for title, counts in (
        ("by status", report.statuses),
        ("failed by reason", report.failures),
        ("dropped by reason", report.drops),
    ):
        if counts:
            table = Table(title=title, title_justify="left", show_header=False, box=None, padding=(0, 2))
            for key, value in counts.items():
                table.add_row(str(key), f"{value:,}")
            console.print(table)


def describe(event: Event) -> str:
    """A coordinator's event as one line of the terminal."""
    match event:
        case LeaseHeld(name):
            return f"crawl {name!r} has a coordinator lease: waiting for it to expire (it may have died)"
        case Restored(name, urls):
            return f"{name}: the crawl was new in Redis: {urls:,} URL(s) restored from this directory's index"
        case Requeued(name, urls):
            return f"{name}: {urls:,} URL(s) due for a revisit went back to their partitions"
        case Gathering():
            lines = [
                f"{event.name}: {event.gathered:,} results gathered, {event.waiting:,} waiting, "
                f"{event.running:,} running, {event.backlog:,} to gather; {len(event.nodes)} node(s)"
            ]
            for node, info in sorted(event.nodes.items()):
                lines.append(
                    f"  {node} {info.get('state', '?'):8} {info.get('pages', 0):>8,} pages "
                    f"{info.get('pages_per_s', 0):>7.1f}/s  {info.get('in_flight', 0):>3} in flight  "
                    f"{len(info.get('partitions', [])):>3} partitions"
                )
            return "\n".join(lines)


def print_nodes(reports: dict[str, dict[str, Any]]) -> None:
    """The final per-node table."""
    if not reports:
        return
    print(f"{'node':8} {'host':16} {'pages':>8} {'bytes':>12} {'seconds':>8} {'pages/s':>8}")
    for node, r in sorted(reports.items()):
        print(
            f"{node:8} {str(r.get('host', ''))[:16]:16} {r.get('pages', 0):>8,} {r.get('bytes', 0):>12,} "
            f"{r.get('elapsed', 0):>8.1f} {r.get('pages_per_s', 0):>8.1f}"
        )


def print_status(status: dict[str, Any]) -> None:
    """What `webtrawl status --redis` prints: the crawl's counts, its nodes and its dedup filters."""
    print(f"crawl {status['name']!r} ({status['control']})")
    for label, count in status["counts"].items():
        print(f"  {label:10} {count:>10,}")
    print(
        f"  {'node':8} {'host':16} {'pid':>7} {'state':9} {'parts':>5} {'pages':>8} {'pages/s':>8} "
        f"{'in flight':>9} {'heartbeat':>10}"
    )
    for node, info in status["nodes"].items():
        print(
            f"  {node:8} {str(info.get('host', ''))[:16]:16} {info.get('pid', 0):>7} {info.get('state', '?'):9} "
            f"{len(info.get('partitions', [])):>5} {info.get('pages', 0):>8,} {info.get('pages_per_s', 0):>8.1f} "
            f"{info.get('in_flight', 0):>9} {info['heartbeat_age']:>8.1f} s"
        )
    bloom = status["bloom"]
    if status["dedup"] == "bloom":
        print(
            f"  Bloom filters: {bloom['urls']:,} URLs in {bloom['bytes']:,} bytes, "
            f"fullest {bloom['fill']:.1%} set; "
            f"estimated URLs lost to false positives: {bloom['estimated_false_drops']:.1f}"
        )
