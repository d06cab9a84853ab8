"""The terminal display of `webtrawl crawl`: a bar with percentage and ETA, figures that keep their columns
from one redraw to the next, labels that say what they count, the URL a crawl's end waits for; and the log
line of plain mode."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from tests.crawls import fast_config
from tests.sites import SiteServer
from tests.test_cli import FAST, webtrawl
from tests.test_reader import BROKEN, only_its_retry_left
from webtrawl import Crawler, FetchConfig
from webtrawl.models import FrontierCounts
from webtrawl.progress import BAR, LABEL, NUMBER, Figures, Progress, live_view, plain_line
from webtrawl.reader import Retry

WIDTH = 100

BUSY = Figures(
    name="default",
    elapsed=12.3,
    responses=1_300,
    bytes=45_000_000,
    pages_per_second=12.34,
    bytes_per_second=1_200_000,
    in_flight=8,
    errors=30,
    counts=FrontierCounts(waiting=758, running=8, done=1_234, failed=12, waiting_by_depth={1: 200, 2: 558}),
    max_attempts=4,
)
"""A crawl in full swing: 1,234 done of 2,000 known (61.7%), 766 left at 12.34 pages/s (62 s)."""
NOW = 1_700_000_000.0
ENDING = Figures(
    name="default",
    elapsed=4_000,
    responses=130_000_000,
    bytes=45_000_000_000,
    pages_per_second=0.0,
    bytes_per_second=0.0,
    in_flight=0,
    errors=3_000_000,
    counts=FrontierCounts(waiting=2, running=0, done=123_456_789, failed=12_345, waiting_by_depth={3: 2}),
    retries=(Retry("http://127.0.0.1:8765/broken/", "HTTP 500", 2, NOW + 42),),
    max_attempts=4,
    now=NOW,
)
"""Much later, numbers nine digits long, nothing fetched lately, and a retry all that is left but one URL."""


def shown(figures: Figures) -> list[str]:
    console = Console(width=WIDTH, record=True, color_system=None)
    console.print(live_view(figures))
    return console.export_text().splitlines()


def test_the_bar_shows_done_of_known_with_percentage_and_eta() -> None:
    title, bar, *_rows = shown(BUSY)
    assert title == "webtrawl — crawl 'default', elapsed 0:00:12"
    filled = int(0.617 * BAR)
    assert bar.startswith("█" * filled + "░" * (BAR - filled) + " ")
    assert bar.split()[1:] == ["61.7%", "ETA", "0:01:02"]  # 766 URLs at 12.34 pages/s


def test_every_figure_says_what_it_counts() -> None:
    rows = {line[:LABEL].strip(): line[LABEL:] for line in shown(BUSY)[2:]}
    assert rows["done"].split() == ["1,234", "of", "2,000", "known", "(done", "+", "waiting", "+", "in", "flight)"]
    assert rows["rate"].split()[:2] == ["12.3", "pages/s,"]
    assert rows["in flight"].split()[0] == "8"
    assert rows["waiting"].endswith("758  URLs to fetch, by depth 1:200  2:558")
    assert rows["failed"].endswith("12  URLs given up on (HTTP error, robots.txt, retries spent)")
    assert rows["errors"].endswith("30  attempts this run: no response or 5xx/429, retried or not")
    assert rows["fetched"].startswith(f"{'1,300':>{NUMBER}}  responses this run")


def test_nothing_moves_between_two_redraws() -> None:
    busy, ending = shown(BUSY), shown(ENDING)
    assert len(busy[1]) == len(ending[1]) and busy[1].index("%") == ending[1].index("%")  # the bar line
    for before, after in zip(busy[2:], ending[2:], strict=False):
        assert before[:LABEL] == after[:LABEL]  # the same label, in the same place
        for line in (before, after):  # each number ends at the same column, then its words begin
            number, gap = line[LABEL : LABEL + NUMBER], line[LABEL + NUMBER : LABEL + NUMBER + 2]
            assert number == number.rjust(NUMBER) and number.strip() and gap == "  ", line
    assert shown(ENDING)[2].split()[:4] == ["done", "123,456,789", "of", "123,456,791"]
    assert ending[1].split()[1:] == ["99.9%", "ETA", "0:00:42"]  # not 100% while a URL is left; its retry is due


def test_a_crawl_down_to_its_retries_names_them() -> None:
    *_figures, retry, folded, others = shown(ENDING)  # a long line goes on on the next, not cut
    assert " ".join(f"{retry} {folded}".split()) == (
        f"retry in 42 s ({time.strftime('%H:%M:%S', time.localtime(NOW + 42))}), attempt 3 of 4: "
        "http://127.0.0.1:8765/broken/ (last: HTTP 500)"
    )
    assert others.strip() == "and 1 more URL(s) waiting"
    assert "; retry in 42 s (" in plain_line(ENDING) and plain_line(ENDING).endswith("; and 1 more URL(s) waiting")


def test_the_plain_line_has_the_same_figures() -> None:
    line = plain_line(BUSY)
    assert line.startswith("[0:00:12] 61.7% done: 1,234 of 2,000 known URLs, 12.3 pages/s, ETA 0:01:02; ")
    for part in ("8 in flight", "758 waiting", "12 failed (URLs given up on)", "30 errors (fetch attempts"):
        assert part in line
    assert "retry" not in line
    assert ", ETA -; " in plain_line(replace(BUSY, pages_per_second=0.0))  # nothing fetched lately


@pytest.fixture
async def small_site() -> AsyncIterator[SiteServer]:
    async with SiteServer(pages=20, calendar=False) as server:
        yield server


async def test_a_running_crawl_waiting_for_a_retry_shows_which(small_site: SiteServer, tmp_path: Path) -> None:
    fetch = FetchConfig(backoff=60, read_timeout=5, total_timeout=10)  # due long after the test
    crawler = Crawler(fast_config(small_site.url, tmp_path, fetch=fetch))
    progress = Progress(crawler, plain=False)
    running = asyncio.create_task(crawler.run())
    try:
        await only_its_retry_left(crawler)
        await progress.refresh()
        figures = progress.figures()
    finally:
        crawler.stop()
        await running
    assert (figures.counts.waiting, figures.counts.running) == (1, 0)
    assert figures.fraction < 1 and figures.counts.done > 1
    assert f"; retry in {figures.retries[0].due_at - figures.now:,.0f} s (" in plain_line(figures)
    assert plain_line(figures).endswith(f"attempt 2 of 4: {small_site.site.url(BROKEN)} (last: HTTP 500)")
    assert figures.eta is not None and figures.eta > 30  # the crawl cannot end before its retry


async def test_webtrawl_crawl_logs_done_of_known_when_stdout_is_not_a_terminal(tmp_path: Path) -> None:
    # Each response takes 0.1 s, and /broken/ is asked four times, at least 5.25 s apart from first to last:
    # the crawl outlasts the first log line, due 5 s after it starts.
    async with SiteServer(pages=10, calendar=False, delay=0.1) as server:
        code, _out, err = await webtrawl("crawl", server.url, "--out", str(tmp_path), *FAST)
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("[")]
    assert lines, err
    assert " done: " in lines[0] and " known URLs, " in lines[0] and "pages/s, ETA " in lines[0]
