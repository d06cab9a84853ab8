"""Crawl a large local site with webtrawl, Scrapy, wget and wget2, and print how fast and how cheaply each did it.

    .venv/bin/python benchmarks/crawl_bench.py                  # 20,000 pages, every crawler
    .venv/bin/python benchmarks/crawl_bench.py --pages 2000 --only webtrawl --profile

The site is generated once per (pages, seed) into benchmarks/out/site-<pages>-<seed> and served by a
private nginx on a free loopback port; each crawler runs as its own process, with no delay and robots.txt
obeyed. webtrawl and Scrapy share the same limits (16 requests at once, 16 per host); wget and wget2 run
as they come (1 connection, and wget2's default 5 threads), as the floor of what fetching and following
links costs. See benchmarks/README.md for the columns.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeAlias

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
APT_PACKAGES = ("wget", "wget2")
"""The command-line crawlers, each a Debian package of its name, installed together when one is missing."""

WGET_SAVED = re.compile(r" URL:(?P<url>\S+) \[")
"""A `wget -nv` line for a saved response: `2026-12-03 08:14:46 URL:http://…/ [20796/20796] -> "…" [1]`.
wget writes one only for a 2xx response (an error gets a line of its own, a redirect only its target's
line), and this static site answers nothing else with a body, so it stands for a 200."""

WGET2_RESPONSE = re.compile(r"^HTTP response (?P<status>\d{3}) .*\[(?P<url>\S+)\]$")
"""The line wget2 (verbose, its default) writes for every response: `HTTP response 200 OK [http://…/]`.
Its `--no-verbose` writes nothing at all, and `--stats-site` is not in every wget2 release."""

Outcome: TypeAlias = tuple[Usage, set[str], str, dict[str, float]]
"""What a crawler run gives `summarize`: usage, paths fetched with a 200, a note, CPU by stage."""


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


def ensure_tools(tools: list[str]) -> list[str]:
    """Those of `tools` (of `APT_PACKAGES`) found on PATH, after one apt-get install of them all if one is missing.

    As `nginx.ensure_nginx` does for nginx, so that `make bench` runs on a fresh machine; `apt-get update`
    (slow, and it rewrites the package index) runs only when the install fails without it.
    """
    missing = [tool for tool in tools if not shutil.which(tool)]
    if missing and shutil.which("apt-get"):
        print(f"{' and '.join(missing)} not found: installing {' '.join(APT_PACKAGES)} with apt-get …", flush=True)
        for args in (["install", "-y", *APT_PACKAGES], ["update"], ["install", "-y", *APT_PACKAGES]):
            done = subprocess.run(["apt-get", "-q", *args], capture_output=True, check=False)
            if done.returncode == 0 and args[0] == "install":
                break
    return [tool for tool in tools if shutil.which(tool)]


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


def runnable(crawlers: list[str]) -> list[str]:
    """The crawlers that can run here; one printed line for each that cannot, so it costs its row, not the run."""
    missing = {}
    if "scrapy" in crawlers and importlib.util.find_spec("scrapy") is None:
        missing["scrapy"] = "Scrapy is not installed (pip install -e '.[bench]')"
    tools = [name for name in crawlers if name in APT_PACKAGES]
    for tool in set(tools) - set(ensure_tools(tools)):
        missing[tool] = f"{tool} is not installed and could not be installed with apt-get"
    for name, reason in missing.items():
        print(f"{reason}: skipping {name}")
    return [name for name in crawlers if name not in missing]


def crawl_webtrawl(run: Run) -> Outcome:
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


def crawl_scrapy(run: Run) -> Outcome:
    feed = run.run_dir / "scrapy.jsonl"
    command, note = profiled(
        [sys.executable, str(HERE / "scrapy_spider.py"), run.url, "--feed", str(feed)], "scrapy", run
    )
    usage = run_measured(command, timeout=run.timeout)
    return usage, fetched_paths(read_jsonl(feed)), note, {}


def log_rows(log: Path, line: re.Pattern[str]) -> list[dict[str, object]]:
    """The responses a crawler's log records, as the rows `fetched_paths` reads.

    One row per line that `line` matches: its `url`, and its `status`, or 200 when the line has none
    (see `WGET_SAVED`).
    """
    if not log.exists():
        return []
    with log.open(errors="replace") as lines:
        matches = [match for match in map(line.search, lines) if match]
    return [{"url": match["url"], "status": int(match.groupdict().get("status") or 200)} for match in matches]


def crawl_logged(run: Run, tool: str, options: list[str], line: re.Pattern[str]) -> Outcome:
    """Run a command-line crawler (wget or wget2) on the site and read the pages it fetched from its log.

    It writes under the run dir, which is removed afterwards, and `--delete-after` drops each file once its
    links are read anyway. Not under py-spy, which profiles Python only.
    """
    log = run.run_dir / f"{tool}.log"
    command = [tool, *options, f"--directory-prefix={run.run_dir / tool}", f"--output-file={log}", run.url]
    usage = run_measured(command, timeout=run.timeout)
    return usage, fetched_paths(log_rows(log, line)), "", {}


def crawl_wget(run: Run) -> Outcome:
    """GNU wget: one connection, no delay, no depth limit, the start URL's host only (its default)."""
    # No wgetrc, and robots.txt obeyed explicitly, so that a machine's settings cannot change the run.
    options = ["--no-config", "--execute=robots=on", "--recursive", "--level=inf", "--delete-after", "--no-verbose"]
    return crawl_logged(run, "wget", options, WGET_SAVED)


