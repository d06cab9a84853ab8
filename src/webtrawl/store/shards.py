"""Where the shards of a distributed crawl lie: each node's index, in the directory it crawls into.

A node registers its shard (the machine it runs on, its directory) in Redis when it joins; the coordinator
keeps the list in its own directory, `DIR/shards.json`, so a reader given DIR finds every shard without
Redis. A shard is read where it lies: on this machine, or on a filesystem this machine shares with the
node's. One that is not there is named, never silently left out.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .crawls import crawl_id_of
from .db import DB_NAME, NODE_DB, connect

log = logging.getLogger(__name__)

SHARDS_FILE = "shards.json"


@dataclass(frozen=True, slots=True)
class ShardPlace:
    """One shard: the machine of the node that wrote it and its directory there, the nodes that wrote into it
    (a node restarted in a directory has a new id), and where in the coordinator's directory a copy of it
    was folded in (`store.fold`), if it was."""

    host: str
    path: str
    nodes: tuple[str, ...]
    copy: str | None = None
    """The copy's directory, relative to the coordinator's."""

    @property
    def key(self) -> str:
        return f"{self.host}:{self.path}"

    def database(self, directory: Path) -> Path:
        """Its database, as seen from this machine: the copy in `directory` (the coordinator's), if folded in."""
        return (directory / self.copy if self.copy else Path(self.path)) / NODE_DB

    def reachable(self, directory: Path) -> bool:
        """Whether this machine sees the shard: folded in, lying here, or on a filesystem shared with its node's."""
        return self.database(directory).is_file()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str | bytes) -> ShardPlace:
        return _place(json.loads(raw))


def _place(doc: dict[str, Any]) -> ShardPlace:
    return ShardPlace(host=doc["host"], path=doc["path"], nodes=tuple(doc["nodes"]), copy=doc.get("copy"))


