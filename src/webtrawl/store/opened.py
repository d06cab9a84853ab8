"""A crawl directory opened for a run, the same way by an embedded crawl, a node and a coordinator.

The seeds are normalized once here, so the identity a run is checked against (`crawls.open_crawl`) is the
same whichever process opens the directory: a crawl started alone and resumed with `--redis` (or the
reverse) is recognized, and the same seeds given twice are one seed.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from ..config import CrawlConfig
from ..models import NewURL
from ..urls import NORMALIZATION_VERSION, fingerprint, normalize_seeds, origin
from .crawls import crawl_seeds, open_crawl
from .db import DB_NAME, Database, DirectoryLock, prepare_directory
from .index import status_counts
from .media import media_counts
from .problems import drop_counts_of, failure_counts_of
from .shards import Sources


@dataclass(frozen=True, slots=True)
class OpenedCrawl:
    out: Path
    db: Database
    crawl_id: int
    seeds: list[str]
    """Normalized, each once, in the order given."""
    gained_hosts: list[str]
    """Hosts the scope gained in earlier runs (a seed's redirect to another host)."""
    lock: DirectoryLock
    """Held while the block runs; a child process that writes in the directory too is handed it (`fd`)."""

    def seed_urls(self) -> list[NewURL]:
        """The seeds as they enter the frontier."""
        return [NewURL(url=seed, fp=fingerprint(seed), host=origin(seed), depth=0, kind="seed") for seed in self.seeds]


@contextlib.asynccontextmanager
async def open_crawl_directory(
    config: CrawlConfig, *, db_name: str = DB_NAME, lock_fd: int | None = None
) -> AsyncIterator[OpenedCrawl]:
    """Create or resume crawl `config.name` in `config.out`, locked (with `lock_fd`, through the lock a parent
    process holds and handed down: `DirectoryLock`) and its database open, for as long as the block runs.

    A bad seed is the user's mistake (`ConfigError`), told before anything is created."""
    seeds = normalize_seeds(config.seeds)
    out = prepare_directory(config.out)
    directory_lock = DirectoryLock(out, adopted=lock_fd)
    directory_lock.acquire()
    db = Database(out / db_name)
    try:
        await db.open()
        identity = config.identity(seeds, NORMALIZATION_VERSION)
        crawl_id, gained = await db.run(open_crawl, config.name, identity, add_seeds=config.add_seeds)
        # The seeds given first, then the crawl's others: a resume given fewer seeds keeps the whole scope.
        known = await db.run(crawl_seeds, crawl_id)
        yield OpenedCrawl(out, db, crawl_id, list(dict.fromkeys([*seeds, *known])), gained, directory_lock)
    finally:
        await db.close()
        directory_lock.release()


class OutcomeCounts(TypedDict):
    """What a crawl's report (`stats.CrawlReport`) counts from its index."""

    statuses: dict[int, int]
    failures: dict[str, int]
    drops: dict[str, int]
    media: dict[str, int]
    """Empty when the crawl collected no media."""


def outcome_counts(sources: Sources) -> OutcomeCounts:
    """Responses by status, failures and drops by reason, media by what became of them, over every source."""
    statuses: Counter[int] = Counter()
    media: Counter[str] = Counter()
    for source in sources.all:
        statuses.update(status_counts(source.conn, source.crawl_id))
        media.update(media_counts(source.conn, source.crawl_id))
    return OutcomeCounts(
        statuses=dict(statuses),
        failures=failure_counts_of(sources),
        drops=drop_counts_of(sources),
        media=dict(media) if any(media.values()) else {},
    )


def fetched_since(sources: Sources, since: float) -> dict[str, tuple[int, int]]:
    """Per node, the responses fetched from `since` on (epoch seconds) that the sources hold, and their bytes."""
    fetched: dict[str, tuple[int, int]] = {}
    for source in sources.all:
        for node, pages, size in source.conn.execute(
            "SELECT node, COUNT(*), COALESCE(SUM(size), 0) FROM captures "
            "WHERE crawl_id = ? AND fetched_at >= ? AND status IS NOT NULL AND node IS NOT NULL GROUP BY node",
            (source.crawl_id, since),
        ):
            before = fetched.get(node, (0, 0))
            fetched[node] = (before[0] + pages, before[1] + size)
    return fetched
