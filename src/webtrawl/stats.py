"""Counters of a running crawl, and the report at its end.

The crawler updates `Stats` on the event loop; the progress display reads it. Rates are over a sliding
window so the display shows the current speed, while the report divides totals by elapsed time.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict, deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass(slots=True)
class Stats:
    started: float = field(default_factory=time.monotonic)
    pages: int = 0
    """Responses received in this run (any status)."""
    bytes: int = 0
    """Body bytes received in this run."""
    errors: int = 0
    """Fetches that ended without a usable response, or with a 5xx/429."""
    fetching: int = 0
    media_tasks: int = 0
    """Media tasks handed out and not yet ended (waiting for a media slot or downloading)."""
    statuses: Counter[int] = field(default_factory=Counter)
    rendered: int = 0
    """Pages rendered in the browser in this run."""
    render_seconds: float = 0.0
    subresources: int = 0
    """Requests of rendered pages fetched (and archived) in this run; those served from memory not counted."""
    render_timeouts: int = 0
    """Rendered pages some step of which ran out of time: the network never went idle, or `--render-timeout`
    cut it short."""
    browser_restarts: int = 0
    cpu: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    """CPU seconds of the sections timed by stage (`timed`)."""
    cpu_away: float = 0.0
    """Of those, the seconds other processes used (a parse worker's), which the crawl's clocks do not see."""
    cpu_by_stage: dict[str, float] = field(default_factory=dict)
    """At the end of a run: CPU seconds of every stage (`webtrawl.cpu.split`)."""
    _window: deque[tuple[float, int, int]] = field(default_factory=lambda: deque(maxlen=64))

    def record(self, status: int | None, size: int, error: str | None) -> None:
        if status is not None:
            self.pages += 1
            self.statuses[status] += 1
        self.bytes += size
        if error or status is None or status >= 500 or status == 429:
            self.errors += 1

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Count the CPU a synchronous section uses (its thread's clock) toward `stage`."""
        started = time.thread_time()
        try:
            yield
        finally:
            self.cpu[stage] += time.thread_time() - started

    def add_cpu(self, seconds: Mapping[str, float], *, away: bool) -> None:
        """Count CPU seconds by stage measured elsewhere: by a section itself, on the loop or (`away`) in
        another process."""
        for stage, spent in seconds.items():
            self.cpu[stage] += spent
            if away:
                self.cpu_away += spent

    def render_counts(self) -> dict[str, float]:
        """The rendering counters as the snapshot, the report and /metrics name them."""
        return {
            "rendered": self.rendered,
            "render_seconds": round(self.render_seconds, 2),
            "subresources": self.subresources,
            "render_timeouts": self.render_timeouts,
            "browser_restarts": self.browser_restarts,
        }

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def rates(self) -> tuple[float, float]:
        """(pages/s, bytes/s) over roughly the last ten seconds; call it about once a second."""
        now = time.monotonic()
        if not self._window:
            self._window.append((self.started, 0, 0))
        self._window.append((now, self.pages, self.bytes))
        while len(self._window) > 2 and now - self._window[0][0] > 10:
            self._window.popleft()
        then, pages, size = self._window[0]
        span = now - then
        if span <= 0:
            return 0.0, 0.0
        return (self.pages - pages) / span, (self.bytes - size) / span


@dataclass(slots=True, kw_only=True)
class CrawlReport:
    """What a run did, and where the whole crawl stands."""

    name: str
    outcome: str
    """"finished", "max-pages", "max-time", "interrupted" (by a signal) or "stopped" (by `webtrawl control`)."""
    pages: int
    bytes: int
    elapsed: float
    done_total: int
    failed_total: int
    waiting: int
    statuses: dict[int, int]
    failures: dict[str, int]
    drops: dict[str, int]
    render: dict[str, float] = field(default_factory=dict)
    """With rendering: this run's rendered pages, render seconds, subresources, timeouts and browser restarts."""
    media: dict[str, int] = field(default_factory=dict)
    """Media files of the whole crawl (`store.media.media_counts`): stored, duplicates, failed, bytes."""

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.elapsed if self.elapsed > 0 else 0.0
