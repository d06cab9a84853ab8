"""The hosts a distributed crawl's scope gained, shared by every node through Redis.

A seed that redirects to another host (`example.org` → `www.example.org`) brings that host in scope. Every
node must know it, or each drops the new host's links as out of scope. The node that follows the redirect
records the host in the crawl's set (`Keys.scope`, through a script fenced by the crawl's incarnation) before
it judges anything with it, so before the redirect's target, or any URL found through the host, enters the
frontier; the coordinator keeps it in its index with the redirect's result, and puts the index's hosts back
in the set whenever it starts. A node reads the set when it starts, and again before it refuses a link as
out of scope if it has not read it since the URL at hand was handed out: whatever was found through a
gained host entered the frontier after the host was recorded.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..scope import Scope
from .frontier import RedisFrontier
from .keys import Keys
from .redisconn import persist


class SharedScope:
    """One node's side of the crawl's gained hosts (`scope.SharedHosts`): it keeps the node's `Scope` caught up."""

    def __init__(self, client: Any, keys: Keys, scope: Scope, frontier: RedisFrontier) -> None:
        self._client = client
        self._keys = keys
        self._scope = scope
        self._frontier = frontier
        self._known = 0
        """How many hosts the set held at the last read (it only grows)."""
        self._read_at = float("-inf")
        """Monotonic time the last read of the set was sent: what it found is in the scope."""
        self._lock = asyncio.Lock()

    async def record(self, host: str) -> None:
        await self._frontier.widen_scope([host])

    async def learn(self, moment: float) -> None:
        if self._read_at >= moment:
            return
        async with self._lock:  # one read serves every page waiting meanwhile
            if self._read_at >= moment:
                return
            sent = time.monotonic()
            size = await persist("reading the crawl's scope", lambda: self._client.scard(self._keys.scope))
            if size > self._known:  # the members only when there are new ones: most reads find none
                hosts = await persist("reading the crawl's scope", lambda: self._client.smembers(self._keys.scope))
                for raw in hosts:
                    host = raw.decode()
                    if not self._scope.has_host(host):
                        self._scope.add_host(host)
                self._known = len(hosts)
            self._read_at = sent
