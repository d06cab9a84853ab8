"""The Redis Bloom filter: no false negatives, the false-positive rate it promises, growth, and its meta."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
from redis.asyncio import Redis

from webtrawl.cluster.bloom import (
    BLOOM_LUA,
    MAX_BITS,
    BloomStats,
    bloom_stats,
    first_capacity,
    fp_bytes,
    fp_int,
    layer_size,
)
from webtrawl.urls import fingerprint

ADD = BLOOM_LUA + "return bloom_add(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))"
COUNT_SEEN = BLOOM_LUA + "local n = 0 for i = 1, #ARGV do n = n + bloom_check(KEYS[1], ARGV[i]) end return n"
SIZE = BLOOM_LUA + "return {bloom_layer_size(tonumber(ARGV[1]), tonumber(ARGV[2]))}"
STATS = BLOOM_LUA + "return bloom_stats(KEYS[1])"
UNSEEN = [fp_bytes(fingerprint(f"https://unseen.test/{i}")) for i in range(100_000)]


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A redis-server of our own on a free port, without persistence, for this module."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    workdir: Path = tmp_path_factory.mktemp("redis")
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = subprocess.Popen([*command, "--dir", str(workdir)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with redis.Redis(port=port) as probe:
                    probe.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield port
    finally:
        server.kill()
        server.wait()


@pytest.fixture
async def client(redis_port: int) -> AsyncIterator[Redis]:
    client = Redis(port=redis_port)
    yield client
    await client.aclose()


async def add_all(client: Redis, prefix: str, fps: list[bytes], capacity: int, error_rate: float) -> list[int]:
    """bloom_add for each fingerprint, one script call each (pipelined), in order."""
    sha = await client.script_load(ADD)
    results: list[int] = []
    for start in range(0, len(fps), 5000):
        async with client.pipeline(transaction=False) as pipe:
            for fp in fps[start : start + 5000]:
                pipe.evalsha(sha, 1, prefix, fp, capacity, error_rate)
            results += await pipe.execute()
    return results


async def measured_fp_rate(client: Redis, prefix: str) -> float:
    """Share of 100,000 fingerprints never added that the filter takes for seen."""
    sha = await client.script_load(COUNT_SEEN)
    hits = 0
    for start in range(0, len(UNSEEN), 10_000):
        hits += await client.evalsha(sha, 1, prefix, *UNSEEN[start : start + 10_000])
    return hits / len(UNSEEN)


def fps(name: str, n: int) -> list[bytes]:
    return [fp_bytes(fingerprint(f"https://{name}.test/page/{i}")) for i in range(n)]


async def test_layer_size_is_the_same_in_python_and_lua(client: Redis) -> None:
    sha = await client.script_load(SIZE)
    for capacity, error_rate in [(1, 0.5), (1000, 0.01), (15_625, 5e-5), (156_250, 1.25e-5), (10**7, 1e-9)]:
        assert tuple(await client.evalsha(sha, 0, capacity, repr(error_rate))) == layer_size(capacity, error_rate)
    assert layer_size(10**10, 1e-4) == (MAX_BITS, 1)  # capped: k follows the bits the layer really has
    assert layer_size(1000, 0.01) == (9586, 7)


def test_fingerprints_pack_big_endian_and_back() -> None:
    assert fp_bytes(-1) == b"\xff" * 8 and fp_bytes(1) == b"\0" * 7 + b"\1"
    for fp in (-(2**63), -1, 0, 1, 2**63 - 1, fingerprint("https://example.com/")):
        assert fp_int(fp_bytes(fp)) == fp


def test_first_capacity_covers_the_spread_of_hashed_partitions() -> None:
    assert first_capacity(10_000, 64) == 1000
    assert 15_625 < first_capacity(1_000_000, 64) <= 15_625 * 1.04


@pytest.mark.parametrize("error_rate", [1e-3, 1e-2])
async def test_no_false_negatives_and_the_promised_rate(client: Redis, error_rate: float) -> None:
    prefix = f"{{rate{error_rate}:p0}}"
    added = fps(f"rate{error_rate}", 10_000)
    first = await add_all(client, prefix, added, 10_000, error_rate)
    assert set(first) <= {0, 1} and sum(first) > 0.99 * len(added)
    assert await add_all(client, prefix, added, 10_000, error_rate) == [0] * len(added)

    stats = await bloom_stats(client, prefix)
    assert (stats.layers, stats.count, stats.capacity) == (1, sum(first), 10_000)
    assert stats.bits == layer_size(10_000, error_rate / 2)[0] and stats.error_rate == error_rate
    assert abs(stats.fill_ratio - 0.5) < 0.05  # a full layer with the best k has half its bits set
    measured = await measured_fp_rate(client, prefix)
    assert measured <= 2 * error_rate
    assert stats.estimated_fp_rate / 2 <= measured <= 2 * stats.estimated_fp_rate


async def test_grows_layers_past_capacity_and_keeps_the_rate(client: Redis) -> None:
    prefix, error_rate = "{grow:p3}", 1e-2
    added = fps("grow", 7000)
    first = await add_all(client, prefix, added, 1000, error_rate)
    assert await add_all(client, prefix, added, 1000, error_rate) == [0] * len(added)

    meta = {key.decode(): value.decode() for key, value in (await client.hgetall(f"{prefix}:bf")).items()}
    assert meta["layers"] == "3"
    for i in range(3):
        m, k = layer_size(1000 * 2**i, error_rate * 0.5 ** (i + 1))
        assert (meta[f"m:{i}"], meta[f"k:{i}"], meta[f"capacity:{i}"]) == (str(m), str(k), str(1000 * 2**i))
        assert await client.strlen(f"{prefix}:bf:{i}") == (m + 7) // 8  # allocated whole at creation
    assert meta["count:0"] == "1000" and meta["count:1"] == "2000"

    stats = await bloom_stats(client, prefix)
    assert (stats.layers, stats.count, stats.capacity) == (3, sum(first), 7000)
    measured = await measured_fp_rate(client, prefix)
    assert error_rate / 2 <= measured <= 2 * error_rate
    assert stats.estimated_fp_rate / 2 <= measured <= 2 * stats.estimated_fp_rate


async def test_meta_written_at_creation_is_what_later_calls_use(client: Redis) -> None:
    prefix = "{meta:p1}"
    await add_all(client, prefix, fps("meta-a", 1), 1000, 0.01)
    first = await add_all(client, prefix, fps("meta-b", 1500), 50, 0.5)
    meta = {key.decode(): value.decode() for key, value in (await client.hgetall(f"{prefix}:bf")).items()}
    assert float(meta["error_rate"]) == 0.01 and meta["capacity"] == "1000"
    assert (meta["layers"], meta["capacity:0"], meta["capacity:1"]) == ("2", "1000", "2000")
    assert (int(meta["m:0"]), int(meta["k:0"])) == layer_size(1000, 0.005)
    assert (int(meta["m:1"]), int(meta["k:1"])) == layer_size(2000, 0.0025)
    assert int(meta["count:0"]) + int(meta["count:1"]) == 1 + sum(first)

    flat = await client.eval(STATS, 1, prefix)
    assert {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)} == meta


async def test_missing_filter_and_bad_fingerprints(client: Redis) -> None:
    assert await bloom_stats(client, "{none:p0}") == BloomStats(0, 0, 0, 0, 0.0, 0.0, 0.0)
    assert await client.eval(COUNT_SEEN, 1, "{none:p0}", fp_bytes(7)) == 0
    with pytest.raises(redis.ResponseError, match="8-byte"):
        await client.eval(ADD, 1, "{bad:p0}", b"short", 1000, 0.01)
    with pytest.raises(redis.ResponseError, match="capacity"):
        await client.eval(ADD, 1, "{bad:p0}", fp_bytes(7), 0, 0.01)
    assert await client.exists("{bad:p0}:bf") == 0
