"""Crawl the benchmark site embedded and distributed on Redis, and print what the distributed mode costs.

    .venv/bin/python benchmarks/redis_bench.py                  # 20,000 pages, every case
    .venv/bin/python benchmarks/redis_bench.py --pages 2000 --only node --only embedded

On the site and nginx of crawl_bench, with its limits (16 requests at once, 16 per host, no delay), it runs:

  embedded  `webtrawl crawl URL --out D -q`, as crawl_bench does
  node      the coordinator crawling alone (`--redis`)
  workers   the coordinator with `--no-fetch` and two workers of `--concurrency 8` each

Each distributed case gets a fresh redis-server of its own (no persistence, in a temp dir), so its counters
and `used_memory_peak` are that run's. Then, on another fresh server, `memory` adds 100,000 URLs of 100 hosts
to an empty frontier and reports Redis' memory per waiting URL, with Bloom and with exact dedup. See
benchmarks/README.md for the columns.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis

from bloom_bench import redis_server
from crawl_bench import CONCURRENCY, OUT, Run, crawl_webtrawl, prepare_site, profiled, warm_page_cache
from measure import Result, Usage, fetched_paths, print_columns, read_jsonl, run_measured_together, summarize
from nginx import Nginx, NginxError
from webtrawl.cluster.bloom import first_capacity
from webtrawl.cluster.frontier import RedisFrontier
from webtrawl.cluster.keys import Keys
from webtrawl.cluster.layout import Layout
from webtrawl.cluster.leases import Leases
from webtrawl.cluster.redisconn import connect
from webtrawl.config import PolitenessConfig, ScopeConfig
from webtrawl.models import NewURL
from webtrawl.politeness import Politeness
from webtrawl.urls import fingerprint, origin

NAME = "bench"
WORKERS = 2
LIMITS = ["--concurrency", str(CONCURRENCY), "--per-host", str(CONCURRENCY), "--delay", "0", "--quiet"]
CREATE_WAIT = 30.0
"""Seconds the workers wait for the coordinator to create the crawl in Redis."""
EXPECTED_URLS = 10_000_000
"""What `webtrawl crawl --expected-urls` sizes the Bloom filters for by default."""
PARTITIONS = 64
MEMORY_URLS = 100_000
MEMORY_HOSTS = 100
WAITING_KINDS = ("q", "w", "d", "h")
"""The keys a waiting URL costs (`cluster/lua/common.lua`): its host's queues, the waiting index, the host's
depths and heads."""
WATCH_EVERY = 0.5
"""Seconds between two samples of the crawl's counters in Redis."""
TOP_COMMANDS = 6
"""Redis commands listed per distributed case, by calls per page."""


@dataclass(frozen=True)
class RedisFigures:
    """What one run cost the Redis server: deltas of its counters, and its memory peak."""

    commands: int
    """Commands processed, including those the Lua scripts ran (Redis counts both)."""
    scripts: int
    """EVALSHA and EVAL calls: the round trips that carry the frontier's work."""
    sent_bytes: int
    """Bytes the server read from its clients (`total_net_input_bytes`)."""
    cpu_seconds: float
    peak_memory: int
    by_command: dict[str, int]


@dataclass
class Case:
    """One row of the table: the crawl's figures, Redis' (distributed only) and each process's usage."""

    result: Result
    redis: RedisFigures | None = None
    processes: dict[str, Usage] = field(default_factory=dict)
    emptied: float | None = None
    """Seconds from the start until the frontier held nothing waiting or running (distributed only)."""


@dataclass(frozen=True)
class MemoryFigure:
    dedup: str
    urls: int
    used: int
    """used_memory after adding − before."""
    by_kind: dict[str, int]
    """MEMORY USAGE summed per kind of key (the suffix after the partition's tag)."""


# -- Redis counters -------------------------------------------------------------------------------------


Counters = tuple[int, float, Counter[str], int]
"""Commands processed, CPU seconds, calls per command, bytes read from clients."""


