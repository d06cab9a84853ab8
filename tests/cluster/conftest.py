"""Fixtures for the cluster's tests: the same sites crawled twice, alone and spread over three nodes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.processes import PER_HOST, Process, Sites, crawl_on_three_nodes
from tests.redis_servers import RedisServer


@dataclass(frozen=True, slots=True)
class CrawledTwice:
    """The test sites crawled to the end twice: embedded (`alone`, crawl "default") and by three nodes
    (`spread`: the coordinator's directory, crawl `processes.NAME`; `nodes`: the workers' directories)."""

    alone: Path
    spread: Path
    nodes: tuple[Path, ...]


@pytest.fixture(scope="session")
def crawled_twice(tmp_path_factory: pytest.TempPathFactory) -> CrawledTwice:
    """Built once per test process; tests read it and never change it (a test that must, changes a copy)."""
    tmp_path = tmp_path_factory.mktemp("twice")
    with Sites() as sites, RedisServer() as server:
        embedded = Process(
            tmp_path / "logs", "embedded",
            "crawl", *sites.seeds, "--out", tmp_path / "embedded", "--delay", "0", "--per-host", PER_HOST,
            "--retries", "1", "-q",
        )  # fmt: skip
        code, _out, err = embedded.finish()
        assert code == 0, err
        crawl_on_three_nodes(sites, server.url, tmp_path)
    return CrawledTwice(tmp_path / "embedded", tmp_path / "coord", (tmp_path / "w0", tmp_path / "w1"))
