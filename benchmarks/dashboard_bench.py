"""Time to first byte of the dashboard's browsing views over an index of 100,000 captures.

Builds a crawl directory whose store holds N synthetic captures (default 100,000) written through the
store's own functions (`store.crawls.open_crawl`, `store.index.capture_row` / `insert_captures`,
`index_captures` for search), with the frontier's rows (hosts, urls with depths, link edges) beside them, as
a crawl would leave them. It is cached in `benchmarks/out/dashboard-<N>/` (`--rebuild` makes it again).
Then it serves the directory with the dashboard (uvicorn on a loopback port, in a thread: the same
`Dashboard` that `webtrawl serve` runs) and requests each view `--repeat` times over one keep-alive
connection, after one warm-up request, printing the median and the slowest time to first byte (status
line received) and the median time to the last byte:

    .venv/bin/python benchmarks/dashboard_bench.py [--captures 100000] [--repeat 20] [--rebuild]

"deep" rows start from the keyset cursor of the page holding the capture halfway through the order,
found by walking `/api/pages` with `limit=500`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import shutil
import statistics
import time
from pathlib import Path
from urllib.parse import urlencode

from webtrawl.models import Capture, WarcLocation
from webtrawl.store.crawls import open_crawl
from webtrawl.store.db import DB_NAME, connect, transaction
from webtrawl.store.index import capture_row, index_captures, insert_captures
from webtrawl.urls import fingerprint
from webtrawl.web.serve import Dashboard
from webtrawl.web.site import Site

OUT = Path(__file__).parent / "out"
HOSTS = 20
BATCH = 1000
RARE_WORD = "quizzicalnumbat"
"""On exactly one capture's text."""
STATUSES = [200] * 90 + [404] * 4 + [301] * 3 + [500, 503] + [None]
TYPES = ["text/html"] * 95 + ["text/plain"] * 3 + ["application/xml"] * 2
PDF_EVERY = 1000
"""Every 1000th capture is a PDF: a rare content type for the filter rows."""


