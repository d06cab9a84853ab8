"""Re-crawl the benchmark site with nothing changed, and print what it costs next to the first crawl.

    .venv/bin/python benchmarks/recrawl_bench.py                # 20,000 pages, 3 re-crawls
    .venv/bin/python benchmarks/recrawl_bench.py --pages 2000 --runs 1

On the site and nginx of crawl_bench, with its limits (16 requests at once, 16 per host, no delay), it crawls
the site once with `--min-interval 1s`, so that every page is due again a second later, waits that second,
then runs `webtrawl crawl URL --out D --recrawl` `--runs` times, each on a fresh copy of the first crawl's
directory: every re-crawl starts from the same state, as the first re-crawl after a crawl does. nginx logs
every request (status, bytes sent and received, validators), so the figures of each run are what the server
saw: how many pages came back whole (200) or as 304, and the bytes on the wire. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from crawl_bench import CONCURRENCY, OUT, prepare_site, warm_page_cache
from measure import Usage, print_columns, run_measured
from nginx import ACCESS_FIELDS, Nginx, NginxError
from webtrawl.store.db import DB_NAME

MIN_INTERVAL = 1.0
"""Seconds after its fetch a page is due again: short, so the re-crawl can follow the first crawl at once."""
LIMITS = ["--concurrency", str(CONCURRENCY), "--per-host", str(CONCURRENCY), "--delay", "0", "--quiet"]
SCHEDULE = ["--min-interval", f"{MIN_INTERVAL:g}s"]
PAGE_COUNTS = ("page_count", "freelist_count", "page_size")
SHOWN = 5
"""URLs quoted in a note about pages that were not re-fetched as they should be."""


@dataclass(frozen=True)
class Traffic:
    """What nginx logged while one crawler ran."""

    statuses: Counter[int]
    sent: int
    """Bytes nginx sent: response headers and bodies ($bytes_sent)."""
    received: int
    """Bytes of the requests: request line and headers ($request_length)."""
    whole: frozenset[str]
    """Pages answered 200 (robots.txt left out)."""
    unconditional: frozenset[str]
    """Pages requested with neither If-None-Match nor If-Modified-Since (robots.txt and sitemaps left out)."""
    requested: frozenset[str]


class AccessLog:
    """nginx's access log, read one run at a time: each `take` returns what was logged since the last one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def take(self) -> Traffic:
        with self.path.open("rb") as log:
            log.seek(self.offset)
            data = log.read()
        data = data[: data.rfind(b"\n") + 1]  # a line nginx is still writing belongs to the next take
        self.offset += len(data)
        statuses: Counter[int] = Counter()
        sent = received = 0
        whole, unconditional, requested = set(), set(), set()
        for line in data.decode("latin-1").splitlines():
            row = dict(zip(ACCESS_FIELDS, line.split(" ", len(ACCESS_FIELDS) - 1), strict=True))
            status, uri = int(row["status"]), row["uri"]
            statuses[status] += 1
            sent += int(row["bytes_sent"])
            received += int(row["request_length"])
            requested.add(uri)
            if uri in ("/robots.txt", "/sitemap.xml"):
                continue
            if status == 200:
                whole.add(uri)
            if row["if_none_match"] == "-" and row["if_modified_since"] == "-":
                unconditional.add(uri)
        return Traffic(statuses, sent, received, frozenset(whole), frozenset(unconditional), frozenset(requested))


@dataclass(frozen=True)
class Row:
    """One line of the table: a crawl, as nginx and the kernel saw it, and what it added to its directory."""

    label: str
    requests: int
    ok: int
    """Answered 200."""
    not_modified: int
    """Answered 304."""
    other: int
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    sent: int
    received: int
    warc_added: int
    db_added: int
    """Growth of the crawl.db file (and its WAL)."""
    db_used_added: int
    """Growth of the database's pages in use."""

    @property
    def wire(self) -> int:
        return self.sent + self.received

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.cpu_seconds / self.requests if self.requests else float("nan")


def sizes(crawl: Path) -> tuple[int, int, int]:
    """Bytes of the crawl directory's WARC files; of its SQLite database file and WAL; and of the database's
    pages in use, as the file does not grow while SQLite has free pages to reuse."""
    warc = sum(file.stat().st_size for file in (crawl / "warc").rglob("*") if file.is_file())
    db, wal = crawl / DB_NAME, crawl / f"{DB_NAME}-wal"
    logged = wal.stat().st_size if wal.exists() else 0  # empty once a crawl has ended cleanly
    # immutable: read with no lock, so no -shm or -wal is left in a directory that is copied or crawled again
    with contextlib.closing(sqlite3.connect(f"file:{db}?immutable=1", uri=True)) as conn:
        pages, free, page = (conn.execute(f"PRAGMA {name}").fetchone()[0] for name in PAGE_COUNTS)
    return warc, db.stat().st_size + logged, (pages - free) * page + logged


