"""The crawl loop: frontier → politeness → fetch → parse → sinks → complete.

One event loop runs it. The main loop claims URLs from ready hosts while fetch slots are free; each URL
is handled by its own task (owned by a TaskGroup) that fetches, parses and turns the result into a
`Completion`; a bounded queue carries those to the archiver, which appends a batch's records to the
WARC file and flushes them, then hands the batch to the committer, which commits it through the
frontier (the commit order of docs/ARCHITECTURE.md). Blocking work runs on two threads, so the two stages overlap:
the archive thread (WARC and mirror files) and the database thread. Every second a live loop publishes
a snapshot of the run in the store and obeys the command a dashboard left there (pause, resume, stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from . import __version__
from .archiving import COMMIT_BATCH, archive, batches
from .backend import Alone, Backend
from .config import CrawlConfig
from .cpu import StageClocks, current_thread
from .errors import StoreError
from .faults import crash_point
from .fetch.fetcher import Fetcher
from .fetch.page import HttpPages, PageFetcher
from .fetch.robots import ALLOW_ALL
from .frontier.base import Frontier
from .frontier.budgets import Budgets
from .media.handler import MediaHandler
from .media.resolvers import Registry
from .media.sniffed import Sniffs
from .models import Entry, FetchOutcome, FrontierCounts
from .pages import PageHandler
from .politeness import Politeness
from .results import Archived, Result, SiteFiles
from .scope import Scope, SharedHosts
from .sitemaps import Sitemaps
from .stats import CrawlReport, Stats
from .store.crawls import committed_warcs
from .store.db import Database
from .store.index import IndexPace, index_captures
from .store.live import clear_control, publish, snapshot, truncate_wal, wal_size
from .store.mirror import Mirror
from .store.opened import OpenedCrawl, open_crawl_directory, outcome_counts
from .store.replay import WARC_DIR
from .store.shards import Source, Sources
from .store.warc import WarcWriter

log = logging.getLogger(__name__)
T = TypeVar("T")

UNCOMMITTED = 512
"""URLs handed out and not yet committed, at most: fetched pages wait for the database in memory (their
text and links), and a database busy with the search index must slow the fetching, not grow the crawl."""
STOP_GRACE = 5.0
"""Seconds in-flight fetches may take to finish after a stop was asked for."""
LIVE_EVERY = 1.0
"""Seconds between two snapshots the crawl publishes in its store (each also reads its control row)."""
CHECKPOINT_EVERY = 10.0
"""Seconds between two WAL checkpoints that wait for readers (see `store.live.publish`): with readers that
keep coming (an open dashboard), SQLite's own checkpoints could let the WAL grow for the whole crawl."""
WAL_LIMIT = 16 * 1024 * 1024
"""Bytes of WAL after which the committer checkpoints it after its next batch, without waiting for
`CHECKPOINT_EVERY`."""
COUNTS_SHARE = 0.05
"""Most of the database thread's time the snapshot's frontier counts may take (on a big frontier they
are refreshed less often than the snapshot)."""


