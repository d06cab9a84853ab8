"""Does a distributed crawl grow with its machines? What its shared parts (Redis, the coordinator) cost a page.

    .venv/bin/python benchmarks/scale_bench.py                               # every part
    .venv/bin/python benchmarks/scale_bench.py --only synthetic --pages 5000

Three parts, each on servers of its own started here and stopped on every exit:

  crawl      the benchmark site (nginx, as crawl_bench serves it) crawled embedded, then distributed with the
             coordinator `--no-fetch` and 1, 2 and 4 workers (`--partition-by url`, the concurrency shared)
  synthetic  synthetic nodes (`synthetic_node.py`: no HTTP; each page they claim is made up at once, with the
             benchmark site's text and links) against one redis-server and a real coordinator, as fast as
             this machine lets them: what Redis and the coordinator spend a page, and the pages/s that follows
  cluster    the same synthetic run on a 3-master Redis Cluster

Per case: pages, seconds, pages/s, CPU ms a page of each process (the coordinator, the nodes together,
redis-server: every master summed, and the busiest one), bytes sent to Redis a page, coverage. The ceiling
is what the busiest shared process allows on one core: 1000 ÷ its CPU ms a page. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis
import redis.cluster

from bloom_bench import redis_server
from crawl_bench import OUT, Run, prepare_site, warm_page_cache
from measure import Usage, print_columns, run_measured_together
from nginx import Nginx, NginxError
from redis_bench import NAME, Case, crawl_distributed, crawl_embedded, redis_counters

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from tests.redis_servers import RedisCluster  # noqa: E402 - the project's own server harness, found from the root

WORKER_COUNTS = (1, 2, 4)
SYNTHETIC_NODES = 2
"""Synthetic nodes at once: on a 2-core machine, two keep the shared parts as busy as they can be."""
SEED = "http://h0.synthetic.invalid/p/0.html"
PARTS = ("crawl", "synthetic", "cluster")


@dataclass(frozen=True)
class Row:
    """One case: the figures every part prints."""

    label: str
    pages: int
    seconds: float
    coordinator_cpu: float
    nodes_cpu: float
    redis_cpu: float
    busiest_redis_cpu: float
    sent_bytes: int
    coverage: float | None
    """The share of the pages expected that were captured (0 to 1)."""
    processes: dict[str, float] = field(default_factory=dict)
    """CPU seconds of each process of the case, by role (coordinator, worker-1, node-1, …)."""
    coordinator_startup: float = 0.0
    """The coordinator's CPU seconds until its nodes started (imports, creating the crawl in Redis): a cost a
    run pays once, left out of its CPU a page (`coordinator_cpu` is what it spent from then on)."""

    def per_page(self, seconds: float) -> str:
        return f"{1000 * seconds / self.pages:.3f}" if self.pages else "n/a"

    @property
    def ceiling(self) -> str:
        busiest = max(self.coordinator_cpu, self.busiest_redis_cpu)
        return f"{self.pages / busiest:,.0f}" if busiest and self.pages else "n/a"


# -- the crawl part ---------------------------------------------------------------------------------------


def crawl_rows(run: Run, manifest: dict[str, list[str]]) -> list[Row]:
    rows = [_crawl_row(crawl_embedded(run, manifest))]
    for workers in WORKER_COUNTS:
        label = f"coordinator + {workers} worker{'s' if workers > 1 else ''}"
        case = crawl_distributed(label, f"w{workers}", run, manifest, workers, ("--partition-by", "url"))
        rows.append(_crawl_row(case))
    return rows


def _crawl_row(case: Case) -> Row:
    r, processes = case.result, case.processes
    redis_cpu = case.redis.cpu_seconds if case.redis else 0.0
    coordinator = processes.get("coordinator") if case.redis else None
    return Row(
        label=r.crawler,
        pages=r.pages,
        seconds=r.seconds,
        coordinator_cpu=_working(coordinator) if coordinator else 0.0,
        nodes_cpu=sum(u.cpu_seconds for role, u in processes.items() if role != "coordinator" or not case.redis),
        redis_cpu=redis_cpu,
        busiest_redis_cpu=redis_cpu,
        sent_bytes=case.redis.sent_bytes if case.redis else 0,
        coverage=r.coverage,
        processes={role: _working(u) if u is coordinator else u.cpu_seconds for role, u in processes.items()},
        coordinator_startup=coordinator.cpu_at_ready if coordinator else 0.0,
    )


def _working(coordinator: Usage) -> float:
    """The coordinator's CPU seconds once its nodes had started (see `Row.coordinator_startup`)."""
    return coordinator.cpu_seconds - coordinator.cpu_at_ready