def crawl(label: str, url: str, out: Path, log: AccessLog, timeout: float, *extra: str) -> tuple[Row, Traffic, Usage]:
    """Run one `webtrawl crawl` into `out` and measure it."""
    warc_before, db_before, used_before = sizes(out) if out.exists() else (0, 0, 0)
    command = [sys.executable, "-m", "webtrawl", "crawl", url, "--out", str(out), *LIMITS, *SCHEDULE, *extra]
    print(f"running {label} …", flush=True)
    usage = run_measured(command, timeout=timeout)
    traffic = log.take()
    warc_after, db_after, used_after = sizes(out)
    statuses = traffic.statuses
    row = Row(
        label=label,
        requests=statuses.total(),
        ok=statuses[200],
        not_modified=statuses[304],
        other=statuses.total() - statuses[200] - statuses[304],
        seconds=usage.seconds,
        cpu_seconds=usage.cpu_seconds,
        peak_rss_mb=usage.peak_rss_mb,
        sent=traffic.sent,
        received=traffic.received,
        warc_added=warc_after - warc_before,
        db_added=db_after - db_before,
        db_used_added=used_after - used_before,
    )
    return row, traffic, usage


def due_now(crawl_dir: Path) -> int | None:
    """How many URLs `webtrawl status` says a re-crawl would queue now; None if it does not say."""
    command = [sys.executable, "-m", "webtrawl", "status", str(crawl_dir)]
    shown = subprocess.run(command, capture_output=True, text=True, check=False).stdout
    found = re.search(r"revisits\s+([\d,]+) due now", shown)
    return int(found[1].replace(",", "")) if found else None


def median_row(label: str, rows: list[Row]) -> Row:
    """Each figure's median over `rows` (figure by figure, so the row need not be any one run)."""
    figures = {f.name: statistics.median(getattr(r, f.name) for r in rows) for f in fields(Row) if f.name != "label"}
    return Row(label=label, **figures)


def failure(usage: Usage) -> str | None:
    """How a crawler process ended badly, if it did."""
    if usage.exit_code == 0 and not usage.timed_out:
        return None
    return f"exited with {usage.exit_code}" + (" (timed out)" if usage.timed_out else "")


def check_recrawl(label: str, usage: Usage, traffic: Traffic, first: Traffic) -> list[str]:
    """What went wrong in a re-crawl of an unchanged site: every page the first crawl fetched should be
    asked for again, conditionally, and come back as a 304."""
    problems = [ended] if (ended := failure(usage)) else []
    checks = (
        ("pages answered 200, in full", traffic.whole),
        ("pages requested without If-None-Match or If-Modified-Since", traffic.unconditional),
        ("pages of the first crawl not requested again", first.whole - traffic.requested),
        ("URLs the first crawl did not request", traffic.requested - first.requested),
    )
    for what, urls in checks:
        if urls:
            problems.append(f"{len(urls)} {what}: {', '.join(sorted(urls)[:SHOWN])}{' …' * (len(urls) > SHOWN)}")
    odd = {status: n for status, n in traffic.statuses.items() if status not in (200, 304, 404)}
    if odd:
        problems.append(f"other statuses: {odd}")
    return [f"{label}: {problem}" for problem in problems]


def print_table(rows: list[Row]) -> None:
    header = (
        "crawl", "requests", "200", "304", "other", "seconds", "req/s", "CPU ms/req", "peak RSS MB",
        "MB sent", "MB recv", "WARC +MB", "db file +MB", "db used +MB",
    )  # fmt: skip
    cells = [
        (
            r.label,
            f"{r.requests:.0f}",
            f"{r.ok:.0f}",
            f"{r.not_modified:.0f}",
            f"{r.other:.0f}",
            f"{r.seconds:.1f}",
            f"{r.per_second:.0f}",
            f"{r.cpu_ms_per_request:.2f}",
            f"{r.peak_rss_mb:.0f}",
            f"{r.sent / 1e6:.2f}",
            f"{r.received / 1e6:.2f}",
            f"{r.warc_added / 1e6:.2f}",
            f"{r.db_added / 1e6:.2f}",
            f"{r.db_used_added / 1e6:.2f}",
        )
        for r in rows
    ]
    print_columns(header, cells)


