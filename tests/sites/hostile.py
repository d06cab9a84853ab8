"""A hostile web site: every misbehaviour a crawler meets in the wild, each at its own URL, next to normal pages.

All hosts are 127.0.0.1, each on its own port (crawl them with `--scope domain`). aiohttp serves what it can
produce; raw `asyncio` servers do what it cannot (garbage status lines, lying lengths, broken chunking,
resets, stalls), and plain sockets stand for hosts that accept nothing or never answer.

| host          | path(s)                                   | behaviour                                               |
|---------------|-------------------------------------------|---------------------------------------------------------|
| main          | / (index), /normal/0…14                   | the normal part of the site, which must be crawled      |
| main          | /no-head                                  | 405 to HEAD, 200 to GET                                 |
| main          | /charset/NAME                             | `CHARSETS`: legacy and lying charsets                   |
| main          | /malformed/NAME, /frames/…, /based/…      | `MALFORMED`: broken markup, `<base>`, nested frames     |
| main          | /redirect/loop-a ⇄ loop-b, /redirect/self | redirect loops                                          |
| main          | /redirect/chain/1 → … → 20 → chain-end    | a 20-hop chain                                          |
| main          | /redirect/away, garbage, long             | out of scope; unparseable; a 100 KB Location            |
| main          | /refresh/a ⇄ /refresh/b                   | a meta-refresh loop                                     |
| main          | /calendar/Y/M, /session/N?sid=…           | traps: an endless calendar, a new session id per link   |
| main          | /deeper/(a/b/)*, /query?p1…               | traps: ever-deeper relative links, growing queries      |
| main          | /rate/429, /rate/503-date                 | Retry-After in seconds / as an HTTP date, then 200      |
| main          | /rate/503-always, /rate/429-forever       | always 503; a Retry-After of months                     |
| main          | /storm/0…19                               | always 500                                              |
| main          | /weird, /weird/…                          | spaces, unicode, IDN, `%` junk, backslashes, userinfo   |
| main          | /big/page, /big/many-links, /big/link/N   | 50 MB of HTML; 100,000 links                            |
| main          | /bomb/gzip, /bomb/deflate, /bomb/br       | decompression bombs (when built: `build_bomb`)          |
| raw           | `RAW_SCRIPTS`                             | stalls, resets, lying lengths, bad chunks, garbage      |
| keepalive     | /ka/0…7                                   | keep-alive, then each connection dropped on its 2nd use |
| flaky         | /f/0…19                                   | goes down (refusing connections) mid-crawl, comes back  |
| robots-NAME   | /robots.txt                               | HTML, > 500 KiB, a redirect loop, a 500                 |
| mute          | anything                                  | accepts connections, never reads or answers             |
| unconnectable | anything                                  | accept queue full: connecting never completes           |

The four indexes: `/` (what one crawl can take in seconds), `/timeouts` (only a deadline ends those),
`/big` and `/bombs` (memory).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import NamedTuple, Self

from aiohttp import web

from . import hostile_pages as pages

FLAKY_DOWN_AFTER = 5
"""The flaky host goes down after answering this many page requests …"""
FLAKY_DOWN_FOR = 0.5
"""… for this many seconds: with the time to close, less than the shortest retry backoff (0.75 s), so one
retry brings every URL back."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Hit(NamedTuple):
    """One request as a hostile server saw it."""

    time: float
    origin: str
    method: str
    path: str
    """As sent on the request line (not decoded)."""
    headers: dict[str, str]