def redis_counters(client: redis.Redis) -> Counters:
    """The server's counters so far."""
    stats, cpu = client.info("stats"), client.info("cpu")
    calls = Counter({name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in client.info("commandstats").items()})
    used = float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
    return int(stats["total_commands_processed"]), used, calls, int(stats["total_net_input_bytes"])


def redis_figures(client: redis.Redis, before: Counters, own: Counter[str]) -> RedisFigures:
    """The server's work since `before`, without the `own` calls the harness made meanwhile."""
    commands, cpu, calls, sent = redis_counters(client)
    by_command = calls - before[2] - own
    return RedisFigures(
        commands=commands - before[0] - sum(own.values()),
        scripts=by_command["evalsha"] + by_command["eval"],
        sent_bytes=sent - before[3],
        cpu_seconds=cpu - before[1],
        peak_memory=int(client.info("memory")["used_memory_peak"]),
        by_command=dict(by_command.most_common()),
    )


class FrontierWatch(threading.Thread):
    """Samples the crawl's counters in Redis while it runs: when its frontier emptied."""

    def __init__(self, port: int) -> None:
        super().__init__(name="frontier-watch", daemon=True)
        self._client = redis.Redis(port=port)
        self._halt = threading.Event()
        self._since = time.perf_counter()
        self.calls: Counter[str] = Counter()
        """Commands sent, by name, so the figures can leave them out."""
        self.emptied: float | None = None
        """Seconds from the start until nothing waited or ran any more."""

    def run(self) -> None:
        keys = Keys(NAME)
        while not self._halt.wait(WATCH_EVERY):
            self.calls["hget"] += 1
            layout = self._client.hget(keys.meta, "layout")
            if layout is None:
                continue
            partitions = int(json.loads(layout)["partitions"])
            pipe = self._client.pipeline(transaction=False)
            for p in range(partitions):
                pipe.hmget(keys.counters(p), "waiting", "running", "done")
            self.calls.update({"hmget": partitions})
            replies = pipe.execute()
            waiting, running, done = (sum(int(v[i] or 0) for v in replies) for i in range(3))
            if self.emptied is None and done and not waiting and not running:
                self.emptied = time.perf_counter() - self._since

    def stop(self) -> None:
        self._halt.set()
        self.join()
        self._client.close()


# -- the crawls -----------------------------------------------------------------------------------------


def crawl_embedded(run: Run, manifest: dict[str, list[str]]) -> Case:
    usage, paths, note, stages = crawl_webtrawl(run)
    return Case(summarize("embedded", usage, paths, manifest, note, stages), processes={"crawler": usage})


