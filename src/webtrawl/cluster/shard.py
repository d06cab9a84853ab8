"""This node's shard: the index of what it fetched, in its own directory (`store.shard` holds the why).

The frontier stages each batch here (its stage file, `store.shard.StageFile`) before completing it in Redis,
and settles it with what Redis accepted; at start, a node settles what a killed predecessor in the same
directory staged, from the acknowledgements the partitions kept (`cluster/lua/complete.lua`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sqlite3
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import StoreError, StoreLocked
from ..frontier.seen import SeenCache
from ..models import Completion, Resource
from ..store.crawls import crawl_id_of
from ..store.db import NODE_DB, Database, DirectoryLock, connect
from ..store.ingest import ingest_drops
from ..store.shard import Staged, StageFile, forget_staged_before, settle, stage, staged_before
from ..store.shards import ShardPlace, load_places
from .bloom import fp_bytes
from .keys import Keys
from .redisconn import persist, pipelined
from .wire import decode_completion, encode_completion

log = logging.getLogger(__name__)


class NodeShard:
    """Stages and settles this node's batches in its shard, on the database's writer thread."""

    def __init__(self, db: Database, crawl_id: int, node: str, near_distance: int) -> None:
        self._db = db
        self._crawl_id = crawl_id
        self.node = node
        self._near_distance = near_distance
        self._file = StageFile(db.path.parent)
        self._batch = time.time_ns()
        """Batch ids grow from the start time, so a restarted node's never meet its predecessor's."""
        self._seen = SeenCache()
        """Links written already (used on the database thread only)."""
        self.settled = True
        """Nothing staged waits to be settled: the node's acknowledgements in Redis are of no more use."""

    def next_batch(self) -> int:
        self._batch += 1
        return self._batch

    async def stage(
        self,
        batch: int,
        checkpoint: Mapping[str, int],
        results: Sequence[tuple[int, Completion]],
        site_files: Sequence[Resource],
    ) -> None:
        """Stage `results` (partition, completion), then save the checkpoint and index the site files, on the
        database's thread: encoding the results is work the event loop, with its fetches to serve, is spared."""
        self.settled = not results
        await self._db.run(self._stage, batch, checkpoint, results, site_files)

    def _stage(
        self,
        conn: sqlite3.Connection,
        batch: int,
        checkpoint: Mapping[str, int],
        results: Sequence[tuple[int, Completion]],
        site_files: Sequence[Resource],
    ) -> None:
        node = self.node
        if results:
            self._file.append([Staged(batch, c.entry.fp, node, p, encode_completion(c, node)) for p, c in results])
        stage(conn, self._crawl_id, checkpoint, site_files, node)

    async def record_drops(self, drops: Sequence[Sequence[str]]) -> None:
        """Record URLs refused outside a page's completion: over a budget as they were added, out of a
        sitemap's scope (`store.ingest.ingest_drops`)."""
        await self._db.run(ingest_drops, self._crawl_id, drops)

    async def settle(self, batch: int, accepted: Sequence[Completion]) -> None:
        await self._db.run(self._settle, batch, self.node, accepted)
        self.settled = True

    def _settle(self, conn: sqlite3.Connection, batch: int, node: str, accepted: Sequence[Completion]) -> None:
        """Write what Redis accepted of `batch`, then empty the stage: killed between the two, the node
        settles the batch again at its next start, which changes nothing."""
        settle(conn, self._crawl_id, batch, node, accepted, self._near_distance, self._seen.fresh)
        self._file.clear()

    async def recover(self, client: Any, keys: Keys, partitions: int) -> None:
        """Settle the batches a killed node left staged: each result whose partition acknowledged it. Then
        its acknowledgements are of no more use: they go."""
        left = await self._db.read(staged_before) + self._file.read()
        batches: dict[int, list[Staged]] = defaultdict(list)
        for row in left:
            batches[row.batch].append(row)
        for batch, rows in batches.items():
            node = rows[0].node
            acked: set[bytes] = set()
            for p in sorted({row.partition for row in rows}):
                last, fps = await persist(
                    "reading acknowledgements", partial(client.hmget, keys.acks(p), [node, node + "/"])
                )
                if last is not None and int(last) == batch and fps:
                    acked.update(fps[i : i + 8] for i in range(0, len(fps), 8))
            accepted = [decode_completion(row.result)[0] for row in rows if fp_bytes(row.fp) in acked]
            await self._db.run(settle, self._crawl_id, batch, node, accepted, self._near_distance, self._seen.fresh)
            log.info(
                "settled a batch the last run left: %d of its %d result(s) had been accepted",
                len(accepted), len(rows),
            )  # fmt: skip
        await self._db.run(forget_staged_before)
        self._file.clear()
        for node in {row.node for row in left}:
            await forget_acks(client, keys, node, partitions)