# -- the synthetic parts ----------------------------------------------------------------------------------


@contextlib.contextmanager
def one_server() -> Iterator[tuple[str, list[redis.Redis]]]:
    with redis_server() as client:
        yield f"redis://127.0.0.1:{client.connection_pool.connection_kwargs['port']}/0", [client]


@contextlib.contextmanager
def three_masters() -> Iterator[tuple[str, list[redis.Redis]]]:
    with RedisCluster(appendonly=False) as cluster:
        masters = [redis.Redis.from_url(url) for url in cluster.urls]
        try:
            yield cluster.url, masters
        finally:
            for master in masters:
                master.close()


def synthetic_row(label: str, url: str, masters: list[redis.Redis], pages: int, run_dir: Path, timeout: float) -> Row:
    out = run_dir / label.replace(" ", "-")
    coordinator = [sys.executable, "-m", "webtrawl", "crawl", SEED, "--redis", url, "--name", NAME, "--no-fetch"]
    coordinator += ["--out", str(out), "--quiet"]
    node = [sys.executable, str(HERE / "synthetic_node.py"), "--redis", url, "--name", NAME, "--pages", str(pages)]
    before = [redis_counters(master) for master in masters]
    usages = run_measured_together(
        [coordinator] + [node] * SYNTHETIC_NODES, timeout=timeout, before=lambda i: _created(url) if i else None
    )
    after = [redis_counters(master) for master in masters]
    cpu = [a[1] - b[1] for a, b in zip(after, before, strict=True)]
    sent = sum(a[3] - b[3] for a, b in zip(after, before, strict=True))
    done = _done(out)
    failed = [usage.exit_code for usage in usages if usage.exit_code != 0]
    if failed:
        print(f"note: {label}: exit codes {failed}", file=sys.stderr)
    return Row(
        label=label,
        pages=done,
        seconds=max(u.seconds for u in usages),
        coordinator_cpu=_working(usages[0]),
        nodes_cpu=sum(u.cpu_seconds for u in usages[1:]),
        redis_cpu=sum(cpu),
        busiest_redis_cpu=max(cpu),
        sent_bytes=sent,
        coverage=done / pages,
        coordinator_startup=usages[0].cpu_at_ready,
        processes={
            "coordinator": _working(usages[0]),
            **{f"node-{i}": usage.cpu_seconds for i, usage in enumerate(usages[1:], 1)},
        },
    )


def _created(url: str) -> None:
    """Once the coordinator has created the crawl (its control key is written last)."""
    with redis.Redis.from_url(url) as probe:
        clustered = probe.info("cluster").get("cluster_enabled") == 1
    client = redis.cluster.RedisCluster.from_url(url) if clustered else redis.Redis.from_url(url)
    try:
        deadline = time.monotonic() + 30
        while not client.exists(f"{{{NAME}:control}}"):
            if time.monotonic() > deadline:
                raise TimeoutError("the coordinator did not create the crawl within 30 s")
            time.sleep(0.05)
    finally:
        client.close()


def _done(out: Path) -> int:
    """The pages the crawl completed, as its coordinator last published them (a synthetic node keeps no shard)."""
    db = sqlite3.connect(out / "crawl.db")
    try:
        row = db.execute("SELECT snapshot FROM crawl_live").fetchone()
    finally:
        db.close()
    return int(json.loads(row[0])["counts"]["done"]) if row else 0


