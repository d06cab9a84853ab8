"""Reading a crawl directory from Python: `webtrawl.open(DIR)` gives what `export`, `show`, `status` and the
dashboard's search give on the command line, as values.

It only reads, through one read-only connection, so it works on a finished crawl and on one running in the
same directory (the store is in WAL mode: a reader sees the last committed batch and never blocks the
crawl). Each call is answered by the store functions the commands use, so a reader sees what they show.
An iterator (`captures`, `failed`, `dropped`) reads one snapshot as it goes: until it is exhausted or
closed it keeps the crawl from truncating its write-ahead log, so a long-lived one is better read to its end.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType

from .errors import StoreError
from .models import FrontierCounts
from .store.browse import Filters
from .store.crawls import crawl_name
from .store.db import DB_NAME, connect
from .store.export import capture_rows
from .store.overview import Overview, overview
from .store.problems import DroppedRow, FailedRow, Listed, Row, list_dropped, list_failed
from .store.replay import ArchivedCapture
from .store.search import Hit, search
from .store.shards import Sources
from .store.shardsearch import search_shards
from .store.show import ArchivedMessage, captures_of, latest_archived, read_message
from .urls import normalize


@dataclass(frozen=True, slots=True)
class Capture:
    """One fetch of one URL, as `webtrawl export` writes it (the fields of `store.export.FIELDS`)."""

    url: str
    final_url: str
    """Where a redirect leads in the end (followed through the crawl's captures); else the URL itself."""
    status: int | None
    """None when the fetch got no response (see `error`)."""
    content_type: str
    size: int
    title: str
    depth: int | None
    fetched_at: str
    """ISO 8601 in UTC, to the second."""
    warc_file: str | None
    """The WARC file (in DIR/warc) holding the record, or None when nothing was archived."""
    warc_offset: int | None
    warc_length: int | None
    payload_digest: str | None
    truncated: str | None
    """Why the body is incomplete ("length", "time", "disconnect", "not-downloaded"), or None."""
    error: str | None
    redirects: tuple[str, ...]
    """The URLs that redirected to this one, first first."""
    node: str | None
    """In a distributed crawl, the node that fetched it (its WARC file is in that node's directory)."""


@dataclass(frozen=True, slots=True)
class Record:
    """A URL's latest archived response, from its WARC record."""

    capture: ArchivedCapture
    """The capture shown: the URL's latest one with a record."""
    source: ArchivedCapture
    """The capture whose record holds the content: `capture` itself, or for an unchanged re-fetch (a revisit
    record, which holds no payload) the earlier capture it repeats."""
    message: ArchivedMessage

    @property
    def status(self) -> int:
        return int(self._head_lines()[0].split(" ", 2)[1])

    @property
    def headers(self) -> list[tuple[str, str]]:
        """The response headers as received, in order."""
        return [
            (name.strip(), value.strip()) for name, _, value in (line.partition(":") for line in self._head_lines()[1:])
        ]

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)

    @property
    def body(self) -> bytes:
        """The payload as the server sent it: still compressed when it came with a Content-Encoding."""
        return self.message.payload

    def decoded(self) -> bytes:
        """The payload with its Content-Encoding undone (what a browser renders), cut at 64 MB; a damaged
        encoding gives what decoded before the fault."""
        return self.message.decoded()[0]

    def _head_lines(self) -> list[str]:
        return self.message.head.decode("latin-1").rstrip("\r\n").split("\r\n")


@dataclass(frozen=True, slots=True)
class Retry:
    """A URL waiting for another attempt after a failure that may pass (no response, a 5xx, a 429)."""

    url: str
    reason: str
    """What the last attempt got."""
    attempts: int
    """Attempts made so far."""
    due_at: float
    """When the next attempt may start (seconds since the epoch)."""


