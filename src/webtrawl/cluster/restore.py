"""A crawl rebuilt in Redis from the coordinator's index and the nodes' shards: Redis lost it (restarted with
nothing on disk, or flushed), or the index holds an embedded crawl that now goes on distributed.

The index has every URL the crawl found, with its state, because the coordinator writes each page's links
with its capture, and the hosts the crawl's scope gained (seeds that redirected) with the redirects, which the
coordinator puts back first, whenever it starts. Ended URLs become seen and counted in Redis again and waiting
ones are queued again: the crawl goes on where the index says it was, and nothing fetched before is fetched
again (the URLs in flight
when Redis was lost never reached the index, and are). A crawl new in Redis is restored this way before its
seeds are added; the mark `RESTORE_MARK` in its settings is removed only once done, so a coordinator that dies
meanwhile restores again (what was already restored is left as it is). The crawl's new incarnation
(`Layout.incarnation`) keeps the nodes of the lost one from writing into the rebuilt crawl.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..models import Entry, State
from ..store.db import Database
from ..store.schedule import frontier_rows
from ..store.shards import Source, Sources
from .coordinator import RESTORE_MARK
from .frontier import RedisFrontier
from .keys import Keys
from .redisconn import persist

CHUNK = 10_000
"""URLs read from the index at a time."""
Row = tuple[int, Entry, State]


async def restore_if_due(
    client: Any, keys: Keys, db: Database, crawl_id: int, frontier: RedisFrontier, directory: Path
) -> Restoring | None:
    """Restore the crawl from the coordinator's index and the shards `directory` lists, when it is new in
    Redis (or a restore was cut short); returns what went back into Redis, or None when nothing was due.

    A shard this machine cannot read is named (`Restoring.unreachable`): the URLs only it knows stay unknown,
    and the pages it holds are fetched again if found again."""
    if not await persist("reading the crawl's settings", lambda: client.hexists(keys.meta, RESTORE_MARK)):
        return None
    restoring = Restoring()
    with Sources.shards_of(directory, keys.name) as shards:
        restoring.shards = len(shards.all)
        restoring.unreachable = [place.key for place in shards.unreachable]
        sources: list[Callable[[bool, int], Awaitable[list[Row]]]] = [
            lambda ended, after: db.run(frontier_rows, crawl_id, ended, after, CHUNK)
        ]
        sources += [_reading(shard) for shard in shards.all]
        # Ended URLs first, from every source: a node that joined already and finds one again takes it as seen,
        # and a link another shard holds as waiting is then taken as seen too.
        for ended in (True, False):
            for rows_of in sources:
                after = 0
                while rows := await rows_of(ended, after):
                    restoring.urls += await frontier.restore([(entry, state) for _row, entry, state in rows])
                    after = rows[-1][0]
    await persist("marking the crawl restored", lambda: client.hdel(keys.meta, RESTORE_MARK))
    return restoring


def _reading(shard: Source) -> Callable[[bool, int], Awaitable[list[Row]]]:
    """`frontier_rows` of a shard, read off the event loop."""
    return lambda ended, after: asyncio.to_thread(frontier_rows, shard.conn, shard.crawl_id, ended, after, CHUNK)


@dataclass
class Restoring:
    """What a restore put back: URLs, from how many shards (beside the coordinator's index), and the shards
    it could not read."""

    urls: int = 0
    shards: int = 0
    unreachable: list[str] = field(default_factory=list)
