"""A node's stage (`store.shard.StageFile`): what it staged before Redis answered comes back whole after a
kill, however the write was cut, and a restarted node settles exactly what Redis accepted of it."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import redis

from tests.test_ingest import fetched
from webtrawl.cluster.bloom import fp_bytes
from webtrawl.cluster.keys import Keys
from webtrawl.cluster.redisconn import connect
from webtrawl.cluster.shard import NodeShard
from webtrawl.cluster.wire import encode_completion
from webtrawl.store.crawls import open_crawl
from webtrawl.store.db import NODE_DB, Database
from webtrawl.store.shard import Staged, StageFile


def rows(batch: int, *paths: str, node: str = "node-02") -> list[Staged]:
    return [
        Staged(batch, c.entry.fp, node, i % 3, encode_completion(c, node))
        for i, c in enumerate(fetched(path, text=f"text of {path} " * 200) for path in paths)
    ]


def test_staged_records_are_read_back_in_the_order_written(tmp_path: Path) -> None:
    stage = StageFile(tmp_path)
    assert stage.read() == [] and not stage.holds()
    first, second = rows(1, "/a", "/b"), rows(2, "/c", node="node-07")
    stage.append(first)
    stage.append(second)
    assert stage.read() == first + second
    stage.clear()
    assert stage.read() == [] and not stage.holds()


@pytest.mark.parametrize("damage", ["cut mid-record", "cut in the next head", "a byte changed"])
def test_a_record_the_write_left_torn_is_left_out_and_the_ones_before_it_kept(tmp_path: Path, damage: str) -> None:
    """A node killed, or out of disk, in the middle of its write: its batch never reached Redis."""
    stage = StageFile(tmp_path)
    kept = rows(1, "/a", "/b")
    stage.append(kept)
    whole = stage.path.stat().st_size
    stage.append(rows(2, "/c"))
    size = stage.path.stat().st_size
    if damage == "cut mid-record":
        os.truncate(stage.path, (whole + size) // 2)
    elif damage == "cut in the next head":
        os.truncate(stage.path, whole + 5)
    else:
        data = bytearray(stage.path.read_bytes())
        data[size - 100] ^= 0xFF
        stage.path.write_bytes(bytes(data))
    assert stage.read() == kept
    assert stage.holds()


@pytest.mark.parametrize("where", ["stage file", "database of an earlier webtrawl"])
async def test_a_restarted_node_settles_what_redis_accepted_of_the_batch_left_staged(
    tmp_path: Path, redis_url: str, where: str
) -> None:
    keys = Keys("stage")
    staged = rows(41, "/a", "/b", "/c")
    accepted = staged[:2]  # the third was fenced: its partition's lease had passed on
    db = await Database(tmp_path / NODE_DB).open()
    client = await connect(redis_url)
    sync = redis.Redis.from_url(redis_url)
    try:
        crawl_id, _ = await db.run(open_crawl, "stage", {"seeds": []})
        if where == "stage file":
            StageFile(tmp_path).append(staged)
        else:
            await db.run(
                lambda conn: conn.executemany(
                    "INSERT INTO pending_results(batch, fp, node, partition, result) VALUES (?, ?, ?, ?, ?)",
                    [(r.batch, r.fp, r.node, r.partition, r.result) for r in staged],
                )
            )
        for p in {row.partition for row in staged}:
            acked = b"".join(fp_bytes(row.fp) for row in accepted if row.partition == p)
            sync.hset(keys.acks(p), mapping={"node-02": "41", "node-02/": acked})
        await NodeShard(db, crawl_id, "node-09", near_distance=0).recover(client, keys, 3)
    finally:
        await db.close()
        await client.aclose()
    conn = sqlite3.connect(tmp_path / NODE_DB)
    try:
        captured = {row for (row,) in conn.execute("SELECT fp FROM captures")}
        left = conn.execute("SELECT COUNT(*) FROM pending_results").fetchone()
    finally:
        conn.close()
    assert captured == {row.fp for row in accepted}
    assert left == (0,) and StageFile(tmp_path).read() == []
    assert not any(sync.exists(keys.acks(p)) for p in range(3))  # of no more use once settled
    sync.close()
