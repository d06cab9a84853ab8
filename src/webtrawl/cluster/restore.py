"""A crawl rebuilt in Redis from the coordinator's index: Redis lost it (restarted with nothing on disk, or
flushed), or the index holds an embedded crawl that now goes on distributed.

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

from typing import Any

from ..store.db import Database
from ..store.schedule import frontier_rows
from .coordinator import RESTORE_MARK
from .frontier import RedisFrontier
from .keys import Keys
from .redisconn import persist

CHUNK = 10_000
"""URLs read from the index at a time."""


async def restore_if_due(client: Any, keys: Keys, db: Database, crawl_id: int, frontier: RedisFrontier) -> int:
    """Restore the crawl from the index when it is new in Redis (or a restore was cut short); returns how
    many URLs went back into Redis."""
    if not await persist("reading the crawl's settings", lambda: client.hexists(keys.meta, RESTORE_MARK)):
        return 0
    restored = 0
    # Ended URLs first: a node that joined already and finds one again takes it as seen.
    for ended in (True, False):
        after = 0
        while rows := await db.run(frontier_rows, crawl_id, ended, after, CHUNK):
            restored += await frontier.restore([(entry, state) for _row, entry, state in rows])
            after = rows[-1][0]
    await persist("marking the crawl restored", lambda: client.hdel(keys.meta, RESTORE_MARK))
    return restored