async def settle_left(client: Any, keys: Keys, partitions: int, directory: Path, name: str, near_distance: int) -> int:
    """Settle what nodes that will not come back left staged in the shards this machine reaches, as a node
    started in a shard's directory would: the coordinator does it at the end of a run, once its nodes have
    left, so a node killed for good loses nothing Redis accepted from it. A shard whose directory a process
    still holds is its node's to settle, and skipped. Returns how many shards it settled."""
    settled = 0
    for place in await asyncio.to_thread(load_places, directory):
        shard_dir = Path(place.path)
        if place.copy or place.host != socket.gethostname():  # another machine's: a lock there is not seen here
            continue
        try:
            settled += await _settle_left_in(client, keys, partitions, directory, shard_dir, name, near_distance)
        except (StoreError, OSError, ValueError, sqlite3.Error) as exc:
            log.warning(
                "could not settle what the node in %s left staged (%s): start a node there to settle it", shard_dir, exc
            )
    return settled


async def _settle_left_in(
    client: Any, keys: Keys, partitions: int, directory: Path, shard_dir: Path, name: str, near_distance: int
) -> int:
    """`settle_left` for the shard in `shard_dir`: 1 when it settled something there."""
    database = shard_dir / NODE_DB
    if not database.is_file() or not await asyncio.to_thread(_has_staged, database):
        return 0
    own = shard_dir.resolve() == directory.resolve()  # this process holds its directory: its node has left
    lock = DirectoryLock(shard_dir)
    try:
        if not own:
            lock.acquire()
    except StoreLocked:
        return 0  # a node runs there, and settles it
    try:
        db = await Database(database).open()
        try:
            crawl_id = await db.read(crawl_id_of, name)
            await NodeShard(db, crawl_id, "coordinator", near_distance).recover(client, keys, partitions)
        finally:
            await db.close()
    finally:
        lock.release()
    return 1


def _has_staged(database: Path) -> bool:
    if StageFile(database.parent).holds():
        return True
    conn = connect(database, readonly=True)
    try:
        return bool(staged_before(conn))
    finally:
        conn.close()


async def forget_acks(client: Any, keys: Keys, node: str, partitions: int) -> None:
    """Remove `node`'s acknowledgements from every partition, once nothing it staged waits for them: a node
    that stops with its shard settled, or whose staged batches its successor settled. A node killed for good
    leaves its own (two small fields a partition)."""

    def fill(pipe: Any) -> None:
        for p in range(partitions):
            pipe.hdel(keys.acks(p), node, node + "/")

    await persist("removing acknowledgements", partial(pipelined, client, fill))


async def register_shard(client: Any, keys: Keys, directory: Path, node: str) -> None:
    """Name this node's shard in Redis, and return once the coordinator has listed it in its directory
    (`store.shards`): a page fetched into a shard no reader of DIR can find would be lost to them all."""
    host, path = socket.gethostname(), str(directory.resolve())
    known = await persist("registering the shard", partial(client.hget, keys.shards, f"{host}:{path}"))
    nodes = ShardPlace.from_json(known).nodes if known else ()
    place = ShardPlace(host=host, path=path, nodes=(*nodes, node) if node not in nodes else nodes)
    await persist("registering the shard", partial(client.hset, keys.shards, place.key, place.to_json()))
    quiet_until = time.monotonic() + LISTED_PATIENCE
    while not await persist("registering the shard", partial(client.sismember, keys.listed, place.key)):
        if await persist("reading the control key", partial(client.get, keys.control)) in UNLISTED_GO_ON:
            return  # the crawl ended, stopped or vanished: the node finds out as it claims, and fetches nothing
        if quiet_until and time.monotonic() > quiet_until:
            quiet_until = 0.0
            log.warning(
                "waiting for the coordinator to list this node's shard (%s) in its directory before fetching: "
                "is it running?",
                place.key,
            )
        await asyncio.sleep(LISTED_POLL)


LISTED_POLL = 0.25
"""Seconds between two looks at whether the coordinator listed this node's shard (it looks twice a second)."""
LISTED_PATIENCE = 10.0
"""Seconds a node waits for its listing quietly."""
UNLISTED_GO_ON = (b"finished", b"stop", None)
"""Control words (None: no crawl) under which a node stops waiting for its listing."""


async def registered_shards(client: Any, keys: Keys) -> list[ShardPlace]:
    """Every shard the crawl's nodes registered."""
    raw = await persist("reading the shards", partial(client.hvals, keys.shards))
    return [ShardPlace.from_json(value) for value in raw]
