"""A chunk of one partition's results as `complete.lua` takes them, and what its reply says was refused.

Kept apart from the frontier that sends them: how a result is fenced (all of a chunk when the lease is not
ours, or the URLs no longer running under our token) decides what the node's shard may settle.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..models import Completion
from .bloom import fp_bytes

log = logging.getLogger(__name__)

Chunk = Sequence[Completion]
"""Results of one partition."""


def completion_args(token: str, node: str, batch: int, chunk: Chunk, now: float) -> list[Any]:
    """The arguments of `complete.lua` for `chunk`, sent under lease `token` as `node`'s batch `batch`."""
    args: list[Any] = [token, node, str(batch)]
    for item in chunk:
        delay = max(0, int(((item.not_before or now) - now) * 1000))
        args += [fp_bytes(item.entry.fp), item.verdict, delay]
    return args


def refused(p: int, chunk: Chunk, reply: Any) -> set[int]:
    """The fingerprints of `chunk` partition `p` did not record, from the script's reply (None: the lease is
    not ours, or the chunk was never sent), said in a warning. Those of a fetch (not, say, of a URL
    robots.txt disallows) are requests the node that holds the partition now makes again."""
    if reply is not None and not reply[1]:
        return set()
    skipped = None if reply is None else set(reply[1])
    items = [item for item in chunk if skipped is None or fp_bytes(item.entry.fp) in skipped]
    fetched = sum(item.capture is not None for item in items)
    log.warning(
        "partition %d: %d result(s) not recorded (%d of them fetched): its lease passed to another node",
        p, len(items), fetched,
    )  # fmt: skip
    return {item.entry.fp for item in items}
