"""What the terminal shows: a live display while crawling (or a log line every few seconds when stdout
is not a terminal), and the report at the end.

The live display is redrawn in place twice a second, so every figure keeps its column whatever its size,
and each says what it counts: a new user cannot otherwise tell "failed" (URLs the crawl gave up on, for
good) from "errors" (attempts that went wrong, most of them retried). Its progress is done of known URLs,
which grows as the crawl finds more; its ETA is the dashboard's (what is known now, at the current rate).
At the end a crawl often waits only for a retry minutes away: the display then names the URL and when,
instead of looking stuck."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .cluster.events import Event, LeaseHeld, Requeued, Restored, Running
from .crawler import Crawler
from .models import FrontierCounts
from .reader import Retry
from .reader import open as open_crawl
from .stats import CrawlReport
from .store.live import time_left

REFRESH = 0.5
"""Seconds between two updates of the live display."""
PLAIN_EVERY = 5.0
"""Seconds between two log lines in plain mode."""
BAR = 40
"""Characters of the progress bar."""
LABEL = 10
NUMBER = 11
"""Characters of a figure, right-aligned: room for 999,999,999, so a growing number moves nothing."""
RETRIES_NAMED = 3
"""URLs waiting for a retry named when nothing else is left."""
FEW_LEFT = 20
"""At most this many URLs waiting, nothing in flight: the crawl may be down to its retries, so the display
looks which (a query of the store the display does not make while the crawl is busy)."""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    """What the display shows at one moment: this run's counters, and the whole crawl's URLs by state."""

    name: str
    elapsed: float
    responses: int
    """Responses received in this run, any status (`Stats.pages`)."""
    bytes: int
    pages_per_second: float
    bytes_per_second: float
    in_flight: int
    errors: int
    """Fetch attempts of this run without a usable response or with a 5xx/429 (`Stats.errors`): a URL
    retried three times counts three, and may still end done."""
    counts: FrontierCounts
    max_attempts: int
    """Attempts a URL gets (`FetchConfig.max_attempts`), for "attempt 2 of 4"."""
    retries: tuple[Retry, ...] = ()
    """URLs waiting for a retry, looked up only when little else is left."""
    rendered: dict[str, float] | None = None
    """With rendering: `Stats.render_counts()`."""
    now: float = field(default_factory=time.time)

    @property
    def known(self) -> int:
        """URLs done, waiting or in flight: what the crawl has to do as far as it knows (failed ones are
        out of both sides of the fraction, so a crawl with failures still ends at 100%)."""
        return self.counts.done + self.counts.waiting + self.counts.running

    @property
    def fraction(self) -> float:
        """Done of known, rounded down to a thousandth: 100.0% only once nothing is left."""
        return math.floor(1000 * self.counts.done / self.known) / 1000 if self.known else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds until the URLs known now are fetched at the current rate, as the dashboard estimates (more
        may be found meanwhile), and at least until the last retry named is due; None while nothing is
        fetched and no retry is named."""
        by_rate = time_left(self.counts.waiting, self.counts.running, self.pages_per_second)
        retried = max((retry.due_at - self.now for retry in self.retries), default=None)
        known = [seconds for seconds in (by_rate, retried) if seconds is not None]
        return max(0.0, *known) if known else None


class Progress:
    """Shows a running crawl; use as `async with Progress(crawler):` around `crawler.run()`."""

    def __init__(self, crawler: Crawler, *, plain: bool, console: Console | None = None) -> None:
        self._crawler = crawler
        self._plain = plain
        self._console = console or Console(stderr=plain)
        self._task: asyncio.Task[None] | None = None
        self._counts = FrontierCounts()
        self._retries: tuple[Retry, ...] = ()

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

    async def refresh(self) -> None:
        """Read the frontier's counts again, and when little is left, which URLs wait for a retry."""
        frontier = self._crawler.frontier
        if frontier is None:
            return
        with contextlib.suppress(Exception):  # the display must never break the crawl
            self._counts = counts = await frontier.counts()
            few_left = counts.running == 0 and self._crawler.stats.fetching == 0 and 0 < counts.waiting <= FEW_LEFT
            self._retries = await asyncio.to_thread(self._waiting_retries) if few_left else ()

    def _waiting_retries(self) -> tuple[Retry, ...]:
        config = self._crawler.config
        with open_crawl(config.out, config.name) as crawl:
            return tuple(crawl.retries(RETRIES_NAMED))

    def figures(self) -> Figures:
        """The display's figures now (the rate is over the last ten seconds or so)."""
        stats, config = self._crawler.stats, self._crawler.config
        pages_per_second, bytes_per_second = stats.rates()
        return Figures(
            name=config.name,
            elapsed=stats.elapsed,
            responses=stats.pages,
            bytes=stats.bytes,
            pages_per_second=pages_per_second,
            bytes_per_second=bytes_per_second,
            in_flight=stats.fetching,
            errors=stats.errors,
            counts=self._counts,
            retries=self._retries,
            max_attempts=config.fetch.max_attempts,
            rendered=stats.render_counts() if config.render.enabled else None,
        )

    async def _show(self) -> None:
        if self._plain:
            while True:
                await asyncio.sleep(PLAIN_EVERY)
                await self.refresh()
                self._console.print(plain_line(self.figures()), highlight=False, soft_wrap=True)
        await self.refresh()
        with Live(live_view(self.figures()), console=self._console, refresh_per_second=4, transient=True) as live:
            tick = 0
            while True:
                await asyncio.sleep(REFRESH)
                tick += 1
                if tick % 2 == 0:
                    await self.refresh()
                live.update(live_view(self.figures()))