def build(directory: Path, n: int) -> None:
    """The synthetic crawl: N pages over HOSTS hosts, breadth-first depths, ~10 links each."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    rng = random.Random(8)
    words = vocabulary()
    weights = [1 / (rank + 1) for rank in range(len(words))]  # Zipf: a few words on most pages
    conn = connect(directory / DB_NAME)
    crawl_id, _ = open_crawl(conn, "default", {"bench": n})
    origins = [f"https://host{h:02d}.example" for h in range(HOSTS)]
    with transaction(conn):
        host_ids = [
            conn.execute("INSERT INTO hosts(crawl_id, host) VALUES (?, ?)", (crawl_id, origin)).lastrowid
            for origin in origins
        ]
    urls = [f"{origins[i % HOSTS]}/{rng.choice(words)}/{rng.choice(words)}-{i:06d}.html" for i in range(n)]
    fps = [fingerprint(url) for url in urls]
    started = time.time() - n * 0.01
    for first in range(0, n, BATCH):
        rows, url_rows, links = [], [], []
        for i in range(first, min(first + BATCH, n)):
            depth = min(6, max(0, (i.bit_length() - 1) // 3))
            status = STATUSES[i % len(STATUSES)]
            text = rng.choices(words, weights, k=rng.randint(80, 400))
            if i == n // 2:
                text.append(RARE_WORD)
            capture = Capture(
                fp=fps[i],
                url=urls[i],
                fetched_at=started + i * 0.01 + rng.random() * 0.005,
                status=status,
                content_type="application/pdf" if i % PDF_EVERY == 0 else TYPES[i % len(TYPES)],
                size=int(rng.lognormvariate(9.5, 1.2)),
                title=" ".join(rng.choices(words, weights, k=6)).title(),
                text=" ".join(text),
                request_headers=[("User-Agent", "webtrawl-bench"), ("Accept", "*/*")],
                response_headers=[("Content-Type", "text/html; charset=utf-8"), ("Server", "bench")],
                ttfb=0.02,
                elapsed=0.05,
                warc=None if status is None else WarcLocation(file="bench.warc.gz", offset=i * 4096, length=4000),
                error="connection refused" if status is None else None,
            )
            rows.append(capture_row(capture))
            failed = status not in (200, 301)
            reason = None if not failed else capture.error if status is None else f"HTTP {status}"
            url_rows.append(
                (
                    crawl_id,
                    fps[i],
                    urls[i],
                    host_ids[i % HOSTS],
                    depth,
                    "link",
                    3 if failed else 2,
                    reason,
                    i,
                    started + i * 0.01,
                )
            )
            links += [(crawl_id, fps[i], fps[rng.randrange(n)]) for _ in range(10)]
        with transaction(conn):
            conn.executemany(
                "INSERT INTO urls(crawl_id, fp, url, host_id, depth, kind, state, reason, added_seq, discovered_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?10)",
                url_rows,
            )
            conn.executemany("INSERT OR IGNORE INTO links(crawl_id, src_fp, dst_fp) VALUES (?, ?, ?)", links)
            insert_captures(conn, crawl_id, rows)
    while index_captures(conn):
        pass
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    (directory / "complete").write_text(str(n))


def measure(client: http.client.HTTPConnection, path: str, repeat: int) -> tuple[float, float, float, int]:
    """(median TTFB, slowest TTFB, median total) in ms and the body size, after one warm-up request."""
    firsts, totals, size = [], [], 0
    for attempt in range(repeat + 1):
        start = time.perf_counter()
        client.request("GET", path)
        response = client.getresponse()
        first = time.perf_counter()
        body = response.read()
        done = time.perf_counter()
        if response.status != 200:
            raise SystemExit(f"{path}: HTTP {response.status}: {body[:300]!r}")
        if attempt:
            firsts.append((first - start) * 1000)
            totals.append((done - start) * 1000)
        size = len(body)
    return statistics.median(firsts), max(firsts), statistics.median(totals), size


def halfway_cursor(client: http.client.HTTPConnection, query: dict[str, str], n: int) -> str:
    """The `after` cursor that starts the page holding capture N/2 of this order."""
    path, seen = "/api/pages?" + urlencode({**query, "limit": "500"}), 0
    while seen < n // 2:
        client.request("GET", path)
        page = json.loads(client.getresponse().read())
        seen += len(page["rows"])
        path = page["next_url"]
    return str(page["next"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--captures", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    n = args.captures
    directory = OUT / f"dashboard-{n}"
    if args.rebuild or not (directory / "complete").exists():
        started = time.perf_counter()
        print(f"building {n:,} captures in {directory} …", flush=True)
        build(directory, n)
        print(f"built in {time.perf_counter() - started:.0f} s", flush=True)
    size = (directory / DB_NAME).stat().st_size
    print(f"{directory / DB_NAME}: {size / 1e6:.0f} MB, {n:,} captures\n")

    dashboard = Dashboard(Site(directory), port=0)
    with dashboard.beside():
        client = http.client.HTTPConnection("127.0.0.1", dashboard.port, timeout=60)
        for _ in range(100):  # the server thread starts listening shortly after
            try:
                client.request("GET", "/api/overview")
                client.getresponse().read()
                break
            except ConnectionError:
                client.close()
                time.sleep(0.05)
        deep = {sort: halfway_cursor(client, {"sort": sort}, n) for sort in ("fetched", "url", "size")}
        deep_status = halfway_cursor(client, {"sort": "status", "dir": "desc"}, n)
        words = vocabulary()
        common, second, rarer = words[0], words[200], words[3000]
        views = [
            ("/pages", "/pages"),
            (f"/pages deep (row {n // 2:,})", f"/pages?after={deep['fetched']}"),
            ("/pages?sort=url deep", f"/pages?sort=url&after={deep['url']}"),
            ("/pages?sort=size deep", f"/pages?sort=size&after={deep['size']}"),
            ("/pages?sort=status&dir=desc deep", f"/pages?sort=status&dir=desc&after={deep_status}"),
            ("/pages?status=404", "/pages?status=404"),
            ("/pages?status=5xx&sort=size", "/pages?status=5xx&sort=size"),
            ("/pages?type=application/pdf (0.1%)", "/pages?type=application/pdf"),
            ("/pages?host=host07&depth=5", "/pages?host=host07.example&depth=5"),
            ("/pages?type=image/gif (matches none)", "/pages?type=image/gif"),
            ("/api/pages", "/api/pages"),
            ("/api/pages deep", f"/api/pages?after={deep['fetched']}"),
            ("/api/pages?limit=500", "/api/pages?limit=500"),
            (f"/search?q={RARE_WORD} (1 hit)", f"/search?q={RARE_WORD}"),
            (f"/search?q={common} (on {share(directory, common, n)})", f"/search?q={common}"),
            (f"/search?q={second} (on {share(directory, second, n)})", f"/search?q={second}"),
            (f"/search?q={rarer} (on {share(directory, rarer, n)})", f"/search?q={rarer}"),
            (f'/search?q="{common} {second}"', f"/search?q=%22{common}+{second}%22"),
            (f"/api/search?q={common}", f"/api/search?q={common}"),
            (f"/search?q={common}&status=404", f"/search?status=404&q={common}"),
            ("/", "/"),
            ("/api/overview", "/api/overview"),
            ("/page/<id>", f"/page/{n // 2}"),
        ]
        print(f"{'view':<40} | TTFB median ms | TTFB max ms | total median ms | KB")
        print(f"{'-' * 40}-+----------------+-------------+-----------------+-----")
        for label, path in views:
            median, worst, total, body = measure(client, path, args.repeat)
            print(f"{label:<40} | {median:14.1f} | {worst:11.1f} | {total:15.1f} | {body / 1000:4.0f}", flush=True)
        client.close()


def share(directory: Path, word: str, n: int) -> str:
    """The share of the captures that hold a word, as "12.3%"."""
    conn = connect(directory / DB_NAME, readonly=True)
    try:
        (found,) = conn.execute("SELECT COUNT(*) FROM captures_fts WHERE captures_fts MATCH ?", (word,)).fetchone()
    finally:
        conn.close()
    return f"{found / n:.1%}"


def vocabulary() -> list[str]:
    """8,000 made-up words, the most frequent first (the same every run, so the cached index matches)."""
    rng = random.Random(7)
    return ["".join(rng.choice("abcdefghijklmnoprstuvwy") for _ in range(rng.randint(3, 11))) for _ in range(8000)]


if __name__ == "__main__":
    main()
