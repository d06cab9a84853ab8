"""`make demo`: serve a generated site on 127.0.0.1, crawl it with live progress, then open its dashboard.

The site runs in a thread of this process; the crawl runs as the real `webtrawl crawl --serve` command
(its dashboard is up while it crawls), then `webtrawl serve` keeps the dashboard open on the result until
Ctrl-C, so what the demo shows is exactly what a user gets. The crawl directory is `demo-out/` (run again
to resume: it will have nothing left to do, which is the point of resuming).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading

from .server import SiteServer

OUT = "demo-out"
PORT = "8770"


def _serve(ready: threading.Event, holder: list[SiteServer], stop: threading.Event) -> None:
    async def main() -> None:
        async with SiteServer(pages=300) as server:
            holder.append(server)
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.1)

    asyncio.run(main())


def main() -> int:
    ready, stop, holder = threading.Event(), threading.Event(), []
    thread = threading.Thread(target=_serve, args=(ready, holder, stop), daemon=True)
    thread.start()
    ready.wait(10)
    server = holder[0]
    print(f"demo site: {server.url} ({len(server.site.pages)} pages and an endless calendar trap)")
    command = [
        sys.executable,
        "-m",
        "webtrawl",
        "crawl",
        server.url,
        "--out",
        OUT,
        "--max-depth",
        str(server.site.deepest),
        "--per-host",
        "4",
        "--delay",
        "0.01",
        "--serve",
        "--port",
        PORT,
    ]
    print("$ webtrawl " + " ".join(command[3:]), flush=True)
    try:
        code = subprocess.call(command)
    except KeyboardInterrupt:
        code = 130
    print(
        f"\nthe crawl is in {OUT}/: try  .venv/bin/webtrawl status {OUT}  or  "
        f".venv/bin/webtrawl export {OUT} --format csv"
    )
    if code == 0:
        serve = [sys.executable, "-m", "webtrawl", "serve", OUT, "--port", PORT]
        print("$ webtrawl " + " ".join(serve[3:]), flush=True)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how the dashboard is meant to end
            subprocess.call(serve)
    stop.set()
    thread.join(5)
    return code


if __name__ == "__main__":
    sys.exit(main())
