"""A node's shard: the index of what one node of a distributed crawl fetched, kept in its own directory.

A node writes a batch's results into its shard only once Redis has accepted them under its leases (a result
fenced because its lease passed on is the next holder's to fetch again, and must never count as done here),
yet a node killed between the two must lose nothing. So a batch is written in two steps:
- *staged* before Redis sees it: each result encoded (`cluster.wire`) and appended to the shard's stage file
  (`StageFile`), then the WARC checkpoint saved in the database;
- *settled* once Redis has answered: the accepted results written as any crawl's are (`store.ingest`, which
  also makes a second settling of the same results change nothing) in one transaction, then the stage file
  emptied.
A node restarted in its directory settles what its predecessor left staged, from the acknowledgements Redis
kept for it (`cluster/lua/complete.lua`).

The stage is a plain file rather than a table because a staged result is mostly the page's text: written
into the database, then deleted once settled, it made SQLite write each page's text twice more than an
embedded crawl does. Staging and settling a batch of synthetic pages (12 KB of text, 40 links) took 0.42 ms
of CPU a page through the file against 0.61 through a table, in the same run. A batch is appended in one
write and the file cut to nothing once it is settled; a process killed mid-write leaves a torn last record,
which `StageFile.read` leaves out: its batch never reached Redis, which is asked before anything staged is
settled.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import StoreError
from ..models import Completion, Resource
from .batches import record_site_files
from .db import disk_full, transaction
from .ingest import Fresh, apply_items

STAGE_FILE = "staged.bin"
"""In the shard's directory: the results of the batch Redis has not yet answered for."""


@dataclass(frozen=True, slots=True)
class Staged:
    """One result of a staged batch."""

    batch: int
    fp: int
    node: str
    """The id of the node that sent it (a node restarted in the directory has another)."""
    partition: int
    result: bytes


_HEAD = struct.Struct("<QqIHI")
"""A staged record's head: batch, fp, partition, and the lengths of the node id and the result after it; a
CRC-32 of head, node and result ends the record."""
_CRC = struct.Struct("<I")


class StageFile:
    """The stage of the shard in a directory: records appended a batch at a time, read back whole."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / STAGE_FILE

    def append(self, rows: Sequence[Staged]) -> None:
        """Append `rows` in one write. StoreError when it fails (a full disk): it left at most a torn record,
        which is never read back."""
        parts = []
        for row in rows:
            node = row.node.encode()
            record = _HEAD.pack(row.batch, row.fp, row.partition, len(node), len(row.result)) + node + row.result
            parts += [record, _CRC.pack(zlib.crc32(record))]
        try:
            with self.path.open("ab") as file:
                file.write(b"".join(parts))
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
                raise disk_full(self.path) from exc
            raise StoreError(f"cannot write the stage file {self.path}: {exc}") from exc

    def read(self) -> list[Staged]:
        """Every whole record, in the order written; a torn or damaged tail ends the reading."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        rows, at = [], 0
        while at + _HEAD.size <= len(data):
            batch, fp, partition, node_size, result_size = _HEAD.unpack_from(data, at)
            end = at + _HEAD.size + node_size + result_size
            if end + _CRC.size > len(data) or _CRC.unpack_from(data, end)[0] != zlib.crc32(data[at:end]):
                break
            node = data[at + _HEAD.size : at + _HEAD.size + node_size].decode()
            rows.append(Staged(batch, fp, node, partition, data[end - result_size : end]))
            at = end + _CRC.size
        return rows

    def clear(self) -> None:
        """Empty the stage: what it held is settled."""
        if self.path.exists():
            os.truncate(self.path, 0)

    def holds(self) -> bool:
        """Something is staged, or a torn record a killed node left (settling it finds nothing to write)."""
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False


def stage(
    conn: sqlite3.Connection,
    crawl_id: int,
    checkpoint: Mapping[str, int],
    site_files: Sequence[Resource] = (),
    node: str | None = None,
) -> None:
    """Save the WARC checkpoint of a batch whose results are staged, in one transaction. The batch's site
    files (robots.txt, sitemaps) are indexed at once: they are no URL of any partition, nothing fences them."""
    with transaction(conn):
        record_site_files(conn, crawl_id, site_files, node)
        conn.executemany(
            "INSERT INTO warc_files(crawl_id, name, committed_end) VALUES (?, ?, ?) "
            "ON CONFLICT(crawl_id, name) DO UPDATE SET committed_end = excluded.committed_end",
            [(crawl_id, name, end) for name, end in checkpoint.items()],
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
    """Write the results of `batch` that Redis accepted, in one transaction (the caller empties the stage).

    The pages' links are written as waiting URLs, as a coordinator's index holds them (`new_links` leaves
    out those written before): Redis holds the frontier, but a crawl Redis lost is rebuilt from its shards
    (`cluster.restore`), and a URL found but not yet fetched is known nowhere else."""
    with transaction(conn):
        apply_items(
            conn, crawl_id, [(f"{node}/{batch}/{c.entry.fp}", c, node) for c in accepted], near_distance, new_links
        )


def staged_before(conn: sqlite3.Connection) -> list[Staged]:
    """What a node of an earlier webtrawl, which staged in the database (`pending_results`), left staged,
    oldest batch first: settled once, as the stage file's are."""
    return [
        Staged(*row)
        for row in conn.execute("SELECT batch, fp, node, partition, result FROM pending_results ORDER BY batch, fp")
    ]


def forget_staged_before(conn: sqlite3.Connection) -> None:
    with transaction(conn):
        conn.execute("DELETE FROM pending_results")
