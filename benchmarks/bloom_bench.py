"""Memory, accuracy and speed of URL dedup in Redis: the scalable Bloom filter against an exact set.

Starts its own redis-server on a free loopback port, inserts N generated URLs (their fingerprints) in
batches of 1,000 per call, and measures three layouts, one after the other on an emptied server:

  skewed  all URLs in one partition whose first layer holds --skew-capacity (10M/64), so it grows layers
  broad   URLs spread over --partitions by hash, first layers sized for --expected-urls (default N)
  exact   8-byte fingerprints in one Redis set per partition (SADD), as scrapy-redis keeps them

For each it prints MEMORY USAGE summed over its keys (what the allocator really hands out: a bitmap takes
a whole jemalloc size class, up to 25% more than its bits), bytes per URL, layers, the false-positive rate
measured on --unseen fingerprints never inserted (and the rate the filter estimates from its counts), and
insert throughput.

    .venv/bin/python benchmarks/bloom_bench.py [--urls 1000000] [--fp-rate 1e-4]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis
from redis.asyncio import Redis as AsyncRedis

from webtrawl.cluster.bloom import BLOOM_LUA, BloomStats, bloom_stats, first_capacity, fp_bytes
from webtrawl.urls import fingerprint, partition_of

BATCH = 1000
ADD_MANY = BLOOM_LUA + (
    "local capacity, error_rate, added = tonumber(ARGV[1]), tonumber(ARGV[2]), 0\n"
    "for i = 3, #ARGV do added = added + bloom_add(KEYS[1], ARGV[i], capacity, error_rate) end\n"
    "return added"
)
COUNT_SEEN = BLOOM_LUA + "local n = 0 for i = 1, #ARGV do n = n + bloom_check(KEYS[1], ARGV[i]) end return n"


@dataclass
class Result:
    case: str
    partitions: int
    layers: str
    memory: int
    added: int
    seconds: float
    measured_fp: float
    estimated_fp: float


@contextmanager
def redis_server() -> Iterator[redis.Redis]:
    """A redis-server of our own without persistence, stopped on the way out whatever happens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with tempfile.TemporaryDirectory() as workdir:
        command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        server = subprocess.Popen([*command, "--dir", workdir], stdout=subprocess.DEVNULL)
        client = redis.Redis(port=port)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
            yield client
        finally:
            client.close()
            server.kill()
            server.wait()


def urls(kind: str, n: int, partitions: int) -> list[tuple[int, bytes]]:
    """(partition, fingerprint) of n generated URLs over 5,000 hosts; partitioned by whole URL."""
    out = []
    for i in range(n):
        url = f"https://www.site{i % 5000}.example/{kind}/{i // 5000}/page-{i}.html"
        out.append((partition_of(url, partitions), fp_bytes(fingerprint(url))))
    return out


def batches(items: list[tuple[int, bytes]]) -> Iterator[tuple[int, list[bytes]]]:
    """Per-partition batches of up to BATCH fingerprints, each sent when full, as a frontier would."""
    pending: dict[int, list[bytes]] = {}
    for partition, fp in items:
        batch = pending.setdefault(partition, [])
        batch.append(fp)
        if len(batch) == BATCH:
            yield partition, pending.pop(partition)
    yield from pending.items()


def memory(client: redis.Redis) -> int:
    return sum(int(client.memory_usage(key, samples=0) or 0) for key in client.scan_iter(count=1000))


def bloom_case(
    client: redis.Redis,
    case: str,
    capacity: int,
    error_rate: float,
    seen: list[tuple[int, bytes]],
    unseen: list[tuple[int, bytes]],
) -> Result:
    add, count_seen = client.script_load(ADD_MANY), client.script_load(COUNT_SEEN)
    started = time.perf_counter()
    added = sum(client.evalsha(add, 1, f"{{{case}:p{p}}}", capacity, error_rate, *fps) for p, fps in batches(seen))
    seconds = time.perf_counter() - started
    hits = sum(client.evalsha(count_seen, 1, f"{{{case}:p{p}}}", *fps) for p, fps in batches(unseen))
    port = int(client.connection_pool.connection_kwargs["port"])
    stats = asyncio.run(all_stats(port, [f"{{{case}:p{p}}}" for p in sorted({p for p, _fp in seen})]))
    layers = sorted(s.layers for s in stats)
    # An unseen URL is checked in the partition its hash picks, so the overall rate is the mean over partitions.
    estimated = sum(s.estimated_fp_rate for s in stats) / len(stats)
    layer_range = f"{layers[0]}" if layers[0] == layers[-1] else f"{layers[0]}-{layers[-1]}"
    return Result(case, len(stats), layer_range, memory(client), added, seconds, hits / len(unseen), estimated)


async def all_stats(port: int, prefixes: list[str]) -> list[BloomStats]:
    client = AsyncRedis(port=port)
    try:
        return [await bloom_stats(client, prefix) for prefix in prefixes]
    finally:
        await client.aclose()


def exact_case(client: redis.Redis, seen: list[tuple[int, bytes]], unseen: list[tuple[int, bytes]]) -> Result:
    started = time.perf_counter()
    added = sum(int(client.sadd(f"{{exact:p{p}}}:seen", *fps)) for p, fps in batches(seen))
    seconds = time.perf_counter() - started
    hits = sum(sum(client.smismember(f"{{exact:p{p}}}:seen", fps)) for p, fps in batches(unseen))
    partitions = len({p for p, _fp in seen})
    return Result("exact", partitions, "-", memory(client), added, seconds, hits / len(unseen), 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--urls", type=int, default=1_000_000, help="URLs inserted (N)")
    parser.add_argument("--unseen", type=int, default=1_000_000, help="fingerprints never inserted, for the FP rate")
    parser.add_argument("--fp-rate", type=float, default=1e-4, help="configured false-positive rate")
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--expected-urls", type=int, help="what the broad crawl's filters are sized for (default N)")
    parser.add_argument("--skew-capacity", type=int, default=10_000_000 // 64, help="first layer of the skewed case")
    args = parser.parse_args()
    expected = args.expected_urls or args.urls

    seen = urls("page", args.urls, args.partitions)
    unseen = urls("unseen", args.unseen, args.partitions)
    results = []
    with redis_server() as client:
        skewed = [(0, fp) for _p, fp in seen]
        skewed_unseen = [(0, fp) for _p, fp in unseen]
        results.append(bloom_case(client, "skewed", args.skew_capacity, args.fp_rate, skewed, skewed_unseen))
        client.flushall()
        broad_capacity = first_capacity(expected, args.partitions)
        results.append(bloom_case(client, "broad", broad_capacity, args.fp_rate, seen, unseen))
        client.flushall()
        results.append(exact_case(client, seen, unseen))

    print(
        f"{args.urls:,} URLs, {args.unseen:,} unseen, configured FP rate {args.fp_rate:g}; first layer: skewed "
        f"{args.skew_capacity:,}, broad {broad_capacity:,} per partition\n"
    )
    header = "case   | parts | layers | memory MiB | bytes/URL |     added | FP measured | FP estimated |   URLs/s"
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.case:<6} | {r.partitions:>5} | {r.layers:>6} | {r.memory / 2**20:>10.2f}"
            f" | {r.memory / args.urls:>9.2f}"
            f" | {r.added:>9,} | {r.measured_fp:>11.2e} | {r.estimated_fp:>12.2e} | {args.urls / r.seconds:>8,.0f}"
        )


if __name__ == "__main__":
    main()
