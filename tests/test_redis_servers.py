"""The Redis test servers behave like production ones: they answer, survive a crash with AOF, and shard."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as ClusterClient

from tests.redis_servers import RedisCluster, RedisServer


def test_standalone_server_answers(redis_server: RedisServer) -> None:
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    with redis.Redis.from_url(redis_server.url) as client:
        assert client.ping()
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}


async def test_kill_and_restart_keep_an_aof_write(redis_server: RedisServer) -> None:
    client = redis.asyncio.Redis.from_url(redis_server.url)
    await client.set(b"survivor", b"yes")
    await client.aclose()
    await asyncio.sleep(1.1)  # appendfsync everysec: past one fsync
    redis_server.kill()
    redis_server.restart()
    client = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        assert await client.get(b"survivor") == b"yes"
    finally:
        await client.aclose()


def test_stop_removes_the_data_dir() -> None:
    server = RedisServer(appendonly=False).start()
    data_dir = server.dir
    assert data_dir is not None and data_dir.is_dir()
    server.stop()
    assert not data_dir.exists()
    server.stop()


def test_redis_url_starts_empty(redis_url: str) -> None:
    with redis.Redis.from_url(redis_url) as client:
        assert client.dbsize() == 0
        client.set("left-behind", "1")


def test_redis_url_is_flushed_between_tests(redis_url: str) -> None:
    with redis.Redis.from_url(redis_url) as client:
        assert client.dbsize() == 0


async def test_cluster_serves_keys_in_different_slots(redis_cluster: RedisCluster) -> None:
    assert len(redis_cluster.urls) == 3
    assert redis_cluster.url in redis_cluster.urls
    client = ClusterClient.from_url(redis_cluster.url)
    try:
        await client.initialize()
        keys = [f"servers-test:{n}".encode() for n in range(30)]
        owners = {client.get_node_from_key(key).name for key in keys}
        assert len(owners) == 3, "30 keys should land on all three masters"
        for key in keys:
            await client.set(key, key)
        assert [await client.get(key) for key in keys] == keys
    finally:
        await client.aclose()


async def test_cluster_runs_a_script_on_one_hash_tag(redis_cluster: RedisCluster) -> None:
    client = ClusterClient.from_url(redis_cluster.url)
    try:
        move = client.register_script(
            "local v = redis.call('LPOP', KEYS[1]); redis.call('RPUSH', KEYS[2], v); return v"
        )
        source, target = b"{servers-test:p3}:waiting", b"{servers-test:p3}:running"
        await client.delete(source, target)
        await client.rpush(source, b"a", b"b")
        assert await move(keys=[source, target]) == b"a"
        assert await client.lrange(target, 0, -1) == [b"a"]
        assert await client.lrange(source, 0, -1) == [b"b"]
    finally:
        await client.aclose()


def test_a_server_that_cannot_start_says_why() -> None:
    with pytest.raises(RuntimeError, match="did not start") as caught:
        RedisServer(maxmemory_policy="keep-everything").start()
    assert "maxmemory-policy" in str(caught.value), "the log tail names the bad setting"


def test_a_missing_binary_names_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(RuntimeError, match="install the Debian package redis-server"):
        RedisServer().start()
