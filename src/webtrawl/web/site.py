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

from ..errors import StoreError
from ..store.crawls import crawl_id_of
from ..store.db import DB_NAME, connect
from ..store.replay import record_path
from ..store.shards import ShardPlace, Sources, load_places


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

    @contextmanager
    def sources(self) -> Iterator[Sources]:
        """The crawl read as its sources (a distributed crawl's shards, or the one database), closed on exit."""
        with Sources.open(self.directory, self.name) as sources:
            yield sources

    def record_path(self, name: str) -> Path | None:
        """WARC file `name` of the crawl: in the directory's `warc/`, or (a distributed crawl's) in the
        directory of the shard whose node wrote it, where this machine can read it."""
        found = record_path(self.directory, name)
        for place in self._readable() if found is None else ():
            if (found := record_path(place.database(self.directory).parent, name)) is not None:
                break
        return found

    def unreachable_shards(self) -> list[ShardPlace]:
        """A distributed crawl's shards this machine cannot read, for the notice on every page."""
        return [place for place in self._places() if not place.reachable(self.directory)]

    def _readable(self) -> list[ShardPlace]:
        return [place for place in self._places() if place.reachable(self.directory)]

    def _places(self) -> list[ShardPlace]:
        try:
            return load_places(self.directory)
        except StoreError:  # a damaged list: the coordinator writes it again; the dashboard goes on without it
            return []
