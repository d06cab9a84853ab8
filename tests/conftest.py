"""Fixtures for the whole suite: a test web site and real Redis servers, all on 127.0.0.1."""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis

from tests.cluster.processes import kill_leftovers
from tests.pywb import collection, pywb_venv
from tests.redis_servers import INSTALL_HINT, RedisCluster, RedisServer
from tests.sites import SiteServer


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test() -> Iterator[None]:
    yield
    kill_leftovers()


@pytest.fixture
async def site_server() -> AsyncIterator[SiteServer]:
    """The default test site (300 pages, seed 0, calendar on), served for one test; see `tests/sites`."""
    async with SiteServer() as server:
        yield server


@pytest.fixture
def site_server_sync() -> Iterator[str]:
    """The default test site served from a thread, for tests that call blocking APIs; yields its URL."""
    ready = threading.Event()
    stop = threading.Event()
    urls: list[str] = []

    async def serve() -> None:
        async with SiteServer(calendar=False) as server:
            urls.append(server.url)
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10), "test site did not start"
    yield urls[0]
    stop.set()
    thread.join(5)


def _require_redis() -> None:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.fail(INSTALL_HINT, pytrace=False)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A fresh standalone redis-server with AOF on, for one test; it may `kill` and `restart` it."""
    _require_redis()
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def _redis_session_server() -> Iterator[RedisServer]:
    _require_redis()
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_url(_redis_session_server: RedisServer) -> str:
    """The URL of a standalone Redis shared by the session, emptied (FLUSHALL) before each test."""
    with redis.Redis.from_url(_redis_session_server.url) as client:
        client.flushall()
    return _redis_session_server.url


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """A 3-master Redis Cluster shared by the session; tests use keys of their own (or `redis_cluster_url`)."""
    _require_redis()
    with RedisCluster() as cluster:
        yield cluster


@pytest.fixture
def redis_cluster_url(redis_cluster: RedisCluster) -> str:
    """The URL of the session's Redis Cluster, every master emptied (FLUSHALL) before each test."""
    for url in redis_cluster.urls:
        with redis.Redis.from_url(url) as client:
            client.flushall()
    return redis_cluster.url


@pytest.fixture(params=["redis", "redis-cluster"])
def redis_any(request: pytest.FixtureRequest) -> str:
    """A standalone Redis, then a 3-master Cluster (each emptied first): the distributed mode must run on both."""
    return request.getfixturevalue("redis_url" if request.param == "redis" else "redis_cluster_url")


@pytest.fixture(scope="session")
def pywb_bin() -> Path:
    """The bin directory of pywb's own virtualenv (`tests.pywb`)."""
    return pywb_venv()


@pytest.fixture
def wayback(pywb_bin: Path, tmp_path: Path) -> tuple[Path, str]:
    """A pywb collection directory and the replay server's URL of collection `crawl`."""
    return collection(pywb_bin, tmp_path)