def print_ratios(first: Row, again: Row) -> None:
    print(
        f"\nre-crawl/first: {again.wire / first.wire:.4f}× the bytes on the wire "
        f"({again.sent / first.sent:.4f}× sent, {again.received / first.received:.2f}× received), "
        f"{again.seconds / first.seconds:.2f}× the time, {again.cpu_seconds / first.cpu_seconds:.2f}× the CPU"
    )
    if again.requests:
        print(
            f"per re-fetched URL: {again.sent / again.requests:.0f} bytes sent, "
            f"{again.received / again.requests:.0f} received, {again.warc_added / again.requests:.0f} bytes of WARC, "
            f"{again.db_used_added / again.requests:.0f} bytes of crawl.db in use"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Re-crawl an unchanged local site and compare with the first crawl.")
    parser.add_argument("--pages", type=int, default=20_000, help="pages in the generated site (20000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated site (1)")
    parser.add_argument("--runs", type=int, default=3, help="re-crawls, each on a fresh copy of the first crawl (3)")
    parser.add_argument("--keep", action="store_true", help="keep the crawl directories in benchmarks/out/recrawl-*")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a crawler is killed (600)")
    args = parser.parse_args()
    if args.pages < 20:
        parser.error("--pages must be at least 20")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def main() -> int:
    args = parse_args()
    # A plain `kill` of the harness must still stop nginx and the crawler: turn it into an exception.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    OUT.mkdir(exist_ok=True)
    run_dir = OUT / f"recrawl-{stamp}"
    run_dir.mkdir()
    notes: list[str] = []
    loads = [os.getloadavg()[0]]
    try:
        with contextlib.ExitStack() as stack:
            site = prepare_site(args.pages, args.seed)
            manifest = json.loads((site / "manifest.json").read_text())
            warm_page_cache(site)
            nginx = stack.enter_context(Nginx(site, run_dir / "nginx", access_log=True))
            assert nginx.access_log is not None
            log = AccessLog(nginx.access_log)
            log.take()  # the harness's own check that nginx answers
            print(f"nginx: serving {site.name} at {nginx.url}, logging to {nginx.access_log}")
            print(f"machine: {os.cpu_count()} CPUs, load {loads[0]:.2f} (busy CPUs slow req/s)")
            first_dir = run_dir / "first"
            first, first_traffic, usage = crawl("first crawl", nginx.url, first_dir, log, args.timeout)
            if ended := failure(usage):
                notes.append(f"first crawl: {ended}")
            missing = set(manifest["pages"]) - first_traffic.whole
            if missing:
                notes.append(f"first crawl: {len(missing)} of the site's pages not fetched: {sorted(missing)[:SHOWN]}")
            time.sleep(MIN_INTERVAL + 0.5)  # until every page of the first crawl is due
            due = due_now(first_dir)
            print(f"due for a re-crawl: {due} URLs (webtrawl status)")
            again = []
            for run in range(1, args.runs + 1):
                copy = run_dir / f"recrawl-{run}"
                shutil.copytree(first_dir, copy)
                row, traffic, usage = crawl(f"re-crawl {run}", nginx.url, copy, log, args.timeout, "--recrawl")
                again.append(row)
                notes += check_recrawl(row.label, usage, traffic, first_traffic)
                if not args.keep:
                    shutil.rmtree(copy)
            loads.append(os.getloadavg()[0])
    except NginxError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: no figures", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"crawl directories kept in {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    middle = median_row(f"re-crawl, median of {len(again)}", again)
    print_table([first, *again, middle])
    print_ratios(first, middle)
    print(
        f"load average (1 min) on {os.cpu_count()} CPUs: {loads[0]:.2f} as the harness started, "
        f"{loads[-1]:.2f} at the end (this benchmark's own crawls and nginx included)"
    )
    for note in notes:
        print(f"note: {note}")
    record = OUT / f"recrawl-results-{stamp}.json"
    figures = {
        "pages": args.pages,
        "seed": args.seed,
        "min_interval": MIN_INTERVAL,
        "due": due,
        "load": loads,
        "first": asdict(first),
        "recrawls": [asdict(row) for row in again],
        "median": asdict(middle),
        "notes": notes,
    }
    record.write_text(json.dumps(figures, indent=1))
    print(f"\nfigures saved to {record}")
    return 1 if notes else 0


if __name__ == "__main__":
    sys.exit(main())
