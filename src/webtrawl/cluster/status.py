"""A distributed crawl as its operator sees it: its status and nodes (`webtrawl status --redis`), and control
(`webtrawl control --redis`, the dashboard's buttons)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .bloom import bloom_stats
from .coordinator import load_crawl, scan
from .keys import Keys
from .node import HEARTBEAT, LIVE_FOR, live_nodes
from .redisconn import connect, open_clients, redact


async def send_control(url: str, name: str, command: str) -> None:
    """Set the crawl's control key; every node reads it at its next heartbeat."""
    client = await connect(url)
    try:
        await _set_control(client, Keys(name), url, command)
    finally:
        await client.aclose()


async def _set_control(client: Any, keys: Keys, url: str, command: str) -> None:
    if not await client.exists(keys.meta):
        raise ConfigError(f"no crawl named {keys.name!r} in the Redis at {redact(url)}")
    await client.set(keys.control, "run" if command == "resume" else command)


OBEYED = {"pause": ("paused",), "resume": ("running",), "stop": ("stopping", "left")}
"""Per command, the states a node publishes once it obeyed."""
OBEY_WAIT = 3 * HEARTBEAT + 1
"""Seconds `control` waits for the nodes: each reads the command at a heartbeat and shows it at the next."""


async def control(url: str, name: str, command: str) -> dict[str, str]:
    """Send `command` to every node of the crawl and wait (a few seconds at most) until each live one obeyed.

    Returns, for each node live when it was sent, the state it shows: one of `OBEYED[command]` if it obeyed.
    """
    client, sync = await open_clients(url)
    try:
        keys = Keys(name)
        live = await asyncio.to_thread(live_nodes, sync, keys)
        await _set_control(client, keys, url, command)
        deadline = asyncio.get_running_loop().time() + OBEY_WAIT
        while True:
            nodes = await asyncio.to_thread(all_nodes, sync, keys)
            states = {node: str(nodes.get(node, {}).get("state", "lost")) for node in sorted(live)}
            if (
                all(state in OBEYED[command] for state in states.values())
                or asyncio.get_running_loop().time() > deadline
            ):
                return states
            await asyncio.sleep(0.2)
    finally:
        await client.aclose()
        sync.close()


async def crawl_status(url: str, name: str) -> dict[str, Any]:
    """What `webtrawl status --redis` shows: nodes, frontier counts, and the dedup filters' state."""
    client, sync = await open_clients(url)
    try:
        keys = Keys(name)
        _config, layout = await load_crawl(client, keys, out=Path("."))
        counts = await scan(client, keys, layout.partitions)
        nodes = await asyncio.to_thread(all_nodes, sync, keys)
        blooms = [await bloom_stats(client, keys.partition(p)) for p in range(layout.partitions)]
        return {
            "name": name,
            "control": ((await client.get(keys.control)) or b"run").decode(),
            "counts": {
                "waiting": counts.waiting,
                "running": counts.running,
                "done": counts.done,
                "failed": counts.failed,
            },
            "nodes": nodes,
            "dedup": layout.dedup,
            "bloom": {
                "urls": sum(b.count for b in blooms),
                "bytes": sum(b.bits for b in blooms) // 8,
                "fill": max((b.fill_ratio for b in blooms), default=0.0),
                "estimated_false_drops": sum(b.estimated_false_drops for b in blooms),
            },
        }
    finally:
        await client.aclose()
        sync.close()


def all_nodes(client: Any, keys: Keys) -> dict[str, dict[str, Any]]:
    """Every node that ever joined, with its last heartbeat's age in seconds (by Redis' clock)."""
    seconds, micros = client.time()
    now = seconds * 1000 + micros // 1000
    nodes = {}
    for node, raw in sorted(client.hgetall(keys.nodes).items()):
        info = json.loads(raw)
        info["heartbeat_age"] = round((now - info.get("at", now)) / 1000, 1)
        if info.get("state") != "left" and info["heartbeat_age"] > LIVE_FOR:
            info["state"] = "lost"  # no heartbeat for a while: dead, stopped or cut off
        nodes[node.decode()] = info
    return nodes
