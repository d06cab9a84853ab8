"""What the dashboard serves: one crawl of one directory, read with short read-only transactions.

Every request opens its own read-only connection and closes it at the end, so a dashboard left open
never holds a read transaction that would keep the crawl's WAL from being checkpointed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..store.crawls import crawl_id_of
from ..store.db import DB_NAME, connect


@dataclass(frozen=True, slots=True)
class Site:
    directory: Path
    name: str = "default"
    redis_url: str | None = None
    """Set for a distributed crawl: nodes and control come from Redis."""
    token: str | None = None
    """Required on every request when set (the dashboard listens beyond loopback)."""

    @contextmanager
    def reader(self) -> Iterator[tuple[sqlite3.Connection, int]]:
        """A read-only connection to the crawl database and the crawl's id, closed on exit."""
        conn = connect(self.directory / DB_NAME, readonly=True)
        try:
            yield conn, crawl_id_of(conn, self.name)
        finally:
            conn.close()
