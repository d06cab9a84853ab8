"""Where the shards of a distributed crawl lie: each node's index, in the directory it crawls into.

A node registers its shard (the machine it runs on, its directory) in Redis when it joins; the coordinator
keeps the list in its own directory, `DIR/shards.json`, so a reader given DIR finds every shard without
Redis. A shard is read where it lies: on this machine, or on a filesystem this machine shares with the
node's. One that is not there is named, never silently left out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import StoreError
from .db import NODE_DB

SHARDS_FILE = "shards.json"


@dataclass(frozen=True, slots=True)
class ShardPlace:
    """One shard: the machine of the node that wrote it and its directory there, and the nodes that wrote
    into it (a node restarted in a directory has a new id)."""

    host: str
    path: str
    nodes: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.host}:{self.path}"

    @property
    def database(self) -> Path:
        return Path(self.path) / NODE_DB

    def reachable(self) -> bool:
        """Whether this machine sees the shard: it lies here or on a filesystem shared with its node's."""
        return self.database.is_file()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str | bytes) -> ShardPlace:
        doc = json.loads(raw)
        return cls(host=doc["host"], path=doc["path"], nodes=tuple(doc["nodes"]))


def save_places(directory: Path, places: Iterable[ShardPlace]) -> None:
    """Write the crawl's shards into `directory`, whole or not at all (a reader may be reading it)."""
    doc = [asdict(place) for place in sorted(places, key=lambda place: place.key)]
    temporary = directory / f".{SHARDS_FILE}.{os.getpid()}"
    temporary.write_text(json.dumps(doc, indent=2) + "\n")
    temporary.replace(directory / SHARDS_FILE)


def load_places(directory: Path) -> list[ShardPlace]:
    """The shards the coordinator in `directory` registered; none for an embedded crawl's directory."""
    path = directory / SHARDS_FILE
    try:
        doc = json.loads(path.read_text())
        return [ShardPlace(host=d["host"], path=d["path"], nodes=tuple(d["nodes"])) for d in doc]
    except FileNotFoundError:
        return []
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{path} is not a list of shards ({exc}); the coordinator rewrites it when it runs") from None