class HostileSite:
    """Every hostile host, started together; `async with HostileSite() as site:` or `serve_in_thread()`."""

    def __init__(self, *, bombs: Path | None = None) -> None:
        self.bombs = bombs
        """Directory with `bomb.gzip`, `bomb.deflate`, `bomb.br` (see `hostile_pages.build_bomb`)."""
        self.log: list[Hit] = []
        self.main = self.raw = self.keepalive = self.flaky = self.mute = self.unconnectable = ""
        self.robots: dict[str, str] = {}
        """robots.txt behaviour → origin of its host."""
        self._runners: list[web.AppRunner] = []
        self._servers: list[asyncio.Server] = []
        self._sockets: list[socket.socket] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._counts: Counter[str] = Counter()
        self._many_links: bytes | None = None
        self._flaky_runner: web.AppRunner | None = None
        self._flaky_port = 0
        self._flaky_pages = 0
        self._flaky_down = False

    # -- life cycle -------------------------------------------------------------------------------

    async def start(self) -> Self:
        self.main = await self._app(pages.main_routes(self))
        for name in pages.ROBOTS:
            self.robots[name] = await self._app(pages.robots_handler(self, name))
        self.flaky = await self._flaky_up()
        self.raw = await self._raw(self._play_raw)
        self.keepalive = await self._raw(self._play_keepalive)
        self.mute = await self._raw(self._play_mute)
        self.unconnectable = self._full_backlog()
        return self

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in self._servers:
            server.close()
        for runner in self._runners:
            await runner.cleanup()
        if self._flaky_runner is not None:
            await self._flaky_runner.cleanup()
        for sock in self._sockets:
            sock.close()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def hits(self, origin: str, path: str | None = None) -> list[Hit]:
        """Requests to `origin` (to `path` on it, when given), robots.txt included."""
        return [hit for hit in self.log if hit.origin == origin and (path is None or hit.path == path)]

    def record(self, origin: str, method: str, path: str, headers: dict[str, str]) -> None:
        self.log.append(Hit(time.monotonic(), origin, method, path, headers))

    def count(self, key: str) -> int:
        """How many times `key` was counted before, counting this time (for answers that change)."""
        self._counts[key] += 1
        return self._counts[key]

    async def _app(self, handler: Handler) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self._runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    # -- the flaky host ---------------------------------------------------------------------------

    async def _flaky_up(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._flaky_page)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self._flaky_port, reuse_address=True).start()
        self._flaky_port = runner.addresses[0][1]
        self._flaky_runner = runner
        return f"http://127.0.0.1:{self._flaky_port}"

    async def _flaky_page(self, request: web.Request) -> web.StreamResponse:
        self.record(self.flaky, request.method, request.raw_path, dict(request.headers))
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if self._flaky_down:  # a request on a connection opened before the outage: dropped unanswered
            assert request.transport is not None
            request.transport.abort()
            return web.Response()
        self._flaky_pages += 1
        if self._flaky_pages == FLAKY_DOWN_AFTER:
            self._flaky_down = True
            self._spawn(self._flaky_outage())
        if request.path == "/f/0":
            return web.Response(
                body=pages.page("Flaky 0", *(f"/f/{n}" for n in range(1, pages.FLAKY))), content_type="text/html"
            )
        return web.Response(body=pages.page(f"Flaky {request.path[3:]}"), content_type="text/html")

    async def _flaky_outage(self) -> None:
        """Stop listening and drop every connection, then come back on the same port."""
        await asyncio.sleep(0.01)  # let the answer that triggered the outage go out
        runner, self._flaky_runner = self._flaky_runner, None
        assert runner is not None
        await runner.cleanup()
        await asyncio.sleep(FLAKY_DOWN_FOR)
        await self._flaky_up()
        self._flaky_down = False

    # -- raw servers ------------------------------------------------------------------------------

    async def _raw(self, play: Callable[[asyncio.StreamReader, asyncio.StreamWriter, str], Awaitable[None]]) -> str:
        origin = ""

        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._tasks.add(task)
            try:
                await play(reader, writer, origin)
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                pass
            except asyncio.CancelledError:  # the site is closing: end quietly (asyncio logs a cancelled handler)
                pass
            finally:
                writer.close()
                self._tasks.discard(task)

        server = await asyncio.start_server(connected, "127.0.0.1", 0)
        self._servers.append(server)
        origin = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return origin

    async def _request(self, reader: asyncio.StreamReader, origin: str) -> str:
        """Read one request head, log it, and return its path."""
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        line, *fields = head.split("\r\n")
        method, path, _version = line.split(" ", 2)
        headers = dict(field.split(": ", 1) for field in fields if ": " in field)
        self.record(origin, method, path, headers)
        return path

    async def _play_raw(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, origin: str) -> None:
        path = await self._request(reader, origin)
        script = pages.RAW_SCRIPTS.get(path, [b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", pages.CLOSE])
        for step in script:
            if isinstance(step, bytes):
                writer.write(step)
                await writer.drain()
            elif isinstance(step, float):
                await asyncio.sleep(step)
            elif step == pages.HOLD:
                await _until_closed(reader)
                return
            elif step == pages.TRICKLE:
                while True:
                    writer.write(b"x")
                    await writer.drain()
                    await asyncio.sleep(0.5)
            elif step == pages.RESET:
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return
            elif step == pages.CLOSE:
                return

    async def _play_keepalive(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, origin: str) -> None:
        """Answer the first request of a connection as keep-alive; drop the connection on the second.

        Pages take 0.2 s, so the crawl opens a connection per page (up to --per-host) and finds them all
        waiting in its pool afterwards: /ka/late, linked from /ka/0, can only go out on a doomed one first.
        """
        path = await self._request(reader, origin)
        if path.startswith("/ka/"):
            await asyncio.sleep(0.2)
            status, body = b"200 OK", pages.page(f"Keep-alive {path}", *(["/ka/late"] if path == "/ka/0" else []))
        else:
            status, body = b"404 Not Found", b""
        writer.write(
            b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html\r\nConnection: keep-alive\r\n"
            b"Keep-Alive: timeout=60\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        await writer.drain()
        await self._request(reader, origin)  # the client trusted the connection: it dies now

    async def _play_mute(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, origin: str) -> None:
        """Accept, then neither read nor answer (the request waits unread in the socket buffer)."""
        self.record(origin, "?", "?", {})
        await asyncio.sleep(3600)

    def _full_backlog(self) -> str:
        """A listening socket whose accept queue is full: the kernel drops further SYNs, so connects hang."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        filler = socket.create_connection(listener.getsockname(), timeout=1)  # takes the one queue place
        self._sockets += [listener, filler]
        return f"http://127.0.0.1:{listener.getsockname()[1]}"

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- bodies that are worth building once --------------------------------------------------------

    def many_links(self) -> bytes:
        if self._many_links is None:
            anchors = b"".join(b'<a href="/big/link/%d">%d</a>\n' % (n, n) for n in range(pages.MANY_LINKS))
            self._many_links = b"<html><head><title>Many links</title></head><body>" + anchors + b"</body></html>"
        return self._many_links


async def _until_closed(reader: asyncio.StreamReader) -> None:
    while await reader.read(4096):
        pass


@contextlib.contextmanager
def serve_in_thread(**kwargs: object) -> Iterator[HostileSite]:
    """Run a `HostileSite` on its own event loop in a thread, for tests that block (a crawl subprocess)."""
    ready, stop = threading.Event(), threading.Event()
    holder: list[HostileSite] = []
    errors: list[BaseException] = []

    async def serve() -> None:
        try:
            async with HostileSite(**kwargs) as site:  # type: ignore[arg-type]
                holder.append(site)
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.05)
        except BaseException as exc:
            errors.append(exc)
            ready.set()
            raise

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True, name="hostile-site")
    thread.start()
    assert ready.wait(30), "hostile site did not start"
    if errors:
        raise errors[0]
    try:
        yield holder[0]
    finally:
        stop.set()
        thread.join(10)