def crawl_wget2(run: Run) -> Outcome:
    """wget2 with its default 5 threads; otherwise as `crawl_wget` (`--level=0` is no limit for wget2)."""
    options = ["--no-config", "--robots", "--recursive", "--level=0", "--max-threads=5", "--delete-after"]
    # TLS caches wget2 would otherwise create in the home directory; this plain-HTTP crawl has no use for them.
    options += ["--no-hsts", "--no-hpkp", "--no-ocsp"]
    return crawl_logged(run, "wget2", options, WGET2_RESPONSE)


CRAWLERS: dict[str, Callable[[Run], Outcome]] = {
    "webtrawl": crawl_webtrawl,
    "scrapy": crawl_scrapy,
    "wget": crawl_wget,
    "wget2": crawl_wget2,
}

RATIOS = ("scrapy", "wget")
"""The crawlers webtrawl's figures are divided by, one line each, under the table."""


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
    ours = by_name.get("webtrawl")
    ratios = [line for name in RATIOS if ours and name in by_name and (line := ratio_line(ours, by_name[name]))]
    if ratios:
        print("\n" + "\n".join(ratios))
    for r in results:
        problems = [r.note] if r.note else []
        if r.exit_code != 0:
            problems.append(f"exited with {r.exit_code}")
        if r.disallowed_fetched:
            problems.append(f"fetched {r.disallowed_fetched} pages that robots.txt disallows")
        if problems:
            print(f"note: {r.crawler}: {'; '.join(problems)}")


def ratio_line(ours: Result, theirs: Result) -> str | None:
    """`webtrawl/NAME: …× pages/s, …× less (or more) CPU per page`, or None when a side fetched nothing."""
    if not (ours.pages and theirs.pages and theirs.pages_per_second):
        return None
    cpu = theirs.cpu_ms_per_page / ours.cpu_ms_per_page
    less = f"{cpu:.2f}× less" if cpu >= 1 else f"{1 / cpu:.2f}× more"
    speed = ours.pages_per_second / theirs.pages_per_second
    return f"webtrawl/{theirs.crawler}: {speed:.2f}× pages/s, {less} CPU per page"


def _record(result: Result) -> dict[str, object]:
    rates = {"pages_per_second": result.pages_per_second, "cpu_ms_per_page": result.cpu_ms_per_page}
    return {**asdict(result), **rates}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Benchmark webtrawl against Scrapy, wget and wget2 on a local site.")
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
    crawlers = runnable([args.only] if args.only else list(CRAWLERS))
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
            if "webtrawl" in crawlers and importlib.util.find_spec("webtrawl.parse._simhash") is None:
                print("webtrawl's SimHash is not compiled (libxxhash-dev was missing at install): ~0.3 ms/page more")
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
