"""A shard copied from another machine, folded into the coordinator's directory (`webtrawl merge`).

Nodes without a filesystem shared with the coordinator leave their shards where they crawled. Copied here
(its directory as the node left it: `node.db`, WARC files, media), a shard is folded in: copied once more
into `DIR/shards/NODE/` (the database through SQLite's backup, so a copy of a database still written is
whole), and the coordinator's list of shards (`shards.json`) names that copy for the place the node had, so
the shard keeps its number and every reader of DIR reads it there. Folding a shard in again changes
nothing; anything wrong with it (another crawl's, not a crawl database, a node still writing it) is said in
one line before anything is written.
"""

from __future__ import annotations

import shutil
import socket
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import StoreError
from .crawls import crawl_name
from .db import DB_NAME, LOCK_NAME, NODE_DB, DirectoryLock, connect
from .shard import STAGE_FILE, StageFile, staged_before
from .shards import ShardPlace, load_places, save_places

SHARDS_DIR = "shards"


@dataclass(frozen=True, slots=True)
class Folded:
    place: ShardPlace
    pages: int
    already: bool
    """It was folded in before: nothing was written."""
    unsettled: int
    """Results a node killed mid-batch left staged, which no Redis can settle any more: left out."""


def fold_shard(directory: Path, source: Path, name: str | None = None) -> Folded:
    """Fold the shard in `source` into the coordinator's `directory`; StoreError says what is wrong."""
    name, identity = _crawl_of(directory / DB_NAME, name, f"{directory} is not a crawl directory")
    database = source / NODE_DB
    if not database.is_file():
        raise StoreError(f"{source} holds no shard ({NODE_DB}): give the directory a webtrawl worker crawled into")
    if DirectoryLock.held(source):
        raise StoreError(f"a node is still crawling into {source}: fold its shard in once it has stopped")
    _name, theirs = _crawl_of(database, name, f"{database} holds no crawl named {name!r}")
    if theirs != identity:
        raise StoreError(
            f"{source} is a shard of another crawl than {directory}'s {name!r} (its seeds or scope differ)"
        )
    nodes, pages, unsettled = _contents(database, name)
    if not nodes:
        raise StoreError(f"{source} holds no page of crawl {name!r}: there is nothing to fold in")
    places = load_places(directory)
    place = next((p for p in places if set(p.nodes) & set(nodes)), None)
    if place is not None and place.copy and place.reachable(directory):
        # The same shard as the copy: nothing to do. A node that crawled on in it since is copied again.
        copied_nodes, copied_pages, _left = _contents(place.database(directory), name)
        if copied_pages == pages and copied_nodes == nodes:
            return Folded(place, pages, already=True, unsettled=unsettled)
    if place is None:  # a shard the coordinator never listed (its list was lost): listed now
        place = ShardPlace(host=socket.gethostname(), path=str(source.resolve()), nodes=tuple(sorted(nodes)))
    copy = Path(SHARDS_DIR) / sorted(place.nodes)[0]
    _copy_shard(source, directory / copy)
    place = replace(place, copy=str(copy))
    save_places(directory, [place])
    return Folded(place, pages, already=False, unsettled=unsettled)


def _crawl_of(database: Path, name: str | None, missing: str) -> tuple[str, str]:
    """The crawl's name and identity (as stored) in `database`."""
    if not database.is_file():
        raise StoreError(missing)
    try:
        conn = connect(database, readonly=True)
        try:
            try:
                name = crawl_name(conn, name)
            except StoreError as exc:
                raise StoreError(f"{database}: {exc}") from None
            row = conn.execute("SELECT identity FROM crawls WHERE name = ?", (name,)).fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{database} cannot be read as a crawl database: {exc}") from None
    if row is None:
        raise StoreError(missing)
    return name, row[0]


def _contents(database: Path, name: str) -> tuple[set[str], int, int]:
    """The nodes that wrote the shard, its pages and its results left staged."""
    try:
        conn = connect(database, readonly=True)
        try:
            (crawl_id,) = conn.execute("SELECT id FROM crawls WHERE name = ?", (name,)).fetchone()
            nodes = {
                node for (node,) in conn.execute("SELECT DISTINCT node FROM captures WHERE crawl_id = ?", (crawl_id,))
            }
            (pages,) = conn.execute("SELECT COUNT(*) FROM captures WHERE crawl_id = ?", (crawl_id,)).fetchone()
            unsettled = len(staged_before(conn)) + len(StageFile(database.parent).read())
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{database} cannot be read as a crawl database: {exc}") from None
    return {node for node in nodes if node}, pages, unsettled


def _copy_shard(source: Path, target: Path) -> None:
    """Copy the node's directory into `target`, whole or not at all: into a directory beside it first (the
    database through SQLite's backup API, which copies a consistent state, then the other files), renamed
    over `target` once complete."""
    partial = target.with_name(f".{target.name}.part")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        reader = sqlite3.connect(f"file:{source / NODE_DB}?mode=ro", uri=True)
        writer = sqlite3.connect(partial / NODE_DB)
        try:
            reader.backup(writer)
        finally:
            writer.close()
            reader.close()
        shutil.copytree(
            source,
            partial,
            dirs_exist_ok=True,
            ignore=lambda _folder, names: [n for n in names if n.startswith(NODE_DB) or n in (LOCK_NAME, STAGE_FILE)],
        )
    except (sqlite3.Error, OSError) as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise StoreError(f"cannot copy the shard in {source} into {target.parent}: {exc}") from None
    shutil.rmtree(target, ignore_errors=True)
    partial.replace(target)
