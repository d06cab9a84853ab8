"""What the crawl engine (`crawler.Crawler`) is handed: the parts that differ between a crawl run alone and one
node of a distributed crawl (`cluster.node.Node`).

The engine runs the same loop either way; where URL state lives, where near-duplicates and gained hosts are
shared, where robots.txt comes from and what its files are called is the backend's. The engine hands itself
(`Engine`) to the backend when it opens the frontier, so a backend that is told things from outside (a node's
control key) can stop or wake it through its public methods only.
"""

from __future__ import annotations

from typing import Protocol

from .config import CrawlConfig
from .fetch.fetcher import Fetcher
from .fetch.robots import RobotsRules, fetch_robots
from .frontier.base import Frontier
from .frontier.budgets import Budgets
from .frontier.sqlite import SqliteFrontier
from .models import KeepResponse
from .politeness import Politeness
from .scope import Scope, SharedHosts
from .stats import Stats
from .store.db import DB_NAME, Database
from .store.fingerprints import StoredTwins, Twins


class Engine(Protocol):
    """What a backend may do with the engine that runs it."""

    stats: Stats

    @property
    def state(self) -> str:
        """running, paused or stopping."""
        ...

    def stop(self, outcome: str = "interrupted") -> None: ...

    def wake(self) -> None: ...


class Backend(Protocol):
    db_name: str
    """The database file in the crawl directory."""
    lock_fd: int | None
    """The directory's lock, as a descriptor a parent process holds and handed down (a coordinator's own node),
    or None: the crawl takes the lock itself."""
    warc_prefix: str
    """WARC file names start with it."""
    warc_family: str | None
    """A regex of the WARC prefixes earlier runs in this directory wrote with (see `WarcWriter`)."""

    async def open_frontier(
        self, engine: Engine, db: Database, crawl_id: int, politeness: Politeness, budgets: Budgets
    ) -> Frontier: ...

    async def shared_hosts(self, scope: Scope, frontier: Frontier) -> SharedHosts | None:
        """Where the processes of the crawl share the hosts its scope gains, if anywhere."""
        ...

    def twins(self, db: Database, crawl_id: int) -> Twins:
        """Where `--skip-near-duplicates` finds earlier pages."""
        ...

    async def robots_rules(self, fetcher: Fetcher, host: str, keep: KeepResponse) -> RobotsRules:
        """A host's robots.txt rules, fetched (or, distributed by URL, shared with the other nodes); the
        responses received go to `keep` to be archived."""
        ...


class Alone:
    """A crawl run by one process: its store holds everything, including every host earlier runs gained."""

    db_name = DB_NAME
    lock_fd: int | None = None
    warc_family: str | None = None

    def __init__(self, config: CrawlConfig) -> None:
        self._config = config
        self.warc_prefix = config.name

    async def open_frontier(
        self, engine: Engine, db: Database, crawl_id: int, politeness: Politeness, budgets: Budgets
    ) -> Frontier:
        config = self._config
        return await SqliteFrontier.open(
            db,
            crawl_id,
            politeness,
            budgets=budgets,
            importance=config.order == "importance",
            recrawl=config.revisit.recrawl,
            near_distance=config.near_distance,
        )

    async def shared_hosts(self, scope: Scope, frontier: Frontier) -> None:
        return None

    def twins(self, db: Database, crawl_id: int) -> Twins:
        return StoredTwins(db, crawl_id)

    async def robots_rules(self, fetcher: Fetcher, host: str, keep: KeepResponse) -> RobotsRules:
        return await fetch_robots(fetcher, host, self._config.fetch.user_agent, keep)
