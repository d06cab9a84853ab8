"""Running the dashboard: uvicorn on a socket bound up front, alone (`webtrawl serve`) or beside a crawl.

The socket is bound before anything starts, so a port in use is a one-line error, not a traceback from
inside the server. Beside a crawl (`webtrawl crawl --serve`) the dashboard has a thread and an event loop
of its own: rendering a page never holds up the crawl's loop. Signals stay with the caller, who decides
what Ctrl-C means (stop the crawl gracefully, or quit the dashboard).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterator

import uvicorn

from ..errors import ConfigError
from .site import Site
from .token import check_token, redact_access_log

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8770
SHUTDOWN_WAIT = 2
"""Seconds a stopping server waits for responses in progress."""


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token, or with a short one: the dashboard can pause and
    stop the crawl."""
    check_token(token)
    if token or _loopback(host):
        return
    raise ConfigError(f"refusing to listen on {host} without a token: give --token or set WEBTRAWL_TOKEN")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the caller owns the signals


class Dashboard:
    """The dashboard of one crawl on `host:port` (port 0: any free port); `url` is where it answers."""

    def __init__(self, site: Site, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, log_requests: bool = False):
        from .app import create_app  # here, not above: the crawl command imports this module, rarely serves

        check_exposure(host, site.token)
        self.app = create_app(site)
        self._socket = _bind(host, port)
        self.host = host
        self.port: int = self._socket.getsockname()[1]
        self._token = site.token
        redact_access_log()
        config = uvicorn.Config(
            self.app,
            log_config=None,
            access_log=log_requests,
            lifespan="off",
            timeout_graceful_shutdown=SHUTDOWN_WAIT,
        )
        self._server = _Server(config)

    @property
    def url(self) -> str:
        """The address to open; with a token, it carries it once (the dashboard then keeps it in a cookie)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/" + (f"?token={self._token}" if self._token else "")

    async def serve(self) -> None:
        """Serve until `stop()`."""
        try:
            await self._server.serve(sockets=[self._socket])
        finally:
            self._socket.close()

    def stop(self) -> None:
        """End open event streams and stop the server (callable from any thread)."""
        from .live import live_view

        live_view(self.app).closing.set()
        self._server.should_exit = True

    @contextlib.contextmanager
    def beside(self) -> Iterator[Dashboard]:
        """Serve from a thread of its own while the block runs."""
        thread = threading.Thread(target=asyncio.run, args=(self.serve(),), name="webtrawl-dashboard", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stop()
            thread.join(SHUTDOWN_WAIT + 3)


def _bind(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen()  # from now on connections wait for the server instead of being refused
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock
