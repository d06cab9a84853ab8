"""A distributed crawl's layout in Redis, fixed when the crawl is created and read by every process that joins it.

A module of its own so that reading or building one (the command line, the coordinator's checks) does not load
the frontier and Redis' client.
"""

from __future__ import annotations

from dataclasses import dataclass

VERSION = 2
"""The form of the partitions' keys (`cluster/lua/common.lua`): 2 since waiting URLs are records in lists."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """How a crawl's URLs are laid out in Redis: fixed when the crawl is created."""

    partitions: int = 64
    dedup: str = "bloom"
    bloom_capacity: int = 156_250
    bloom_error_rate: float = 1e-4
    max_urls_per_host: int | None = None
    max_urls_per_template: int | None = None
    lease_ttl: float = 15.0
    """Seconds a partition lease (and the coordinator's) lasts without renewal."""
    partition_by: str = "host"
    """"host": a host's URLs share a partition (one node paces it); "url": URLs spread one site over every
    node, and the host's limits and robots.txt are shared through Redis (`cluster.hostlimits`)."""
    version: int = VERSION
    """The form of its partitions' keys: a crawl created by a webtrawl with another form is refused
    (`coordinator.load_crawl`)."""
    incarnation: str = ""
    """The id the crawl got when it was created in this Redis, which every partition script checks (see
    `cluster.scripts.Scripts`); given by the coordinator that creates it."""
