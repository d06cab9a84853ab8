"""What a coordinator tells the one who started it while it runs; the command line words it (`progress`).

The distributed mode shows nothing itself: it hands these to the `on_event` it was given, so the terminal,
a log or a test each take them as they need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class LeaseHeld:
    """Another coordinator holds the crawl's lease; this one waits for it to expire (it may have died)."""

    name: str


@dataclass(frozen=True, slots=True)
class Restored:
    """The crawl was new in Redis: its URLs were rebuilt there from this directory's index and its shards."""

    name: str
    urls: int
    shards: int
    without: int = 0
    """Shards it could not read, rebuilt without (`--refetch-lost`)."""


@dataclass(frozen=True, slots=True)
class Requeued:
    """URLs due for a revisit went back to their partitions (`--recrawl`)."""

    name: str
    urls: int


@dataclass(frozen=True, slots=True)
class Running:
    """Every few seconds while the crawl runs: its URL counts (Redis's) and each live node's heartbeat."""

    name: str
    done: int
    failed: int
    waiting: int
    running: int
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)


Event = LeaseHeld | Restored | Requeued | Running