def plain_line(f: Figures) -> str:
    """The figures as one log line (stdout is not a terminal)."""
    counts = f.counts
    line = (
        f"[{_duration(f.elapsed)}] {f.fraction:.1%} done: {counts.done:,} of {f.known:,} known URLs, "
        f"{f.pages_per_second:,.1f} pages/s, ETA {_eta(f)}; {f.in_flight:,} in flight, {counts.waiting:,} waiting, "
        f"{counts.failed:,} failed (URLs given up on), {f.errors:,} errors (fetch attempts with no response "
        f"or a 5xx/429, retried or not); this run {f.responses:,} responses, {_size(f.bytes)}"
    )
    line += "".join(f"; retry {_retry(f, retry)}" for retry in f.retries)
    return line + (f"; and {others:,} more URL(s) waiting" if (others := _others_waiting(f)) > 0 else "")


def live_view(f: Figures) -> Group:
    """The figures as the terminal shows them, redrawn in place: every figure in a column of its own width,
    right-aligned, so nothing moves from one redraw to the next."""
    counts = f.counts
    filled = int(f.fraction * BAR)
    bar = Text(no_wrap=True, overflow="ellipsis")
    bar.append("█" * filled, style="green").append("░" * (BAR - filled), style="dim")
    bar.append(f" {f.fraction:7.1%}  ETA {_eta(f):>{NUMBER}}")
    depths = "  ".join(f"{d}:{n:,}" for d, n in sorted(counts.waiting_by_depth.items())[:10])
    rows = [
        ("done", f"{counts.done:,}", f"of {f.known:>{NUMBER},} known (done + waiting + in flight)"),
        ("rate", f"{f.pages_per_second:,.1f}", f"pages/s, {_size(f.bytes_per_second)}/s (last 10 s)"),
        ("in flight", f"{f.in_flight:,}", "URLs being fetched now"),
        ("waiting", f"{counts.waiting:,}", "URLs to fetch" + (f", by depth {depths}" if depths else "")),
        ("failed", f"{counts.failed:,}", "URLs given up on (HTTP error, robots.txt, retries spent)"),
        ("errors", f"{f.errors:,}", "attempts this run: no response or 5xx/429, retried or not"),
        ("fetched", f"{f.responses:,}", f"responses this run, {_size(f.bytes)}"),
    ]
    if f.rendered is not None:
        rows.append(("rendered", f"{f.rendered['rendered']:,.0f}", _rendered(f.rendered)))
    lines = [Text(f"webtrawl — crawl {f.name!r}, elapsed {_duration(f.elapsed)}", style="bold cyan"), bar]
    lines += [_row(label, figure, words) for label, figure, words in rows]
    lines += [_row("retry", "", _retry(f, retry), whole=True) for retry in f.retries]  # a URL is not cut
    if (others := _others_waiting(f)) > 0:
        lines.append(_row("", "", f"and {others:,} more URL(s) waiting"))
    return Group(*lines)


def _row(label: str, figure: str, words: str, *, whole: bool = False) -> Text:
    """A label, a figure in its column, and what it counts: cut at the terminal's width (a line that wraps
    would push the next ones down), or with `whole`, folded onto the next line."""
    row = Text(no_wrap=not whole, overflow="fold" if whole else "ellipsis")
    return row.append(f"{label:<{LABEL}}", style="bold").append(f"{figure:>{NUMBER}}  {words}")


def _eta(f: Figures) -> str:
    eta = f.eta
    return "-" if eta is None else _duration(eta)


def _retry(f: Figures, retry: Retry) -> str:
    """A URL waiting for a retry: what its last attempt got, and when the next is due."""
    at = time.strftime("%H:%M:%S", time.localtime(retry.due_at))
    wait = max(0, round(retry.due_at - f.now))
    return f"in {wait:,} s ({at}), attempt {retry.attempts + 1} of {f.max_attempts}: {retry.url} (last: {retry.reason})"


def _others_waiting(f: Figures) -> int:
    """URLs waiting besides the retries named (none when no retry is named)."""
    return f.counts.waiting - len(f.retries) if f.retries else 0


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
        case Restored(name, urls, shards, without):
            lost = f", without {without:,} it could not read (--refetch-lost)" if without else ""
            return (
                f"{name}: the crawl was new in Redis: {urls:,} URL(s) restored from this directory's index "
                f"and {shards:,} shard(s){lost}"
            )
        case Requeued(name, urls):
            return f"{name}: {urls:,} URL(s) due for a revisit went back to their partitions"
        case Running():
            lines = [
                f"{event.name}: {event.done:,} done, {event.failed:,} failed, {event.waiting:,} waiting, "
                f"{event.running:,} running; {len(event.nodes)} node(s)"
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
