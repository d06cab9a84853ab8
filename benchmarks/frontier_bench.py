"""How much memory a crawl needs as its frontier grows: a crawl that discovers about a million URLs.

    .venv/bin/python benchmarks/frontier_bench.py [--pages 4900] [--links 200]

The site is endless: every page under /p/ links to `--links` pages below it, so fetching `--pages` pages
(`--max-pages`) discovers about `pages × links` URLs, which wait in the frontier (crawl.db) when the crawl
stops. It is served from a thread of this harness (aiohttp: the crawl fetches only `--pages` of it, so its
speed does not matter). Printed: the crawl's time, CPU, peak memory (its own `VmHWM`), the URLs it knows,
and memory per discovered URL; a flat figure as the frontier grows is what a long crawl needs.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import string
import sys
import tempfile
import threading
from pathlib import Path

from aiohttp import web

from measure import print_columns, run_measured

LETTERS = string.ascii_lowercase


def name(index: int) -> str:
    """Letters, not digits: a path template collapses digit runs, and every page here must be its own."""
    return LETTERS[index // 26 % 26] + LETTERS[index % 26]


def serve(links: int, ready: threading.Event, stop: threading.Event, port: list[int]) -> None:
    async def page(request: web.Request) -> web.Response:
        base = request.path.rstrip("/")
        anchors = "".join(f'<a href="{base}/{name(i)}/">{name(i)}</a> ' for i in range(links))
        return web.Response(text=f"<!doctype html><title>{base}</title><p>{anchors}</p>", content_type="text/html")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/robots.txt", lambda _request: web.Response(text="User-agent: *\nAllow: /\n"))
        app.router.add_get("/{tail:.*}", page)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port.append(runner.addresses[0][1])
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.1)
        await runner.cleanup()

    asyncio.run(main())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=4900, help="pages fetched (--max-pages; default 4900)")
    parser.add_argument("--links", type=int, default=200, help="links on every page (default 200)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before the crawl is killed")
    args = parser.parse_args()
    ready, stop, port = threading.Event(), threading.Event(), []
    server = threading.Thread(target=serve, args=(args.links, ready, stop, port), daemon=True)
    server.start()
    if not ready.wait(30):
        print("error: the site did not start", file=sys.stderr)
        return 1
    try:
        with tempfile.TemporaryDirectory(prefix="frontier-bench-") as out:
            command = [sys.executable, "-m", "webtrawl", "crawl", f"http://127.0.0.1:{port[0]}/p/", "--out", out]
            command += ["--max-pages", str(args.pages), "--delay", "0", "--per-host", "16", "--concurrency", "16"]
            command += ["--max-urls-per-host", str(10 * args.pages * args.links), "--quiet"]
            print(f"crawling {args.pages:,} pages of {args.links} links each …", flush=True)
            usage = run_measured(command, timeout=args.timeout)
            conn = sqlite3.connect(Path(out) / "crawl.db")
            try:
                (known,) = conn.execute("SELECT COUNT(*) FROM urls").fetchone()
            finally:
                conn.close()
    finally:
        stop.set()
        server.join(10)
    print_columns(
        ("pages", "URLs known", "seconds", "CPU s", "peak RSS MB", "bytes per URL", "exit"),
        [
            (
                f"{args.pages:,}",
                f"{known:,}",
                f"{usage.seconds:.1f}",
                f"{usage.cpu_seconds:.1f}",
                f"{usage.peak_rss_mb:.0f}",
                f"{usage.peak_rss_mb * 1024 * 1024 / known:.0f}" if known else "-",
                str(usage.exit_code),
            )
        ],
    )
    return 0 if usage.exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
