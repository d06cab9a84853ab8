"""A node's shard: the index of what one node of a distributed crawl fetched, kept in its own directory.

A node writes a batch's results into its shard only once Redis has accepted them under its leases (a result
fenced because its lease passed on is the next holder's to fetch again, and must never count as done here),
yet a node killed between the two must lose nothing. So a batch is written in two steps:
- *staged* before Redis sees it: each result encoded (`cluster.wire`) in `pending_results`, in the
  transaction that saves the WARC checkpoint;
- *settled* once Redis has answered: the accepted results written as any crawl's are (`store.ingest`, which
  also makes a second settling of the same results change nothing), and the stage emptied, in one
  transaction.
A node restarted in its directory settles what its predecessor left staged, from the acknowledgements Redis
kept for it (`cluster/lua/complete.lua`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..models import Completion, Resource
from .batches import record_site_files
from .db import transaction
from .ingest import Fresh, apply_items


@dataclass(frozen=True, slots=True)
class Staged:
    """One result of a staged batch."""

    batch: int
    fp: int
    node: str
    """The id of the node that sent it (a node restarted in the directory has another)."""
    partition: int
    result: bytes


def stage(
    conn: sqlite3.Connection,
    crawl_id: int,
    checkpoint: Mapping[str, int],
    results: Sequence[Staged],
    site_files: Sequence[Resource] = (),
    node: str | None = None,
) -> None:
    """Save the WARC checkpoint and stage a batch's results, in one transaction. The batch's site files
    (robots.txt, sitemaps) are indexed at once: they are no URL of any partition, nothing fences them."""
    with transaction(conn):
        record_site_files(conn, crawl_id, site_files, node)
        conn.executemany(
            "INSERT INTO warc_files(crawl_id, name, committed_end) VALUES (?, ?, ?) "
            "ON CONFLICT(crawl_id, name) DO UPDATE SET committed_end = excluded.committed_end",
            [(crawl_id, name, end) for name, end in checkpoint.items()],
        )
        conn.executemany(
            "INSERT OR REPLACE INTO pending_results(batch, fp, node, partition, result) VALUES (?, ?, ?, ?, ?)",
            [(r.batch, r.fp, r.node, r.partition, r.result) for r in results],
        )


def settle(
    conn: sqlite3.Connection,
    crawl_id: int,
    batch: int,
    node: str,
    accepted: Sequence[Completion],
    near_distance: int,
    new_links: Fresh,
) -> None:
    """Write the results of `batch` that Redis accepted, and empty its stage, in one transaction.

    The pages' links are written as waiting URLs, as a coordinator's index holds them (`new_links` leaves
    out those written before): Redis holds the frontier, but a crawl Redis lost is rebuilt from its shards
    (`cluster.restore`), and a URL found but not yet fetched is known nowhere else."""
    with transaction(conn):
        apply_items(
            conn, crawl_id, [(f"{node}/{batch}/{c.entry.fp}", c, node) for c in accepted], near_distance, new_links
        )
        conn.execute("DELETE FROM pending_results WHERE batch = ?", (batch,))


def staged(conn: sqlite3.Connection) -> list[Staged]:
    """What a node left staged, oldest batch first."""
    return [
        Staged(*row)
        for row in conn.execute("SELECT batch, fp, node, partition, result FROM pending_results ORDER BY batch, fp")
    ]
