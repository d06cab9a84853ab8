"""Serving a test `Site` over HTTP on 127.0.0.1, recording every request.

The server answers from `Site.route()` whatever the Host header says (so `localhost:PORT` reaches it too,
as another host key), and keeps what tests assert on: the request log, the most requests in flight at once
per Host header, and switches for a slow host (`delay`), a host without robots.txt (`robots`) and a host
that is down (`set_down`).
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import time
from collections import defaultdict
from typing import NamedTuple, Self

from aiohttp import web

from .routes import NOT_FOUND, Route
from .site import Site

_CHUNK = 512


class Request(NamedTuple):
    """One request as the server saw it."""

    time: float
    """`time.monotonic()` when it arrived."""
    path: str
    """As sent (not decoded), query included."""
    host: str
    """The Host header."""
    method: str
    status: int | None
    """None when no response was sent (the host was down, or the client went away)."""


class SiteServer:
    """An aiohttp server for a generated `Site`; `site` exists once started (it needs the port).

    `async with SiteServer(pages=50) as server:` starts it; `server.url` is "http://127.0.0.1:PORT/".
    """

    def __init__(
        self,
        *,
        pages: int = 300,
        seed: int = 0,
        calendar: bool = True,
        delay: float = 0.0,
        robots: bool = True,
        port: int = 0,
        address: str = "127.0.0.1",
    ) -> None:
        """`address`: where it listens (another loopback address, e.g. 127.0.0.2, is another host)."""
        self.delay = delay
        """Seconds every response waits before it is sent (the request counts as in flight meanwhile)."""
        self.robots = robots
        """When off, /robots.txt is 404: everything is allowed."""
        self.log: list[Request] = []
        self.max_in_flight: dict[str, int] = defaultdict(int)
        """Host header → most requests in flight at once."""
        self._address = address
        self._new_site = functools.partial(Site, pages=pages, seed=seed, calendar=calendar, address=address)
        self._port = port
        self._down = False
        self._in_flight: dict[str, int] = defaultdict(int)
        self._gzipped: dict[str, bytes] = {}
        self._runner: web.AppRunner | None = None
        self._gate = asyncio.Event()
        self._gate.set()
        self.site: Site

    @property
    def url(self) -> str:
        """The site's root URL, with a trailing slash."""
        return self.site.origin + "/"

    def hold(self) -> None:
        """Until `release`, requests for pages wait (robots.txt is answered): a test starts a crawl, and lets it
        go on once what it waits for has happened. Call both on the server's event loop."""
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    def set_down(self, down: bool) -> None:
        """While down, every request is answered by closing the connection."""
        self._down = down

    async def start(self) -> Self:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._address, self._port).start()
        port = self._runner.addresses[0][1]
        self.site = self._new_site(port=port)
        return self

    async def aclose(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        arrived = time.monotonic()
        host = request.headers.get("Host", "")
        in_flight = self._in_flight[host] = self._in_flight[host] + 1
        if in_flight > self.max_in_flight[host]:
            self.max_in_flight[host] = in_flight
        status = None
        try:
            if request.path != "/robots.txt":
                await self._gate.wait()
            if self.delay:
                await asyncio.sleep(self.delay)
            if self._down:
                assert request.transport is not None
                request.transport.close()
                return web.Response()  # never sent: the connection is closed
            route = self.site.route(request.path)
            if request.path == "/robots.txt" and not self.robots:
                route = Route(404, body=NOT_FOUND)
            response = await self._respond(request, route)
            status = route.status
            return response
        finally:
            self._in_flight[host] -= 1
            self.log.append(Request(arrived, request.raw_path, host, request.method, status))

    async def _respond(self, request: web.Request, route: Route) -> web.StreamResponse:
        headers = {"Content-Type": route.content_type}
        if route.redirect:
            headers["Location"] = route.redirect.href
        body = route.body
        if route.gzip:
            headers["Vary"] = "Accept-Encoding"
            if "gzip" in request.headers.get("Accept-Encoding", ""):
                headers["Content-Encoding"] = "gzip"
                body = self._gzip(request.path, body)
        if not route.chunked:
            return web.Response(status=route.status, body=body, headers=headers)
        response = web.StreamResponse(status=route.status, headers=headers)
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(body) if request.method != "HEAD" else 0, _CHUNK):
            await response.write(body[start : start + _CHUNK])
        await response.write_eof()
        return response

    def _gzip(self, path: str, body: bytes) -> bytes:
        """The gzip form of a body, made once (mtime 0, so the same bytes every run)."""
        packed = self._gzipped.get(path)
        if packed is None:
            packed = self._gzipped[path] = gzip.compress(body, mtime=0)
        return packed