def save_places(directory: Path, places: Iterable[ShardPlace]) -> None:
    """Add `places` to the crawl's list of shards in `directory`, whole or not at all (a reader may be reading
    it), under a lock (the coordinator and `webtrawl merge` both write it). A shard keeps its place in the
    list (its number, see `global_id`) and its copy; one the list has under another host and path (a copy
    folded in before the coordinator listed it) is recognized by its nodes; new ones come after."""
    with _locked(directory):
        try:
            known = load_places(directory)
        except StoreError as exc:  # damaged: written again from what the caller knows
            log.warning("%s; writing it again", exc)
            known = []
        for place in places:
            at = next((i for i, p in enumerate(known) if p.key == place.key or set(p.nodes) & set(place.nodes)), None)
            if at is None:
                known.append(place)
            else:
                before = known[at]
                nodes = tuple(dict.fromkeys((*before.nodes, *place.nodes)))
                known[at] = replace(place, nodes=nodes, copy=place.copy or before.copy)
        temporary = directory / f".{SHARDS_FILE}.{os.getpid()}"
        with temporary.open("w") as out:
            out.write(json.dumps([asdict(place) for place in known], indent=2) + "\n")
            out.flush()
            os.fsync(out.fileno())
        temporary.replace(directory / SHARDS_FILE)


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    fd = os.open(directory / f"{SHARDS_FILE}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def load_places(directory: Path) -> list[ShardPlace]:
    """The shards the coordinator in `directory` registered; none for an embedded crawl's directory."""
    path = directory / SHARDS_FILE
    try:
        doc = json.loads(path.read_text())
        return [_place(d) for d in doc]
    except FileNotFoundError:
        return []
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{path} is not a list of shards ({exc})") from None


def last_node_number(directory: Path) -> int:
    """The highest number of a node (`node-07`: 7) the shards listed in `directory` name; 0 when none."""
    try:
        places = load_places(directory)
    except StoreError as exc:  # damaged: the coordinator writes it again; the ids start over
        log.warning("%s", exc)
        places = []
    numbers = [
        int(node.rpartition("-")[2]) for place in places for node in place.nodes if node.rpartition("-")[2].isdigit()
    ]
    return max(numbers, default=0)


SHARD_BITS = 40
"""A capture's id in its shard fits in this many bits (10^12); the shard's number goes above them."""


def global_id(shard: int, local: int) -> int:
    """The id that names a capture of shard number `shard` across the crawl. Shard 0's ids start above the
    ids of the coordinator's own database (an embedded crawl's, or the first pages of one that went on
    distributed: shard -1, whose ids stay as they are), so both kinds name a capture without doubt."""
    return (shard + 1) << SHARD_BITS | local


def split_id(capture_id: int) -> tuple[int | None, int]:
    """The shard number (None: the coordinator's own database, -1) and the id within it of a `global_id`."""
    shard = (capture_id >> SHARD_BITS) - 1
    return (shard if shard >= 0 else None), capture_id & ((1 << SHARD_BITS) - 1)


@dataclass(frozen=True, slots=True)
class Source:
    """One database of a crawl, open for reading: an embedded crawl's, or one shard of a distributed crawl's.
    Readers read a crawl as a list of them (`Sources`), merged."""

    number: int
    """Its place in `shards.json` (0 for an embedded crawl's database; -1 for the coordinator's own in a crawl
    that began embedded): see `global_id`."""
    conn: sqlite3.Connection
    crawl_id: int
    directory: Path
    """Where its WARC files lie."""


def database_of(source: Source) -> str:
    """The file of `source`'s database: what names a source (its directory may hold two, see `Sources.open`)."""
    (file,) = [row[2] for row in source.conn.execute("PRAGMA database_list") if row[1] == "main"]
    return str(file)


def source_of(conn: sqlite3.Connection, crawl: str) -> Source:
    """Crawl `crawl` of one open database (an embedded crawl's) as a source; an unknown name is a StoreError
    that lists the crawls there are."""
    (file,) = [row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"]
    return Source(0, conn, crawl_id_of(conn, crawl), Path(file).parent)


def _embedded_part(own: Source) -> bool:
    """Whether the coordinator's own database holds pages of the crawl: those it fetched before it went on
    distributed (no node fetched them). Its last capture says: a database an earlier webtrawl filled by
    gathering every node's pages (each with its node) holds nothing the shards do not."""
    last = own.conn.execute(
        "SELECT node FROM captures WHERE crawl_id = ? ORDER BY id DESC LIMIT 1", (own.crawl_id,)
    ).fetchone()
    return last is not None and last[0] is None


class Sources:
    """A crawl's databases open for reading, and the shards this machine cannot read (named, never skipped
    silently)."""

    def __init__(
        self, sources: list[Source], unreachable: list[ShardPlace], *, distributed: bool, home: Source | None = None
    ) -> None:
        self.all = sources
        self.unreachable = unreachable
        self.distributed = distributed
        self.home = home
        """The database in the crawl's own directory, where its progress and control are kept: an embedded
        crawl's one database, a distributed crawl's coordinator's (None when only the shards were opened)."""

    @classmethod
    def of(cls, source: Source) -> Sources:
        """One database already open (an embedded crawl's, read by the process that writes it) as a crawl's
        sources; closing them closes it."""
        return cls([source], [], distributed=False, home=source)

    @classmethod
    def open(cls, directory: Path, name: str) -> Sources:
        """The crawl in `directory`: the shards its coordinator lists, or else its own database (an embedded
        crawl's), read-only.

        A crawl that began embedded and went on distributed has its first pages in the coordinator's own
        database, and the rest in the shards: it is read as both (that database's captures keep their ids,
        shard number -1, see `global_id`)."""
        sources = cls.shards_of(directory, name)
        try:
            conn = connect(directory / DB_NAME, readonly=True)
        except BaseException:
            sources.close()
            raise
        try:
            own = sources.home = source_of(conn, name)
            if not sources.distributed:
                sources.all = [own]
            elif _embedded_part(own):
                sources.all = [replace(own, number=-1), *sources.all]
        except BaseException:
            conn.close()
            sources.close()
            raise
        return sources

    @classmethod
    def shards_of(cls, directory: Path, name: str) -> Sources:
        """Only the shards `directory`'s coordinator lists (none for an embedded crawl's directory)."""
        places = load_places(directory)
        sources, unreachable = [], []
        for number, place in enumerate(places):
            if not place.reachable(directory):
                unreachable.append(place)
                continue
            database = place.database(directory)
            try:
                conn = connect(database, readonly=True)
            except (StoreError, sqlite3.DatabaseError):
                unreachable.append(place)
                continue
            try:
                sources.append(Source(number, conn, crawl_id_of(conn, name), database.parent))
            except (StoreError, sqlite3.DatabaseError):  # damaged, or not this crawl's: named, as a missing one
                conn.close()
                unreachable.append(place)
            except BaseException:
                conn.close()
                raise
        return cls(sources, unreachable, distributed=bool(places))

    def capture_id(self, source: Source, local: int) -> int:
        """The id that names capture `local` of `source` to a reader of the whole crawl: its own id in an
        embedded crawl's one database (so a crawl's addresses stay as they were), its `global_id` across shards."""
        return global_id(source.number, local) if self.distributed else local

    def locate(self, capture_id: int) -> tuple[Source, int] | None:
        """The source holding the capture a reader names `capture_id` (see `capture_id`), and its id there;
        None when no readable source has that number."""
        number, local = split_id(capture_id) if self.distributed else (0, capture_id)
        number = -1 if number is None else number
        return next(((source, local) for source in self.all if source.number == number), None)

    def close(self) -> None:
        for conn in {id(source.conn): source.conn for source in [*self.all, *filter(None, [self.home])]}.values():
            conn.close()

    def __enter__(self) -> Sources:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
