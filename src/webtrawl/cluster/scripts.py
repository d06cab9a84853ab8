"""The Lua scripts of the Redis frontier, each with the shared helpers (and the Bloom filter) in front."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib.resources import files
from typing import Any

from .bloom import BLOOM_LUA

PartitionScript = Callable[..., Any]


def _lua(name: str) -> str:
    return (files(__package__) / "lua" / name).read_text()


class Scripts:
    """The partition scripts, registered on one client (asyncio or blocking, standalone or Cluster).

    Each partition script is called with one key, the partition's counters hash, which routes it to the
    partition's node.
    Every call carries `incarnation`, the id the crawl got when it was created in this Redis: a partition
    of another incarnation (or of none: Redis lost the crawl) refuses it, so a node of a crawl that Redis
    forgot can write nothing into the empty Redis, nor into the crawl rebuilt there (`common.lua`).
    """

    def __init__(self, client: Any, incarnation: str = "") -> None:
        common = _lua("common.lua")

        def fenced(source: str) -> PartitionScript:
            script = client.register_script(source)

            def call(*, keys: Sequence[Any], args: Sequence[Any]) -> Any:
                return script(keys=keys, args=[incarnation, *args])

            return call

        def partition_script(source: str) -> PartitionScript:
            return fenced(common + source)

        self.add = partition_script(BLOOM_LUA + _lua("add.lua"))
        self.claim = partition_script(_lua("claim.lua"))
        self.complete = partition_script(_lua("complete.lua"))
        self.lease = partition_script(_lua("lease.lua"))
        self.revisit = partition_script(_lua("revisit.lua"))
        self.ended = partition_script(BLOOM_LUA + _lua("ended.lua"))
        self.widen_scope = fenced(_lua("scope.lua"))
        """Not a partition's: called with the crawl's scope set (`Keys.scope`), fenced alike."""
        self.host_slots = client.register_script(_lua("hostslots.lua"))
