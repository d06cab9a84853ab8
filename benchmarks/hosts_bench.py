"""Memory and speed of a crawl that discovers many host names (default 100,000).

A local server answers every name under `many.test` (the crawl pins `*.many.test` to 127.0.0.1 with
`--resolve`): the seed host's list pages link to one page on each of N hosts. The crawl runs as a
subprocess with `--max-pages`, so it ends after fetching a part of them while the frontier and the
per-host state know every host; the harness prints its wall time, CPU, peak RSS and what it saw.

    .venv/bin/python benchmarks/hosts_bench.py [--hosts 100000] [--max-pages 3000]
"""

from __future__ import annotations

import argparse
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web

PER_LIST = 1000


def serve(port: int, hosts: int) -> None:
    lists = (hosts + PER_LIST - 1) // PER_LIST

    async def handle(request: web.Request) -> web.Response:
        name = request.host.partition(":")[0]
        if request.path == "/robots.txt":
            raise web.HTTPNotFound()
        if name == "seed.many.test" and request.path == "/":
            body = "".join(f'<a href="/list/{i}">list {i}</a>' for i in range(lists))
        elif name == "seed.many.test" and request.path.startswith("/list/"):
            first = int(request.path.rsplit("/", 1)[1]) * PER_LIST
            last = min(first + PER_LIST, hosts)
            body = "".join(f'<a href="http://h{i}.many.test:{port}/">h{i}</a>' for i in range(first, last))
        else:
            body = f"<p>{name}</p>"
        return web.Response(text=f"<html><title>{name}</title><body>{body}</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--max-pages", type=int, default=3000)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.hosts)
        return
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--hosts", str(args.hosts)])
    try:
        time.sleep(1.5)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "crawl"
            command = [
                sys.executable,
                "-m",
                "webtrawl",
                "crawl",
                f"http://seed.many.test:{port}/",
                "--out",
                str(out),
                "--scope",
                "any",
                "--resolve",
                "*.many.test:127.0.0.1",
                "--delay",
                "0",
                "--concurrency",
                "64",
                "--max-pages",
                str(args.max_pages),
                "-q",
            ]
            started = time.monotonic()
            child = subprocess.Popen(command)
            _pid, status, usage = os.wait4(child.pid, 0)
            elapsed = time.monotonic() - started
            conn = sqlite3.connect(out / "crawl.db")
            (hosts,) = conn.execute("SELECT COUNT(*) FROM hosts").fetchone()
            (done,) = conn.execute("SELECT COUNT(*) FROM urls WHERE state = 2").fetchone()
    finally:
        server.terminate()
        server.wait()
    print(
        f"exit {os.waitstatus_to_exitcode(status)}; hosts known {hosts:,}; pages done {done:,}; "
        f"{elapsed:.1f} s; CPU {usage.ru_utime + usage.ru_stime:.1f} s; peak RSS {usage.ru_maxrss / 1024:.0f} MB"
    )


if __name__ == "__main__":
    main()
