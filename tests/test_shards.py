"""The list of a distributed crawl's shards in the coordinator's directory (`shards.json`): each shard keeps
its place (its number), a copy folded in stays named whoever writes the list next, a damaged list is written
again, and a shard that cannot be read, missing or damaged, is named rather than read."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from webtrawl.store.db import NODE_DB, connect
from webtrawl.store.shards import SHARDS_FILE, ShardPlace, Sources, load_places, save_places


def test_a_shard_keeps_its_place_and_its_copy_whoever_writes_the_list(tmp_path: Path) -> None:
    first = ShardPlace("a", "/crawl/w0", ("node-01",))
    second = ShardPlace("b", "/crawl/w1", ("node-02",))
    save_places(tmp_path, [first, second])
    # `webtrawl merge` folded the second in from a copy before the coordinator saw it, under this machine's name.
    save_places(tmp_path, [ShardPlace("here", "/copies/w1", ("node-02",), copy="shards/node-02")])
    # The coordinator writes what Redis lists: the node's own host and path, no copy; a node restarted in w0.
    save_places(tmp_path, [ShardPlace("b", "/crawl/w1", ("node-02",)), ShardPlace("a", "/crawl/w0", ("node-03",))])
    save_places(tmp_path, [ShardPlace("c", "/crawl/w2", ("node-04",))])
    assert load_places(tmp_path) == [
        ShardPlace("a", "/crawl/w0", ("node-01", "node-03")),
        ShardPlace("b", "/crawl/w1", ("node-02",), copy="shards/node-02"),
        ShardPlace("c", "/crawl/w2", ("node-04",)),
    ]


def test_a_damaged_list_is_named_when_read_and_written_again_when_saved(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / SHARDS_FILE).write_text('[{"host": "a"')
    with pytest.raises(Exception, match="is not a list of shards"):
        load_places(tmp_path)
    with caplog.at_level(logging.WARNING):
        save_places(tmp_path, [ShardPlace("a", "/crawl/w0", ("node-01",))])
    assert "writing it again" in caplog.text
    assert json.loads((tmp_path / SHARDS_FILE).read_text())[0]["path"] == "/crawl/w0"


def test_a_shard_missing_or_damaged_is_named_not_read(tmp_path: Path) -> None:
    good, damaged, gone = tmp_path / "w0", tmp_path / "w1", tmp_path / "w2"
    good.mkdir()
    conn = connect(good / NODE_DB)
    conn.execute("INSERT INTO crawls(name, identity, created_at) VALUES ('big', '{}', 0)")
    conn.close()
    damaged.mkdir()
    (damaged / NODE_DB).write_bytes(b"not a database" * 300)
    places = [ShardPlace("here", str(d), (f"node-0{i}",)) for i, d in enumerate((good, damaged, gone), 1)]
    save_places(tmp_path, places)
    with Sources.shards_of(tmp_path, "big") as sources:
        assert sources.distributed
        assert [source.directory for source in sources.all] == [good]
        assert sources.unreachable == places[1:]