class CrawlReader:
    """One crawl of a directory, read-only; use `webtrawl.open(DIR)` as a context manager."""

    def __init__(self, directory: str | Path, name: str | None = None) -> None:
        self.directory = Path(directory)
        conn = connect(self.directory / DB_NAME, readonly=True)
        try:
            self.name = crawl_name(conn, name)
        except sqlite3.DatabaseError as exc:  # a database, but not a crawl's
            raise StoreError(f"{self.directory / DB_NAME} is not a webtrawl crawl database ({exc})") from None
        finally:
            conn.close()
        self._sources = Sources.open(self.directory, self.name)
        self.unreachable_shards = [place.key for place in self._sources.unreachable]
        """A distributed crawl's shards this machine cannot read (`host:directory`): their pages are not in
        `captures` or `search`."""

    def __enter__(self) -> CrawlReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._sources.close()

    def captures(self) -> Iterator[Capture]:
        """Every capture in capture order (of a distributed crawl: every shard's, merged by fetch time): a
        URL fetched twice (a retry, a re-crawl) comes twice."""
        for row in capture_rows(self._sources.all):
            yield Capture(**{**row, "redirects": tuple(row["redirects"])})

    def search(self, query: str, limit: int = 20) -> list[Hit]:
        """The captures whose title, URL or text match `query`, best first, as the dashboard's search finds
        them: words, "a phrase", prefix*, AND / OR / NOT and parentheses (a query that cannot be read raises
        `store.browse.QueryError`, a ValueError saying why). A hit's `page` has the capture's url, title and
        status; `snippet` is the matching text in segments, `match` marking the words found.

        The crawl indexes text a few seconds after it commits it, so the latest captures of a running
        crawl may not be found yet (`stats.unindexed` counts them). A distributed crawl's shards are searched
        together, ranked as one index would rank them (`store.shardsearch`)."""
        if self._sources.distributed:
            return search_shards(self._sources, query, Filters(), limit=limit).hits
        (source,) = self._sources.all
        return search(source.conn, source.crawl_id, query, Filters(), limit=limit, budget=float("inf")).hits

    def record(self, url: str) -> Record:
        """The latest archived response of `url` (normalized as the crawl does). StoreError says why there is
        none: never found, dropped, failed without a response, body not downloaded, WARC file missing."""
        found = captures_of(self._sources.all, normalize(url))
        shown, holder = latest_archived(self._sources.all, found)
        return Record(shown.capture, holder.capture, read_message(holder))

    def failed(self, reason: str = "") -> Iterator[FailedRow]:
        """The URLs the crawl gave up on (an HTTP error, robots.txt, a failure after its last retry), in the
        order they were found, as the dashboard lists them: url, reason, attempts, depth, when."""
        return _every(partial(list_failed, self._sources, reason))

    def dropped(self, reason: str = "") -> Iterator[DroppedRow]:
        """The URLs refused before they reached the frontier (out of scope, too deep, over a budget, …) with
        their first reason and the page that linked them, as the dashboard lists them; a URL the crawl took
        after all, from another page, is not one."""
        return _every(partial(list_dropped, self._sources, reason))

    def retries(self, limit: int = 10) -> list[Retry]:
        """Up to `limit` URLs waiting for a retry, the soonest due first: what keeps a crawl going when
        nothing else is left (of a distributed crawl: as the shards of the nodes that tried them last hold them)."""
        now = time.time()
        found = [
            Retry(*row)
            for source in self._sources.all
            for row in source.conn.execute(
                "SELECT url, IFNULL(reason, ''), attempts, not_before FROM urls "
                "WHERE crawl_id = ? AND state = 0 AND not_before > ? ORDER BY not_before LIMIT ?",
                (source.crawl_id, now, limit),
            )
        ]
        return sorted(found, key=lambda retry: retry.due_at)[:limit]

    @property
    def stats(self) -> Overview:
        """The crawl's totals as the dashboard's overview shows them, read anew at each access: URLs by
        state, captures, bytes, statuses, failures and drops by reason, rate, revisits due. While the crawl
        runs, the URL counts and rate are those it published in the last second."""
        return overview(self._sources)

    @property
    def counts(self) -> FrontierCounts:
        """URLs waiting, running, done and failed (and waiting by depth), read anew at each access."""
        totals = self.stats
        return FrontierCounts(
            waiting=totals.waiting,
            running=totals.running,
            done=totals.done,
            failed=totals.failed,
            waiting_by_depth=totals.waiting_by_depth,
        )


def open(directory: str | Path, name: str | None = None) -> CrawlReader:
    """Open crawl `name` of `directory` for reading (without a name: the directory's only crawl).

    A directory without a crawl, an unknown name, or a name missing where there are several crawls raises
    StoreError, saying which crawls there are."""
    return CrawlReader(directory, name)


_PAGE = 1000
"""Rows read at a time by `failed` and `dropped`."""


def _every(list_page: Callable[..., Listed[Row]]) -> Iterator[Row]:
    """Every row of a keyset-paged list, a page at a time."""
    after = None
    while True:
        page = list_page(after=after, limit=_PAGE)
        yield from page.rows
        if page.next is None:
            return
        after = page.next