def crawl_distributed(
    label: str, case: str, run: Run, manifest: dict[str, list[str]], workers: int, extra: Sequence[str] = ()
) -> Case:
    """One distributed crawl on a fresh redis-server: a coordinator (fetching unless there are workers) and
    `workers` workers sharing the concurrency; `extra`: more flags for the coordinator (the crawl's layout)."""
    base = run.run_dir / case
    notes = []
    with redis_server() as client:
        url = f"redis://127.0.0.1:{client.connection_pool.connection_kwargs['port']}/0"
        coordinator = [sys.executable, "-m", "webtrawl", "crawl", run.url, "--out", str(base / "coordinator")]
        coordinator += ["--redis", url, "--name", NAME, *LIMITS, *extra] + (["--no-fetch"] if workers else [])
        roles = {"coordinator": profiled(coordinator, f"{case}-coordinator", run)}
        for i in range(1, workers + 1):
            worker = [sys.executable, "-m", "webtrawl", "worker", "--redis", url, "--name", NAME]
            worker += ["--out", str(base / f"worker-{i}"), "--concurrency", str(CONCURRENCY // workers), "--quiet"]
            roles[f"worker-{i}"] = profiled(worker, f"{case}-worker-{i}", run)
        notes += sorted({note for _command, note in roles.values() if note})
        before = redis_counters(client)
        watch = FrontierWatch(int(client.connection_pool.connection_kwargs["port"]))
        watch.start()
        try:
            usages = run_measured_together(
                [command for command, _note in roles.values()],
                timeout=run.timeout,
                before=lambda i: wait_for_crawl(client) if i else None,
            )
        finally:
            watch.stop()
        figures = redis_figures(client, before, watch.calls)
    paths, export_note = exported_paths(base / "coordinator", run.run_dir / f"{case}-export.jsonl")
    notes += [export_note] if export_note else []
    for role, usage in zip(roles, usages, strict=True):
        if usage.exit_code != 0:
            notes.append(f"{role} exited with {usage.exit_code}")
    together = Usage(
        seconds=max(u.seconds for u in usages),
        cpu_seconds=sum(u.cpu_seconds for u in usages),
        peak_rss_mb=max(u.peak_rss_mb for u in usages),
        exit_code=next((u.exit_code for u in usages if u.exit_code != 0), 0),
        timed_out=any(u.timed_out for u in usages),
    )
    result = summarize(label, together, paths, manifest, "; ".join(notes))
    return Case(result, figures, dict(zip(roles, usages, strict=True)), watch.emptied)


def wait_for_crawl(client: redis.Redis) -> None:
    """Return once the coordinator has created the crawl (its control key is written last)."""
    deadline = time.monotonic() + CREATE_WAIT
    while not client.exists(Keys(NAME).control):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the coordinator did not create crawl {NAME!r} in Redis within {CREATE_WAIT:.0f} s")
        time.sleep(0.05)


def exported_paths(directory: Path, export: Path) -> tuple[set[str], str]:
    """Paths fetched with status 200, from `webtrawl export` of the coordinator's directory."""
    command = [sys.executable, "-m", "webtrawl", "export", str(directory), "--format", "jsonl", "--name", NAME]
    with export.open("wb") as rows:
        exported = subprocess.run(command, stdout=rows, check=False)
    note = "" if exported.returncode == 0 else f"export failed (exit {exported.returncode})"
    return fetched_paths(read_jsonl(export)), note


# -- memory per waiting URL -----------------------------------------------------------------------------


def waiting_urls(n: int, hosts: int) -> list[NewURL]:
    """n links found on pages at depth 0, spread evenly over `hosts` hosts."""
    urls = []
    for i in range(n):
        url = f"http://www.site{i % hosts}.example/articles/{i // hosts % 50}/page-{i}.html"
        referrer = f"http://www.site{i % hosts}.example/"
        urls.append(NewURL(url=url, fp=fingerprint(url), host=origin(url), depth=1, referrer_fp=fingerprint(referrer)))
    return urls


async def waiting_memory(url: str, dedup: str, urls: list[NewURL]) -> MemoryFigure:
    """Redis memory taken by `urls` added to a new, empty crawl through the frontier, as nodes add links."""
    client = await connect(url)
    try:
        await client.flushall()
        before = (await client.info("memory"))["used_memory"]
        keys, scope = Keys("memory"), ScopeConfig()
        layout = Layout(
            partitions=PARTITIONS,
            dedup=dedup,
            bloom_capacity=first_capacity(EXPECTED_URLS, PARTITIONS),
            max_urls_per_host=scope.max_urls_per_host,
            max_urls_per_template=scope.max_urls_per_template,
        )
        nobody = Leases("memory", keys, PARTITIONS, ttl=1.0)
        frontier = RedisFrontier(client, keys, layout, nobody, Politeness(PolitenessConfig()))
        for start in range(0, len(urls), 1000):
            await frontier.add(urls[start : start + 1000])
        after = (await client.info("memory"))["used_memory"]
        by_kind: Counter[str] = Counter()
        async for key in client.scan_iter(count=1000):
            kind = key.decode().split("}:", 1)[1].split(":", 1)[0]
            by_kind[kind] += int(await client.memory_usage(key, samples=0) or 0)
        return MemoryFigure(dedup, len(urls), after - before, dict(by_kind.most_common()))
    finally:
        await client.aclose()


def measure_memory() -> list[MemoryFigure]:
    urls = waiting_urls(MEMORY_URLS, MEMORY_HOSTS)
    with redis_server() as client:
        url = f"redis://127.0.0.1:{client.connection_pool.connection_kwargs['port']}/0"
        return [asyncio.run(waiting_memory(url, dedup, urls)) for dedup in ("bloom", "exact")]


# -- printing -------------------------------------------------------------------------------------------


def per_page(amount: float, pages: int) -> str:
    return f"{amount / pages:.1f}" if pages else "n/a"


def print_table(cases: list[Case]) -> None:
    header = (
        "case",
        "pages",
        "seconds",
        "pages/s",
        "CPU ms/page",
        "peak RSS MB",
        "coverage",
        "Redis cmds/page",
        "scripts/page",
        "Redis CPU ms/page",
        "Redis peak MB",
    )
    rows = []
    for case in cases:
        r, f = case.result, case.redis
        rows.append(
            (
                r.crawler,
                f"{r.pages}",
                f"{r.seconds:.1f}",
                f"{r.pages_per_second:.0f}",
                f"{r.cpu_ms_per_page:.2f}",
                f"{r.peak_rss_mb:.0f}",
                "n/a" if r.coverage is None else f"{100 * r.coverage:.2f}%",
                "-" if f is None else per_page(f.commands, r.pages),
                "-" if f is None else per_page(f.scripts, r.pages),
                "-" if f is None else per_page(1000 * f.cpu_seconds, r.pages),
                "-" if f is None else f"{f.peak_memory / 2**20:.1f}",
            )
        )
    print_columns(header, rows)
    by_case = {case.result.crawler: case.result for case in cases}
    embedded, node = by_case.get("embedded"), by_case.get("redis 1 node")
    if embedded and node and embedded.pages_per_second:
        ratio = node.pages_per_second / embedded.pages_per_second
        print(f"\nredis 1 node / embedded: {ratio:.2f}× pages/s (goal ≥ 0.8)")
    for case in cases:
        r = case.result
        if len(case.processes) > 1 or case.redis is not None:
            cpu = ", ".join(f"{role} {u.cpu_seconds:.1f} s" for role, u in case.processes.items())
            redis_cpu = f", redis-server {case.redis.cpu_seconds:.1f} s" if case.redis else ""
            print(f"{r.crawler}: CPU {cpu}{redis_cpu}")
        if case.emptied is not None:
            print(f"  frontier empty after {case.emptied:.1f} s ({r.pages / case.emptied:.0f} pages/s)")
        if case.redis is not None and r.pages:
            top = list(case.redis.by_command.items())[:TOP_COMMANDS]
            print(f"  Redis calls/page: {', '.join(f'{name} {calls / r.pages:.1f}' for name, calls in top)}")
    for case in cases:
        r = case.result
        problems = [r.note] if r.note else []
        if r.exit_code != 0 and not r.note:
            problems.append(f"exited with {r.exit_code}")
        if r.disallowed_fetched:
            problems.append(f"fetched {r.disallowed_fetched} pages that robots.txt disallows")
        if problems:
            print(f"note: {r.crawler}: {'; '.join(problems)}")


def print_memory(figures: list[MemoryFigure]) -> None:
    print(
        f"\nRedis memory per waiting URL: {MEMORY_URLS:,} URLs of {MEMORY_HOSTS} hosts added to an empty crawl "
        f"({PARTITIONS} partitions, Bloom sized for {EXPECTED_URLS:,} URLs)"
    )
    print("dedup | bytes/URL | waiting (q+w+d+h) | by key kind (MEMORY USAGE, bytes/URL)")
    print("------+-----------+-------------------+--------------------------------------")
    for f in figures:
        kinds = ", ".join(f"{kind} {size / f.urls:.1f}" for kind, size in f.by_kind.items())
        waiting = sum(size for kind, size in f.by_kind.items() if kind in WAITING_KINDS) / f.urls
        print(f"{f.dedup:<5} | {f.used / f.urls:>9.1f} | {waiting:>17.1f} | {kinds}")
    bloom = next((f.by_kind.get("bf", 0) for f in figures if f.dedup == "bloom"), 0)
    print(
        f"The Bloom filter is allocated for its capacity: {bloom / EXPECTED_URLS:.1f} bytes per URL once "
        f"{EXPECTED_URLS:,} URLs are in; the waiting column is what each waiting URL costs beside it."
    )


# -- main -----------------------------------------------------------------------------------------------

CASES = ("embedded", "node", "workers", "memory")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Benchmark webtrawl's distributed mode on Redis.")
    parser.add_argument("--pages", type=int, default=20_000, help="pages in the generated site (20000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated site (1)")
    parser.add_argument(
        "--only", choices=CASES, action="append", help="run this case only (repeatable; default: every case)"
    )
    parser.add_argument("--keep", action="store_true", help="keep crawl outputs in benchmarks/out/run-*")
    parser.add_argument("--profile", action="store_true", help="record every webtrawl process with py-spy")
    parser.add_argument(
        "--profile-format", choices=("flamegraph", "speedscope"), default="flamegraph", help="py-spy output"
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before a crawl is killed")
    args = parser.parse_args()
    if args.pages < 20:
        parser.error("--pages must be at least 20")
    return args


def main() -> int:
    args = parse_args()
    # A plain `kill` of the harness must still stop nginx, Redis and the crawlers: turn it into an exception.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    chosen = [case for case in CASES if not args.only or case in args.only]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    OUT.mkdir(exist_ok=True)
    run_dir = OUT / f"run-{stamp}"
    run_dir.mkdir()
    cases: list[Case] = []
    memory: list[MemoryFigure] = []
    try:
        with contextlib.ExitStack() as stack:
            crawls = [case for case in chosen if case != "memory"]
            if crawls:
                site = prepare_site(args.pages, args.seed)
                manifest = json.loads((site / "manifest.json").read_text())
                warm_page_cache(site)
                url = stack.enter_context(Nginx(site, run_dir / "nginx")).url
                print(f"nginx: serving {site.name} at {url}")
                print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} (busy CPUs slow pages/s)")
                run = Run(url, run_dir, args.timeout, args.profile_format if args.profile else None, stamp)
            for case in crawls:
                print(f"running {case} …", flush=True)
                if case == "embedded":
                    cases.append(crawl_embedded(run, manifest))
                elif case == "node":
                    cases.append(crawl_distributed("redis 1 node", case, run, manifest, workers=0))
                else:
                    label = f"redis coordinator + {WORKERS} workers"
                    cases.append(crawl_distributed(label, case, run, manifest, workers=WORKERS))
            if "memory" in chosen:
                print("measuring Redis memory per waiting URL …", flush=True)
                memory = measure_memory()
    except (NginxError, TimeoutError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: no figures", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"crawl outputs kept in {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    if cases:
        print_table(cases)
    if memory:
        print_memory(memory)
    record = OUT / f"redis-results-{stamp}.json"
    figures: dict[str, Any] = {
        "pages": args.pages,
        "cases": [
            {
                **asdict(case.result),
                "pages_per_second": case.result.pages_per_second,
                "cpu_ms_per_page": case.result.cpu_ms_per_page,
                "redis": None if case.redis is None else asdict(case.redis),
                "processes": {role: asdict(usage) for role, usage in case.processes.items()},
                "frontier_emptied_after": case.emptied,
            }
            for case in cases
        ],
        "memory": [asdict(figure) for figure in memory],
    }
    record.write_text(json.dumps(figures, indent=1))
    print(f"\nfigures saved to {record}")
    return 0 if all(case.result.exit_code == 0 for case in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
