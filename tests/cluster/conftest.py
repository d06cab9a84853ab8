"""Fixtures for the cluster's tests: the same sites crawled twice, alone and spread over three nodes."""

from __future__ import annotations

import fcntl
import os
import shutil
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
def crawled_twice(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> CrawledTwice:
    """Built once per test run, whichever of its processes asks first (the others wait for it and read the
    same directories); tests read it and never change it (a test that must, changes a copy)."""
    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent  # the run's own directory, above each process's
    tmp_path = shared / "crawled-twice"
    fd = os.open(shared / "crawled-twice.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not (tmp_path / "built").exists():
            _crawl_twice(tmp_path)
            (tmp_path / "built").touch()
    finally:
        os.close(fd)
    return CrawledTwice(tmp_path / "embedded", tmp_path / "coord", (tmp_path / "w0", tmp_path / "w1"))


def _crawl_twice(tmp_path: Path) -> None:
    shutil.rmtree(tmp_path, ignore_errors=True)  # a build cut short
    with Sites() as sites, RedisServer() as server:
        embedded = Process(
            tmp_path / "logs", "embedded",
            "crawl", *sites.seeds, "--out", tmp_path / "embedded", "--delay", "0", "--per-host", PER_HOST,
            "--retries", "1", "-q",
        )  # fmt: skip
        code, _out, err = embedded.finish()
        assert code == 0, err
        crawl_on_three_nodes(sites, server.url, tmp_path)
