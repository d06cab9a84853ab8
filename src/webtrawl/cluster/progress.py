"""A distributed crawl's progress, kept in the coordinator's directory for readers that have only DIR.

Redis holds the frontier's counts (each partition's counters); a shard holds only its node's part of the URLs
(those it handled, and its pages' links as waiting). So the coordinator publishes the counts, the crawl's
state and its nodes' rate into its own database every `PUBLISH_EVERY` seconds, the snapshot an embedded crawl
publishes (`store.live.publish`), and once more as its run ends: `status DIR`, the overview and
`webtrawl.open(DIR).stats` read them there, live, or as the crawl's last word once it stopped.
"""

from __future__ import annotations

import asyncio
import os
from functools import partial
from typing import Any

from ..store.db import Database
from ..store.live import ACTIVE, publish
from .coordinator import scan
from .keys import Keys
from .layout import Layout
from .redisconn import persist
from .status import all_nodes

PUBLISH_EVERY = 2.0
"""Seconds between two snapshots (nodes' heartbeats come every 2 s)."""
STATES = {"run": "running", "pause": "paused", "stop": "stopping"}
"""The crawl's state while it runs, by the control word in Redis."""


async def progress(client: Any, sync: Any, keys: Keys, layout: Layout, state: str) -> dict[str, Any]:
    """The crawl's snapshot now: the frontier's counts from Redis, and the nodes' pages, rate and fetches
    from their last heartbeats (those still active for the rate and fetches)."""
    counts = await scan(client, keys, layout.partitions)
    nodes = list((await persist("reading nodes", lambda: asyncio.to_thread(all_nodes, sync, keys))).values())
    active = [info for info in nodes if info.get("state") in ACTIVE]
    return {
        "state": state,
        "distributed": True,
        "pid": os.getpid(),
        "elapsed": max((info.get("elapsed", 0.0) for info in nodes), default=0.0),
        "pages": sum(info.get("pages", 0) for info in nodes),
        "bytes": sum(info.get("bytes", 0) for info in nodes),
        "errors": sum(info.get("errors", 0) for info in nodes),
        "fetching": sum(info.get("in_flight", 0) for info in active),
        "statuses": {},
        "pages_per_second": round(sum(info.get("pages_per_s", 0.0) for info in active), 2),
        "render": {},
        "bytes_per_second": 0,
        "cpu_seconds": {},
        "nodes": len(active),
        "counts": {
            "waiting": counts.waiting,
            "running": counts.running,
            "done": counts.done,
            "failed": counts.failed,
            "waiting_by_depth": {},  # Redis keeps each partition's queue, not counts by depth
        },
    }


async def keep_publishing(client: Any, sync: Any, keys: Keys, layout: Layout, db: Database, crawl_id: int) -> None:
    """Publish the crawl's snapshot into the coordinator's database every `PUBLISH_EVERY` seconds, until cancelled."""
    while True:
        control = ((await persist("reading the control key", partial(client.get, keys.control))) or b"run").decode()
        await publish_now(client, sync, keys, layout, db, crawl_id, STATES.get(control, control))
        await asyncio.sleep(PUBLISH_EVERY)


async def publish_now(
    client: Any, sync: Any, keys: Keys, layout: Layout, db: Database, crawl_id: int, state: str
) -> None:
    """Publish the crawl's snapshot with `state` (the outcome of a run that ended: its last word)."""
    snapshot = await progress(client, sync, keys, layout, state)
    await db.run(publish, crawl_id, snapshot, checkpoint=False)
