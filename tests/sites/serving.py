"""Serving a test site's aiohttp app on a loopback address."""

from __future__ import annotations

from aiohttp import web


async def serve(app: web.Application, host: str = "127.0.0.1") -> tuple[web.AppRunner, str]:
    """Start `app` on a free port of `host`: its runner (clean it up to stop) and its origin URL."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, host, 0).start()
    return runner, f"http://{host}:{runner.addresses[0][1]}"
