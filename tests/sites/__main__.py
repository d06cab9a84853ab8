"""Serve a test site until Ctrl-C: `python -m tests.sites --port 8765 [--pages N] [--seed S]`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from .server import SiteServer


async def serve(args: argparse.Namespace) -> None:
    server = SiteServer(
        pages=args.pages, seed=args.seed, calendar=not args.no_calendar, delay=args.delay, port=args.port
    )
    async with server:
        site = server.site
        reachable = sum(page.depth is not None for page in site.pages.values())
        print(server.url, flush=True)
        print(
            f"  seed {site.seed}: {len(site.pages)} pages, {reachable} reachable by a default crawl, "
            f"the deepest at depth {site.deepest}; Ctrl-C stops",
            flush=True,
        )
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.sites", description=__doc__)
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port (default 8765)")
    parser.add_argument("--pages", type=int, default=300, help="generated tree pages (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each response")
    parser.add_argument("--no-calendar", action="store_true", help="leave out the endless calendar")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
