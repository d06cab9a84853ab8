"""The hosts a distributed crawl's scope gained, shared by every node through Redis.

A seed that redirects to another host (`example.org` → `www.example.org`) brings that host in scope. Every
node must know it, or each drops the new host's links as out of scope: the node that followed the redirect
records the host in the crawl's set (`Keys.scope`) before the redirect's target enters the frontier, and the
coordinator keeps it in its index with the redirect's result (so a crawl rebuilt from the index has it).
A node reads the set when it starts, and again before it refuses a link as out of scope if it has not read
it since the URL at hand was claimed: whatever is found through a gained host was added after the host.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..scope import Scope
from .keys import Keys
from .redisconn import persist


class SharedScope:
    """Catches one node's `Scope` up with the hosts other nodes gained."""

    def __init__(self, client: Any, keys: Keys, scope: Scope) -> None:
        self._client = client
        self._keys = keys
        self._scope = scope
        self._read_at = float("-inf")
        """Monotonic time the last read of the set was sent: what it found is in the scope."""
        self._lock = asyncio.Lock()

    async def learn(self, moment: float) -> None:
        """Put in the scope every host the set held at some time after `moment` (monotonic)."""
        if self._read_at >= moment:
            return
        async with self._lock:  # one read serves every page waiting meanwhile
            if self._read_at >= moment:
                return
            sent = time.monotonic()
            hosts = await persist("reading the crawl's scope", lambda: self._client.smembers(self._keys.scope))
            for raw in sorted(hosts):
                host = raw.decode()
                if not self._scope.has_host(host):
                    self._scope.add_host(host)
            self._read_at = sent
