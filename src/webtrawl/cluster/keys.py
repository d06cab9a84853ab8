"""Where a distributed crawl keeps what in Redis.

Every key carries the crawl's name in a hash tag. A partition's keys share the tag `{NAME:pN}` (its Lua
scripts touch only those), and each global key has a tag of its own, touched only by single-key commands,
so a Redis Cluster can put any of them on any node. The partition scripts' own keys are listed in
`cluster/lua/common.lua`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Keys:
    name: str

    def partition(self, p: int) -> str:
        """The prefix of partition `p`'s keys (the scripts derive the rest from it)."""
        return f"{{{self.name}:p{p}}}"

    def counters(self, p: int) -> str:
        return self.partition(p) + ":c"

    def lease(self, p: int) -> str:
        return self.partition(p) + ":lease"

    def hosts(self, p: int) -> str:
        return self.partition(p) + ":h"

    def later(self, p: int) -> str:
        return self.partition(p) + ":later"

    def acks(self, p: int) -> str:
        return self.partition(p) + ":ack"

    @property
    def meta(self) -> str:
        """Hash: the crawl's settings, fixed at creation (partitions, hash, dedup, config)."""
        return f"{{{self.name}:meta}}"

    @property
    def ids(self) -> str:
        """Counter: the last node number given out."""
        return f"{{{self.name}:ids}}"

    @property
    def nodes(self) -> str:
        """Hash: node id → its latest heartbeat (JSON: host, pid, state, partitions, pages, …)."""
        return f"{{{self.name}:nodes}}"

    @property
    def members(self) -> str:
        """Counter: raised when a node joins or leaves, so that the others balance their partitions at once."""
        return f"{{{self.name}:members}}"

    @property
    def control(self) -> str:
        """String: what the crawl is told to do: run, pause, stop; `idle` between `--every` passes; `finished` once it
        is over."""
        return f"{{{self.name}:control}}"

    @property
    def coordinator(self) -> str:
        """String with a TTL: the coordinator's lease (its token), so one coordinator runs at a time."""
        return f"{{{self.name}:coordinator}}"

    @property
    def scope(self) -> str:
        """Set: the host keys the crawl's scope gained (its seeds redirected to them), for every node."""
        return f"{{{self.name}:scope}}"

    @property
    def scope_incarnation(self) -> str:
        """String: the crawl's incarnation, beside its scope set (`cluster/lua/scope.lua` checks it)."""
        return self.scope + ":crawl"

    @property
    def shards(self) -> str:
        """Hash: `host:directory` → the shard a node indexes into there (JSON, `store.shards.ShardPlace`)."""
        return f"{{{self.name}:shards}}"

    @property
    def listed(self) -> str:
        """Set: the `host:directory` of every shard the coordinator has listed in its directory (`shards.json`)."""
        return f"{{{self.name}:shards}}:listed"

    @property
    def report(self) -> str:
        """Hash: node id → its final report (JSON)."""
        return f"{{{self.name}:report}}"

    def host_slots(self, host: str) -> str:
        """Zset of a host's request slots taken across the crawl (`--partition-by url`): member → expiry."""
        return f"{{{self.name}:host:{host}}}"

    def robots(self, host: str) -> str:
        """String: a host's robots.txt as one node fetched it, for every node (`--partition-by url`)."""
        return f"{{{self.name}:robots:{host}}}"

    def simhash_band(self, band: int) -> str:
        """String: the (SimHash, fingerprint) pairs of the pages in one band, appended by every node
        (`cluster.twins`, with `--skip-near-duplicates`)."""
        return f"{{{self.name}:sim:{band}}}"