# -- printing and main ------------------------------------------------------------------------------------


def print_rows(title: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    header = ("case", "pages", "seconds", "pages/s", "coordinator ms/page", "nodes ms/page", "redis ms/page",
              "busiest redis ms/page", "bytes to Redis/page", "coverage", "ceiling pages/s")  # fmt: skip
    print_columns(
        header,
        [
            (
                r.label,
                str(r.pages),
                f"{r.seconds:.1f}",
                f"{r.pages / r.seconds:.0f}" if r.seconds else "n/a",
                r.per_page(r.coordinator_cpu) if r.coordinator_cpu else "-",
                r.per_page(r.nodes_cpu),
                r.per_page(r.redis_cpu) if r.redis_cpu else "-",
                r.per_page(r.busiest_redis_cpu) if r.busiest_redis_cpu else "-",
                f"{r.sent_bytes / r.pages:,.0f}" if r.sent_bytes and r.pages else "-",
                "-" if r.coverage is None else f"{100 * r.coverage:.2f}%",
                r.ceiling if r.redis_cpu else "-",
            )
            for r in rows
        ],
    )
    for r in rows:
        if len(r.processes) > 1:
            each = ", ".join(f"{role} {r.per_page(cpu)}" for role, cpu in r.processes.items())
            print(f"  {r.label}, CPU ms/page of each process: {each}")
    startups = [f"{r.label} {r.coordinator_startup:.2f} s" for r in rows if r.coordinator_startup]
    if startups:
        print(f"  the coordinator's start-up CPU, left out of its ms/page: {', '.join(startups)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=20_000, help="pages of the site, and of the synthetic runs")
    parser.add_argument("--seed", type=int, default=1, help="the benchmark site's generator seed")
    parser.add_argument("--only", choices=PARTS, action="append", help="run this part only (repeatable)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before a run is killed")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    chosen = [part for part in PARTS if not args.only or part in args.only]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    OUT.mkdir(exist_ok=True)
    run_dir = OUT / f"scale-{stamp}"
    run_dir.mkdir()
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} (busy CPUs slow pages/s)")
    tables: dict[str, list[Row]] = {}
    try:
        if "crawl" in chosen:
            site = prepare_site(args.pages, args.seed)
            manifest = json.loads((site / "manifest.json").read_text())
            warm_page_cache(site)
            with Nginx(site, run_dir / "nginx") as nginx:
                run = Run(nginx.url, run_dir, args.timeout, None, stamp)
                print("running the crawls …", flush=True)
                tables["crawl"] = crawl_rows(run, manifest)
        for part, servers in (("synthetic", one_server), ("cluster", three_masters)):
            if part in chosen:
                print(f"running {part} …", flush=True)
                with servers() as (url, masters):
                    label = "one redis-server" if part == "synthetic" else "3-master Cluster"
                    tables[part] = [synthetic_row(label, url, masters, args.pages, run_dir, args.timeout)]
    except (NginxError, TimeoutError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: no figures", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    titles = {
        "crawl": f"The benchmark site ({args.pages:,} pages), embedded and distributed (--partition-by url)",
        "synthetic": f"Synthetic nodes ({SYNTHETIC_NODES}, {args.pages:,} pages): the shared parts' cost a page",
        "cluster": "The same on a 3-master Redis Cluster",
    }
    for part, rows in tables.items():
        print_rows(titles[part], rows)
    if "synthetic" in tables and "cluster" in tables:
        one, three = tables["synthetic"][0], tables["cluster"][0]
        ratio = max(one.coordinator_cpu, one.busiest_redis_cpu) / one.pages
        ratio /= max(three.coordinator_cpu, three.busiest_redis_cpu) / three.pages
        print(f"\nCluster ceiling / one server's: {ratio:.2f}×")
    record = OUT / f"scale-results-{stamp}.json"
    record.write_text(json.dumps({part: [row.__dict__ for row in rows] for part, rows in tables.items()}, indent=1))
    print(f"\nfigures saved to {record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
