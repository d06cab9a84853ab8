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
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ShardsUnreachable
from ..models import Entry, State
from ..store.db import Database
from ..store.schedule import frontier_rows
from ..store.shards import ShardPlace, Source, Sources
from .coordinator import RESTORE_MARK
from .frontier import RedisFrontier
from .keys import Keys
from .redisconn import persist

log = logging.getLogger(__name__)

CHUNK = 10_000
"""URLs read from the index at a time."""
Row = tuple[int, Entry, State]


async def restore_if_due(
    client: Any,
    keys: Keys,
    db: Database,
    crawl_id: int,
    frontier: RedisFrontier,
    directory: Path,
    *,
    refetch_lost: bool = False,
) -> Restoring | None:
    """Restore the crawl from the coordinator's index and the shards `directory` lists, when it is new in
    Redis (or a restore was cut short); returns what went back into Redis, or None when nothing was due.

    A shard this machine cannot read holds what no other source knows: which of the URLs it handled ended.
    Without it, the restore is refused (`ShardsUnreachable`, naming each, and nothing changes), unless
    `refetch_lost`: then it goes on without them, and what they fetched is fetched again where the other
    shards hold it as waiting (their pages link it); the URLs only they knew stay unknown."""
    if not await persist("reading the crawl's settings", lambda: client.hexists(keys.meta, RESTORE_MARK)):
        return None
    restoring = Restoring()
    with Sources.shards_of(directory, keys.name) as shards:
        if shards.unreachable and not refetch_lost:
            raise ShardsUnreachable(_unreachable_message(keys.name, shards.unreachable))
        for place in shards.unreachable:
            log.warning(
                "rebuilding crawl %r without the shard at %s (%s): its pages are fetched again where the other "
                "shards link them", keys.name, place.key, ", ".join(place.nodes) or "no node named",
            )  # fmt: skip
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


def _unreachable_message(name: str, places: Sequence[ShardPlace]) -> str:
    named = "; ".join(f"{place.key} ({', '.join(place.nodes) or 'no node named'})" for place in places)
    return (
        f"crawl {name!r} is to be rebuilt in Redis from its shards, but {len(places)} of them cannot be read "
        f"from this machine: {named}. Make them readable here (mount their directories where they were, or "
        "copy them here and fold them in with `webtrawl merge DIR SHARD_DIR`) and run the same command again; "
        "or add --refetch-lost to rebuild the crawl without them: their pages are fetched again where the "
        "other shards link them. Nothing was changed"
    )


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
