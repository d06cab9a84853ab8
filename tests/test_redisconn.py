"""connect() picks the right client and fails in our words; check_server() refuses evicting servers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster as ClusterClient

from tests.redis_servers import RedisCluster, RedisServer, free_port
from webtrawl.cluster.redisconn import cancel, check_server, connect, persist, pipelined
from webtrawl.errors import ConfigError, RedisUnavailable


async def test_standalone_server_gets_a_plain_client_and_no_warning(redis_url: str) -> None:
    client = await connect(redis_url)
    try:
        assert type(client) is Redis
        await client.set(b"k", b"v")
        assert await client.get(b"k") == b"v", "replies stay bytes"
        assert await check_server(client) == []
    finally:
        await client.aclose()


async def test_cluster_gets_a_cluster_client_and_every_master_is_checked(redis_cluster: RedisCluster) -> None:
    client = await connect(redis_cluster.urls[1])
    try:
        assert isinstance(client, ClusterClient)
        assert len(client.get_primaries()) == 3
        assert await check_server(client) == []
    finally:
        await client.aclose()


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-lru", "allkeys-random", "volatile-ttl"])
async def test_an_evicting_server_is_refused(policy: str) -> None:
    with RedisServer(maxmemory_policy=policy) as server:
        client = await connect(server.url)
        try:
            with pytest.raises(ConfigError) as caught:
                await check_server(client)
        finally:
            await client.aclose()
    message = str(caught.value)
    assert f"redis://127.0.0.1:{server.port}" in message
    assert f"maxmemory-policy {policy}" in message
    assert "set maxmemory-policy noeviction" in message


async def test_an_evicting_cluster_master_is_refused(redis_cluster: RedisCluster) -> None:
    node = redis_cluster.nodes[2]
    with redis.Redis.from_url(node.url) as admin:
        admin.config_set("maxmemory-policy", "allkeys-lru")
        try:
            client = await connect(redis_cluster.url)
            try:
                with pytest.raises(ConfigError, match=f"127.0.0.1:{node.port} evicts keys"):
                    await check_server(client)
            finally:
                await client.aclose()
        finally:
            admin.config_set("maxmemory-policy", "noeviction")


async def test_a_server_without_persistence_is_warned_about() -> None:
    with RedisServer(appendonly=False, save="") as server:
        client = await connect(server.url)
        try:
            warnings = await check_server(client)
        finally:
            await client.aclose()
    assert len(warnings) == 1
    assert warnings[0].startswith(f"Redis at redis://127.0.0.1:{server.port} keeps nothing on disk")
    assert "appendonly no, no save points" in warnings[0]


async def test_save_points_alone_count_as_persistence() -> None:
    with RedisServer(appendonly=False, save="3600 1") as server:
        client = await connect(server.url)
        try:
            assert await check_server(client) == []
        finally:
            await client.aclose()


async def test_config_refused_gives_a_warning_not_a_failure(redis_server: RedisServer) -> None:
    """As on managed services that disable CONFIG: here a user whose ACL denies it."""
    with redis.Redis.from_url(redis_server.url) as admin:
        admin.acl_setuser(
            "crawler", enabled=True, passwords=["+secret"], keys="*", channels="*", commands=["+@all", "-config"]
        )
    client = await connect(f"redis://crawler:secret@127.0.0.1:{redis_server.port}/0")
    try:
        warnings = await check_server(client)
    finally:
        await client.aclose()
    assert len(warnings) == 1
    assert warnings[0].startswith(f"could not check the settings of Redis at redis://127.0.0.1:{redis_server.port}")
    assert "noeviction" in warnings[0]


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379/0", "127.0.0.1:6379", "unix:///tmp/redis.sock", ""])
async def test_a_url_that_is_not_redis_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="must start with redis:// or rediss://"):
        await connect(url)


async def test_an_unusable_redis_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="is not usable"):
        await connect("redis://127.0.0.1:notaport/0")


async def test_a_closed_port_is_unavailable_quickly() -> None:
    port = free_port()
    with pytest.raises(RedisUnavailable) as caught:
        await connect(f"redis://:hunter2@127.0.0.1:{port}/0")
    message = str(caught.value)
    assert message.startswith(f"Redis at redis://:***@127.0.0.1:{port}/0 cannot be used: ")
    assert f"connecting to 127.0.0.1:{port}" in message
    assert "hunter2" not in message


async def test_a_pipeline_retried_across_a_redis_restart_gets_every_reply() -> None:
    """redis-py empties a pipeline when execute fails: each retry must send the commands again."""
    with RedisServer() as server:
        client = await connect(server.url)
        try:
            await client.set(b"a", b"1")
            await client.rpush(b"l", b"x", b"y", b"z")
            time.sleep(1.5)  # the AOF is written every second
            server.kill()

            def read(pipe: Any) -> None:
                pipe.get(b"a")
                pipe.llen(b"l")

            replies = asyncio.create_task(persist("reading", lambda: pipelined(client, read)))
            await asyncio.sleep(2.5)  # past redis-py's own retries: persist has failed at least once
            assert not replies.done()
            server.restart()
            assert await asyncio.wait_for(replies, 30) == [b"1", 3]
        finally:
            await client.aclose()


async def test_a_task_that_loses_a_cancellation_is_cancelled_again() -> None:
    """As redis-py's client can lose one (redis/redis-py#2551): the task must end all the same."""
    lost = 0

    async def loop() -> None:
        nonlocal lost
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                if lost:
                    raise
                lost += 1  # swallowed, as a library would

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)
    await cancel({task})
    assert task.cancelled() and lost == 1