class Crawler:
    """One run of a crawl; `await Crawler(config).run()` returns its report."""

    def __init__(self, config: CrawlConfig, backend: Backend | None = None) -> None:
        """`backend`: where the crawl's state lives; by default the crawl directory alone (`backend.Alone`)."""
        self.config = config
        self.backend = backend or Alone(config)
        self.stats = Stats()
        self._stopping = False
        self._stop_outcome = "interrupted"
        self._paused = False
        self._wake = asyncio.Event()
        self._claimed_nothing = False
        self._site_files: list[FetchOutcome] = []
        """robots.txt and sitemap responses fetched and not yet handed to the archiver."""
        self._archive_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webtrawl-archive")
        self.frontier: Frontier | None = None

    def stop(self, outcome: str = "interrupted") -> None:
        """Stop handing out URLs; in-flight fetches finish (for a few seconds at most) and are committed.

        `outcome` is what the report says: "interrupted" (by a signal) or "stopped" (from the dashboard).
        """
        if not self._stopping:
            self._stop_outcome = outcome
        self._stopping = True
        self._wake.set()

    def pause(self) -> None:
        """Hand out no URL (robots.txt included) until `resume`; fetches in flight finish and are committed."""
        self._paused = True

    def resume(self) -> None:
        self._paused = False
        self._wake.set()

    def wake(self) -> None:
        """Look at the frontier again now: something outside the loop changed what it may hand out."""
        self._wake.set()

    @property
    def state(self) -> str:
        """What the live snapshot says the crawl is doing: running, paused or stopping."""
        return "stopping" if self._stopping else "paused" if self._paused else "running"

    async def run(self) -> CrawlReport:
        async with open_crawl_directory(
            self.config, db_name=self.backend.db_name, lock_fd=self.backend.lock_fd
        ) as opened:
            try:
                return await self._run(opened)
            finally:  # before the directory is unlocked: no record may be written after that
                self._archive_thread.shutdown(wait=True)

    async def _run(self, opened: OpenedCrawl) -> CrawlReport:
        config, backend = self.config, self.backend
        out, db, crawl_id, seeds = opened.out, opened.db, opened.crawl_id, opened.seeds
        clocks = StageClocks()
        clocks.database = (await db.run(current_thread), await db.read(current_thread))
        clocks.archive = await self._on_archive_thread(current_thread)
        await db.run(clear_control, crawl_id)  # a new run runs, whatever the last one was told
        # Built even without --media: media tasks an earlier run queued are still collected on resume.
        registry = Registry(config.media.resolvers, config.media.kinds)
        sniffs = Sniffs()
        scope = Scope(config.scope, seeds)
        for host in opened.gained_hosts:
            scope.add_host(host)
        fetcher = Fetcher(config.fetch, concurrency=config.concurrency, seeds=seeds)
        politeness = Politeness(
            config.politeness,
            robots=None if config.fetch.respect_robots else ALLOW_ALL,
            robots_attempts=config.fetch.max_attempts,
            backoff=config.fetch.backoff,
            address_of=fetcher.address_of,
        )
        budgets = Budgets(config.scope.max_urls_per_host, config.scope.max_urls_per_template)
        self.frontier = frontier = await backend.open_frontier(self, db, crawl_id, politeness, budgets)
        shared = await backend.shared_hosts(scope, frontier)
        committed = await db.run(committed_warcs, crawl_id)
        warc = await self._on_archive_thread(
            lambda: WarcWriter(
                out / WARC_DIR,
                prefix=backend.warc_prefix,
                max_size=config.warc_size,
                software=f"webtrawl/{__version__}",
                committed=committed,
                family=backend.warc_family,
            )
        )
        mirror = Mirror(out / "mirror") if config.mirror else None
        try:
            await frontier.add(opened.seed_urls())
            async with fetcher, self._page_fetcher(fetcher, politeness) as pages:
                handler = PageHandler(
                    config,
                    scope,
                    pages,
                    politeness,
                    db,
                    self.stats,
                    media=registry if config.media.kinds else None,
                    sniffs=sniffs,
                    twins=backend.twins(db, crawl_id),
                    shared=shared,
                )
                media = MediaHandler(
                    config, fetcher, politeness, db, crawl_id, registry, out, self.stats, sniffs=sniffs, pages=pages
                )
                try:
                    outcome = await self._crawl(
                        frontier, politeness, fetcher, handler, media, warc, mirror, crawl_id, shared
                    )
                finally:
                    await handler.parser.close()
        finally:
            # After a storage failure (a full disk) these may fail too: the first error is the one to tell.
            with _logged(StoreError):
                await frontier.close()
            with _logged(StoreError):
                await self._on_archive_thread(warc.close)
        self.stats.cpu_by_stage = clocks.split(self.stats.cpu, self.stats.cpu_away)
        report = await self._report(db, crawl_id, outcome)
        with _logged(StoreError):  # the last snapshot holds the outcome, for dashboards that outlive the run
            final = snapshot(outcome, self.stats, await frontier.counts())
            await db.run(publish, crawl_id, final, checkpoint=False)
        return report

    @contextlib.asynccontextmanager
    async def _page_fetcher(self, fetcher: Fetcher, politeness: Politeness) -> AsyncIterator[PageFetcher]:
        """How pages are fetched: as served, or rendered in Chromium where `--render` asks for it."""
        if not self.config.render.enabled:
            yield HttpPages(fetcher)
            return
        from .render.renderer import Renderer

        robots = functools.partial(self.backend.robots_rules, fetcher, keep=self._keep_site_file)
        async with Renderer(self.config, fetcher, politeness, self.stats, robots) as renderer:
            yield renderer

    async def _crawl(
        self,
        frontier: Frontier,
        politeness: Politeness,
        fetcher: Fetcher,
        handler: PageHandler,
        media: MediaHandler,
        warc: WarcWriter,
        mirror: Mirror | None,
        crawl_id: int,
        shared: SharedHosts | None,
    ) -> str:
        """Run the main loop until the crawl ends or is stopped; returns why it ended."""
        config = self.config
        results: asyncio.Queue[Result | None] = asyncio.Queue(maxsize=COMMIT_BATCH)
        robots_pending: set[str] = set()
        fetches: set[asyncio.Task[None]] = set()
        deadline = None if config.max_time is None else time.monotonic() + config.max_time
        outcome = "finished"
        queueing = 0  # results waiting for room in the queue: they hold their slot, so memory stays bounded

        async def handle(entry: Entry) -> None:
            nonlocal queueing
            collecting = entry.kind == "media"
            try:
                result = await (media if collecting else handler).handle(entry)
            finally:
                if collecting:
                    self.stats.media_tasks -= 1
                else:
                    self.stats.fetching -= 1
                self._wake.set()
            queueing += 1
            try:
                await results.put(result)
            finally:
                queueing -= 1
                self._wake.set()

        sitemaps = (
            Sitemaps(
                fetcher, politeness, handler.scope, max_urls=config.scope.max_sitemap_urls, keep=self._keep_site_file
            )
            if config.scope.sitemaps
            else None
        )

        async def robots(host: str) -> None:
            started = time.monotonic()
            try:
                politeness.reserve(host)
                try:
                    rules = await self.backend.robots_rules(fetcher, host, self._keep_site_file)
                finally:
                    politeness.release(host)
                if sitemaps is not None and politeness.rules(host) is None:
                    # Read once per host, before its URLs are handed out, so sitemap requests keep its pace.
                    # `outcome` changes only when the main loop stops early: then reading is pointless.
                    if shared is not None:  # the host may be one another node's seed redirected to
                        await shared.learn(started)
                    urls, drops = await sitemaps.discover(host, rules, lambda: outcome != "finished")
                    await frontier.add(urls, drops)
                politeness.set_rules(host, rules)
            finally:
                robots_pending.discard(host)
                self._wake.set()

        archived: asyncio.Queue[Archived | None] = asyncio.Queue(maxsize=1)
        ended = asyncio.Event()
        try:
            async with asyncio.TaskGroup() as tg:
                archiver = tg.create_task(self._archive_loop(results, archived, warc, mirror))
                committer = tg.create_task(self._commit_loop(frontier, archived, handler.db))
                live = tg.create_task(self._live_loop(frontier, handler.db, crawl_id, ended))
                try:
                    while True:
                        if self._stopping:
                            outcome = self._stop_outcome
                            break
                        if deadline is not None and time.monotonic() >= deadline:
                            outcome = "max-time"
                            break
                        # Media tasks have slots of their own; only those waiting for one take page slots, so
                        # the frontier does not hand out more of them than the crawl can start.
                        budget = config.concurrency - self.stats.fetching - queueing
                        budget = min(budget, max(UNCOMMITTED, config.concurrency) - frontier.running)
                        budget -= max(0, self.stats.media_tasks - config.media.concurrency)
                        if config.max_pages is not None:
                            budget = min(budget, config.max_pages - frontier.done_count() - frontier.running)
                            if budget <= 0 and frontier.running == 0:
                                outcome = "max-pages"
                                break
                        if self._paused:
                            budget = 0
                        # robots.txt fetches are bounded like page fetches: a crawl that discovers 100,000
                        # hosts must not start 100,000 of them at once.
                        wanted = politeness.robots_wanted
                        while wanted and not self._paused and len(robots_pending) < config.concurrency:
                            host = next(iter(wanted))
                            del wanted[host]
                            if host not in robots_pending:
                                robots_pending.add(host)
                                tg.create_task(robots(host))
                        if self._site_files:
                            await results.put(self._take_site_files())
                        self._wake.clear()  # before claiming: what happens from here on wakes the wait below
                        entries = await frontier.claim(budget) if budget > 0 else []
                        self._claimed_nothing = budget > 0 and not entries
                        for entry in entries:
                            if entry.kind == "media":
                                self.stats.media_tasks += 1
                            else:
                                self.stats.fetching += 1
                            task = tg.create_task(handle(entry))
                            fetches.add(task)
                            task.add_done_callback(fetches.discard)
                        if frontier.exhausted() and not robots_pending:
                            break
                        if entries and len(entries) == budget:
                            continue
                        if politeness.robots_wanted and len(robots_pending) < config.concurrency and not self._paused:
                            continue  # the claim asked for new hosts' robots.txt: fetch it now, not after the wait
                        # With no fetch slot free, only an ending fetch (which sets the event) changes anything.
                        wakeup = frontier.next_wakeup() if budget > 0 else None
                        timeout = 1.0 if wakeup is None else min(wakeup, 1.0)
                        with contextlib.suppress(TimeoutError):  # not wait_for: see `archiving.batches`
                            async with asyncio.timeout(timeout):
                                await self._wake.wait()
                    if fetches:
                        _done, late = await asyncio.wait(fetches, timeout=STOP_GRACE)
                        for task in late:
                            task.cancel()
                    if self._site_files:
                        await results.put(self._take_site_files())
                    await results.put(None)
                    await archiver
                    await committer
                finally:
                    # On the way out of an error too; should a library swallow the cancellation, the flag ends it.
                    ended.set()
                    live.cancel()
        except ExceptionGroup as group:  # the archive or database failed (a full disk): say so plainly
            failures = group.subgroup(StoreError)
            if failures is None:
                raise
            raise failures.exceptions[0] from None
        return outcome

    async def _archive_loop(
        self,
        results: asyncio.Queue[Result | None],
        archived: asyncio.Queue[Archived | None],
        warc: WarcWriter,
        mirror: Mirror | None,
    ) -> None:
        """Stage one of the commit: append each batch's records to the archive and flush them."""
        async for batch in batches(results, self._starved):
            checkpoint = await self._on_archive_thread(archive, batch, warc, mirror)
            await archived.put(Archived.of(batch, checkpoint))
        await archived.put(None)

    def _keep_site_file(self, outcome: FetchOutcome) -> None:
        """Have a robots.txt or sitemap response archived (by the main loop's next turn): one that got no
        answer has nothing to archive."""
        if outcome.status is not None:
            self._site_files.append(outcome)

    def _take_site_files(self) -> SiteFiles:
        files, self._site_files = SiteFiles(self._site_files), []
        return files

    def _starved(self) -> bool:
        """Whether the crawl waits for what is being committed: nothing in flight, and the last claim found
        nothing to hand out (the next URLs may be this batch's links)."""
        return self._claimed_nothing and not (self.stats.fetching or self.stats.media_tasks)

    async def _commit_loop(
        self,
        frontier: Frontier,
        archived: asyncio.Queue[Archived | None],
        db: Database,
    ) -> None:
        """Stage two: one database transaction per archived batch, in archive order.

        It overlaps with stage one writing the next batch; a crash between the two leaves records past
        the committed end, which the next run cuts off. The search index follows in chunks.
        """
        pace, wal_after_try = IndexPace(), 0
        while (batch := await archived.get()) is not None:
            crash_point("before-commit")
            await frontier.complete(batch.pages, batch.checkpoint, batch.site_files)
            crash_point("after-commit")
            self._wake.set()
            pace.added(sum(completion.capture is not None for completion in batch.pages))
            if pace.due():
                await db.run(self._index_captures)
                pace.caught_up()
            # Checked by the writer, so a fast crawl cannot outgrow it. A try that readers keep from truncating
            # (an export holds one for long) costs `CHECKPOINT_WAIT`: the next waits for another WAL_LIMIT.
            if wal_size(db.path) > max(WAL_LIMIT, wal_after_try + WAL_LIMIT):
                await db.run(truncate_wal)
                wal_after_try = wal_size(db.path)
        while await db.run(self._index_captures):
            pass

    def _index_captures(self, conn: sqlite3.Connection) -> int:
        """`index_captures`, its CPU counted as the index stage's (on the database thread)."""
        with self.stats.timed("index"):
            return index_captures(conn)

    async def _live_loop(self, frontier: Frontier, db: Database, crawl_id: int, ended: asyncio.Event) -> None:
        """Every second: publish a snapshot in the store and obey the command a dashboard left there.

        Now and then it also checkpoints the WAL. A failure here is logged, never fatal (a full disk is reported
        by the committer). It also ends once `ended` is set: redis-py can lose a cancellation (redis/redis-py#2551).
        """
        counts = FrontierCounts()
        counted_at, count_cost = float("-inf"), 0.0
        checkpointed, last_command, failing = time.monotonic(), None, False
        while not ended.is_set():
            try:
                now = time.monotonic()
                if now - counted_at >= count_cost / COUNTS_SHARE:
                    counts = await frontier.counts()
                    counted_at = time.monotonic()
                    count_cost = counted_at - now
                due = now - checkpointed >= CHECKPOINT_EVERY
                command = await db.run(publish, crawl_id, snapshot(self.state, self.stats, counts), checkpoint=due)
                checkpointed = now if due else checkpointed
                failing = False
            except StoreError as exc:
                if not failing:
                    log.warning("could not publish the crawl's live state: %s", exc)
                failing = True
            else:
                if command != last_command:  # obeyed once, so a direct `pause()` is not undone by an old "run"
                    last_command = command
                    if command == "pause":
                        self.pause()
                    elif command == "run":
                        self.resume()
                    elif command == "stop":
                        self.stop("stopped")
                    continue  # publish the new state at once: the dashboard that asked is waiting for it
            await asyncio.sleep(LIVE_EVERY)

    async def _on_archive_thread(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._archive_thread, fn, *args)

    async def _report(self, db: Database, crawl_id: int, outcome: str) -> CrawlReport:
        assert self.frontier is not None
        counts = await self.frontier.counts()
        return CrawlReport(
            name=self.config.name,
            outcome=outcome,
            pages=self.stats.pages,
            bytes=self.stats.bytes,
            elapsed=self.stats.elapsed,
            done_total=counts.done,
            failed_total=counts.failed,
            waiting=counts.waiting,
            render=self.stats.render_counts() if self.config.render.enabled else {},
            **await db.run(lambda conn: outcome_counts(Sources.of(Source(0, conn, crawl_id, self.config.out)))),
        )


@contextlib.contextmanager
def _logged(*errors: type[Exception]) -> Iterator[None]:
    """Log and swallow `errors`: for clean-up that must not hide the error that caused it."""
    try:
        yield
    except errors as exc:
        log.warning("while closing the crawl: %s", exc)
