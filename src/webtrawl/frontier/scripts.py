"""The Lua scripts of the Redis frontier, each with the shared helpers (and the Bloom filter) in front."""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from .bloom import BLOOM_LUA


def _lua(name: str) -> str:
    return (files(__package__) / "lua" / name).read_text()


class Scripts:
    """The partition scripts, registered on one client (asyncio or blocking, standalone or Cluster).

    Each is called with one key, the partition's counters hash, which routes it to the partition's node.
    """

    def __init__(self, client: Any) -> None:
        common = _lua("common.lua")
        self.add = client.register_script(common + BLOOM_LUA + _lua("add.lua"))
        self.claim = client.register_script(common + _lua("claim.lua"))
        self.complete = client.register_script(common + _lua("complete.lua"))
        self.lease = client.register_script(common + _lua("lease.lua"))
        self.revisit = client.register_script(common + _lua("revisit.lua"))
        self.ended = client.register_script(common + BLOOM_LUA + _lua("ended.lua"))
        self.host_slots = client.register_script(_lua("hostslots.lua"))
