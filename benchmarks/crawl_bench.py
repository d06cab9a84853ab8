"""Crawl a large local site with webtrawl and with Scrapy, and print how fast and how cheaply each did it.

    .venv/bin/python benchmarks/crawl_bench.py                  # 20,000 pages, both crawlers
    .venv/bin/python benchmarks/crawl_bench.py --pages 2000 --only webtrawl --profile

The site is generated once per (pages, seed) into benchmarks/out/site-<pages>-<seed> and served by a
private nginx on a free loopback port; each crawler runs as its own process with the same limits
(16 requests at once, 16 per host, no delay, robots.txt obeyed). See benchmarks/README.md for the columns.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from measure import (
    Result,
    Usage,
    fetched_paths,
    print_columns,
    print_stages,
    read_jsonl,
    run_measured,
    summarize,
    webtrawl_stages,
)
from nginx import Nginx, NginxError
from sitegen import generate

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
CONCURRENCY = 16


@dataclass(frozen=True)
class Run:
    """What every crawler run of one benchmark shares."""

    url: str
    run_dir: Path
    timeout: float
    profile_format: str | None
    """py-spy output format when profiling, else None."""
    stamp: str


def prepare_site(pages: int, seed: int) -> Path:
    """The generated site, reused when already there; built aside and renamed so a half site is never used."""
    site = OUT / f"site-{pages}-{seed}"
    if (site / "manifest.json").exists():
        print(f"site: {site} (cached)")
        return site
    partial = OUT / f".site-{pages}-{seed}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    started = time.perf_counter()
    generate(partial, pages, seed)
    partial.rename(site)
    print(f"site: {site} (generated in {time.perf_counter() - started:.1f} s)")
    return site


def warm_page_cache(site: Path) -> None:
    """Read every file once, so the first crawler does not pay for a cold disk cache."""
    for file in site.rglob("*"):
        if file.is_file():
            with file.open("rb") as data:
                while data.read(1 << 20):
                    pass


def find_py_spy() -> str | None:
    return shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))


def profiled(command: list[str], crawler: str, run: Run) -> tuple[list[str], str]:
    """`command` wrapped in `py-spy record` when profiling; the second item is a note for the table."""
    if run.profile_format is None:
        return command, ""
    py_spy = find_py_spy()
    if py_spy is None:
        print("py-spy is not installed (pip install -e '.[bench]'): running without a profile")
        return command, ""
    suffix = {"flamegraph": "svg", "speedscope": "json", "raw": "txt"}[run.profile_format]
    output = OUT / f"profile-{crawler}-{run.stamp}.{suffix}"
    print(f"profile of {crawler} → {output}")
    wrapper = [py_spy, "record", "--output", str(output), "--format", run.profile_format, "--"]
    return wrapper + command, "under py-spy"


def crawl_webtrawl(run: Run) -> tuple[Usage, set[str], str, dict[str, float]]:
    out = run.run_dir / "webtrawl"
    command = [sys.executable, "-m", "webtrawl", "crawl", run.url, "--out", str(out)]
    command += ["--concurrency", str(CONCURRENCY), "--per-host", str(CONCURRENCY), "--delay", "0", "--quiet"]
    command, note = profiled(command, "webtrawl", run)
    usage = run_measured(command, timeout=run.timeout)
    export = run.run_dir / "webtrawl-export.jsonl"
    with export.open("wb") as rows:
        export_command = [sys.executable, "-m", "webtrawl", "export", str(out), "--format", "jsonl"]
        exported = subprocess.run(export_command, stdout=rows, check=False)
    if exported.returncode != 0:
        note = f"{note}; export failed (exit {exported.returncode})".lstrip("; ")
    return usage, fetched_paths(read_jsonl(export)), note, webtrawl_stages(out)


def crawl_scrapy(run: Run) -> tuple[Usage, set[str], str, dict[str, float]]:
    feed = run.run_dir / "scrapy.jsonl"
    command, note = profiled(
        [sys.executable, str(HERE / "scrapy_spider.py"), run.url, "--feed", str(feed)], "scrapy", run
    )
    usage = run_measured(command, timeout=run.timeout)
    return usage, fetched_paths(read_jsonl(feed)), note, {}


CRAWLERS: dict[str, Callable[[Run], tuple[Usage, set[str], str, dict[str, float]]]] = {
    "webtrawl": crawl_webtrawl,
    "scrapy": crawl_scrapy,
}


def print_table(results: list[Result]) -> None:
    header = ("crawler", "pages", "seconds", "pages/s", "CPU ms/page", "peak RSS MB", "coverage")
    rows = [
        (
            r.crawler,
            f"{r.pages}",
            f"{r.seconds:.1f}",
            f"{r.pages_per_second:.0f}",
            f"{r.cpu_ms_per_page:.2f}",
            f"{r.peak_rss_mb:.0f}",
            "n/a" if r.coverage is None else f"{100 * r.coverage:.2f}%",
        )
        for r in results
    ]
    print_columns(header, rows)
    by_name = {r.crawler: r for r in results}
    ours, theirs = by_name.get("webtrawl"), by_name.get("scrapy")
    if ours and theirs and theirs.pages_per_second and ours.pages:
        print(
            f"\nwebtrawl/scrapy: {ours.pages_per_second / theirs.pages_per_second:.2f}× pages/s, "
            f"{theirs.cpu_ms_per_page / ours.cpu_ms_per_page:.2f}× less CPU per page"
        )
    for r in results:
        problems = [r.note] if r.note else []
        if r.exit_code != 0:
            problems.append(f"exited with {r.exit_code}")
        if r.disallowed_fetched:
            problems.append(f"fetched {r.disallowed_fetched} pages that robots.txt disallows")
        if problems:
            print(f"note: {r.crawler}: {'; '.join(problems)}")


def _record(result: Result) -> dict[str, object]:
    rates = {"pages_per_second": result.pages_per_second, "cpu_ms_per_page": result.cpu_ms_per_page}
    return {**asdict(result), **rates}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Benchmark webtrawl against Scrapy on a local nginx site.")
    parser.add_argument("--pages", type=int, default=20_000, help="pages in the generated site (20000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated site (1)")
    parser.add_argument("--only", choices=sorted(CRAWLERS), help="run one crawler only")
    parser.add_argument("--keep", action="store_true", help="keep crawl outputs in benchmarks/out/run-*")
    parser.add_argument("--profile", action="store_true", help="record each crawler with py-spy")
    parser.add_argument(
        "--profile-format",
        choices=("flamegraph", "speedscope", "raw"),
        default="flamegraph",
        help="py-spy output (raw: collapsed stacks, one line each, for grep and sums)",
    )
    parser.add_argument("--url", help="crawl this already-running server instead of starting nginx")
    parser.add_argument("--manifest", type=Path, help="with --url: the served site's manifest.json")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before a crawler is killed")
    args = parser.parse_args()
    if args.pages < 20:
        parser.error("--pages must be at least 20")
    return args


def main() -> int:
    args = parse_args()
    # A plain `kill` of the harness must still stop nginx and the crawler: turn it into an exception.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    crawlers = [args.only] if args.only else list(CRAWLERS)
    if "scrapy" in crawlers and importlib.util.find_spec("scrapy") is None:
        print("Scrapy is not installed (pip install -e '.[bench]'): running webtrawl alone")
        crawlers.remove("scrapy")
        if not crawlers:
            return 1
    stamp = time.strftime("%Y%m%d-%H%M%S")
    OUT.mkdir(exist_ok=True)
    run_dir = OUT / f"run-{stamp}"
    run_dir.mkdir()
    results = []
    try:
        with contextlib.ExitStack() as stack:
            manifest = None
            if args.url:
                url = args.url
                if args.manifest:
                    manifest = json.loads(args.manifest.read_text())
            else:
                site = prepare_site(args.pages, args.seed)
                manifest = json.loads((site / "manifest.json").read_text())
                warm_page_cache(site)
                url = stack.enter_context(Nginx(site, run_dir / "nginx")).url
                print(f"nginx: serving {site.name} at {url}")
            print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f} (busy CPUs slow pages/s)")
            run = Run(url, run_dir, args.timeout, args.profile_format if args.profile else None, stamp)
            for name in crawlers:
                print(f"running {name} …", flush=True)
                usage, paths, note, stages = CRAWLERS[name](run)
                results.append(summarize(name, usage, paths, manifest, note, stages))
    except NginxError as error:
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
    print_table(results)
    for result in results:
        print_stages(result)
    record = OUT / f"results-{stamp}.json"
    figures = {"pages": args.pages, "url": args.url, "results": [_record(r) for r in results]}
    record.write_text(json.dumps(figures, indent=1))
    print(f"\nfigures saved to {record}")
    return 0 if all(r.exit_code == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
