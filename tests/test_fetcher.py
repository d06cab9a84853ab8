"""The fetcher against real servers on 127.0.0.1: a well-behaved aiohttp site and raw misbehaving ones."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import errno
import gzip
import json
import socket
import ssl
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.client_reqrep import ConnectionKey
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict
from trustme import CA

from webtrawl.config import FetchConfig
from webtrawl.fetch.failures import describe_error
from webtrawl.fetch.fetcher import ACCEPT, ACCEPT_ENCODING, Fetcher, parse_retry_after

# Small timeouts keep the hostile-server cases fast; each is well above what localhost needs.
CONFIG = FetchConfig(connect_timeout=0.3, read_timeout=0.3, total_timeout=0.6, block_private=False)
PAGE = b"<!doctype html><title>t</title>" + b"<p>hello world</p>\n" * 1000
GZIPPED = gzip.compress(PAGE, mtime=0)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10
BIG = b"<html>" + b"x" * 300_000


def _headers(*pairs: tuple[str, str]) -> CIMultiDict[str]:
    return CIMultiDict(pairs)


def _http_date(offset: float) -> str:
    return email.utils.formatdate(time.time() + offset, usegmt=True)


SEEN = web.AppKey("seen", list[tuple[dict[str, str], int]])
"""Request headers and client port of each request to /echo, in order."""


async def _echo(request: web.Request) -> web.Response:
    assert request.transport is not None
    request.app[SEEN].append((dict(request.headers), request.transport.get_extra_info("peername")[1]))
    return web.Response(body=BIG if "big" in request.query else PAGE, content_type="text/html")


async def _api(request: web.Request) -> web.Response:
    """What the request brought: its method, body and `X-Player-Key`."""
    body = (await request.read()).decode()
    return web.json_response({"method": request.method, "body": body, "key": request.headers.get("X-Player-Key")})


ROUTES: dict[str, Callable[[], web.Response]] = {
    "/page": lambda: web.Response(body=PAGE, content_type="text/html"),
    "/gzip": lambda: web.Response(body=GZIPPED, headers={"Content-Type": "text/html", "Content-Encoding": "gzip"}),
    "/moved": lambda: web.Response(status=301, headers={"Location": "/page"}, body=b"moved", content_type="text/html"),
    "/missing": lambda: web.Response(status=404, body=b"<p>no</p>", content_type="text/html"),
    "/busy": lambda: web.Response(status=503, headers={"Retry-After": "120"}),
    "/busy-date": lambda: web.Response(status=503, headers={"Retry-After": _http_date(60)}),
    "/busy-junk": lambda: web.Response(status=503, headers={"Retry-After": "soon"}),
    "/slow-down": lambda: web.Response(status=429, headers={"Retry-After": "9999999"}),
    "/error": lambda: web.Response(status=500),
    "/image": lambda: web.Response(body=PNG, content_type="image/png"),
    "/xhtml": lambda: web.Response(body=PAGE, headers={"Content-Type": "application/xhtml+xml; charset=utf-8"}),
    "/upper": lambda: web.Response(body=PAGE, headers={"Content-Type": " Text/HTML ; charset=UTF-8"}),
    "/big": lambda: web.Response(body=BIG, content_type="text/html"),
    "/dup": lambda: web.Response(body=b"", headers=_headers(("X-Dup", "a"), ("x-MiXeD", "Café"), ("X-Dup", "b"))),
    "/set-cookie": lambda: web.Response(
        body=b"", headers=_headers(("Set-Cookie", "sid=1; Path=/"), ("Set-Cookie", "wide=2; Domain=test; Path=/"))
    ),
}


def _handler(make: Callable[[], web.Response]) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(_request: web.Request) -> web.Response:
        return make()

    return handle


@pytest.fixture
async def site() -> AsyncIterator[TestServer]:
    app = web.Application()
    app[SEEN] = []
    for path, make in ROUTES.items():
        app.router.add_get(path, _handler(make))
    app.router.add_get("/echo", _echo)
    app.router.add_post("/api", _api)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield server
    await server.close()


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(CONFIG, concurrency=4) as fetcher:
        yield fetcher


async def test_ok_page(site: TestServer, fetcher: Fetcher) -> None:
    before = time.time()
    out = await fetcher.fetch(str(site.make_url("/page")))
    assert (out.status, out.reason, out.http_version) == (200, "OK", "1.1")
    assert out.body == PAGE
    assert out.content_type == "text/html"
    assert out.header("content-length") == str(len(PAGE))
    assert (out.error, out.truncated, out.retryable, out.retry_after) == (None, None, False, None)
    assert out.ip == "127.0.0.1"
    assert before <= out.started_at <= time.time()
    assert out.ttfb is not None and 0 < out.ttfb <= out.elapsed


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/gzip", {"status": 200, "body": GZIPPED}),  # kept as sent: no transparent decompression
        ("/moved", {"status": 301, "body": b"moved"}),  # not followed
        ("/missing", {"status": 404, "body": b"<p>no</p>", "retryable": False}),
        ("/busy", {"status": 503, "retryable": True, "retry_after": 120.0}),
        ("/busy-junk", {"status": 503, "retryable": True, "retry_after": None}),
        ("/slow-down", {"status": 429, "retryable": True, "retry_after": 86_400.0}),
        ("/error", {"status": 500, "retryable": True, "retry_after": None}),
        ("/image", {"status": 200, "body": b""}),  # not HTML: headers only
        ("/xhtml", {"status": 200, "body": PAGE}),
        ("/upper", {"status": 200, "body": PAGE}),
    ],
)
async def test_responses(site: TestServer, fetcher: Fetcher, path: str, expected: dict[str, Any]) -> None:
    out = await fetcher.fetch(str(site.make_url(path)))
    assert {key: getattr(out, key) for key in expected} == expected
    assert out.error is None


async def test_redirect_keeps_location(site: TestServer, fetcher: Fetcher) -> None:
    out = await fetcher.fetch(str(site.make_url("/moved")))
    assert out.header("Location") == "/page"


async def test_retry_after_http_date(site: TestServer, fetcher: Fetcher) -> None:
    out = await fetcher.fetch(str(site.make_url("/busy-date")))
    assert out.retry_after is not None and 55 <= out.retry_after <= 61


@pytest.mark.parametrize("how", ["any_type", "config"])
async def test_non_html_body_read_when_asked(site: TestServer, how: str) -> None:
    config = FetchConfig(fetch_non_html=how == "config", block_private=False)
    async with Fetcher(config, concurrency=1) as fetcher:
        out = await fetcher.fetch(str(site.make_url("/image")), any_type=how == "any_type")
    assert out.body == PNG
    assert out.content_type == "image/png"


@pytest.mark.parametrize(
    ("limit", "truncated", "size"),
    [(100_000, "length", 100_000), (len(BIG), None, len(BIG)), (len(BIG) - 1, "length", len(BIG) - 1)],
)
async def test_size_cap(site: TestServer, fetcher: Fetcher, limit: int, truncated: str | None, size: int) -> None:
    out = await fetcher.fetch(str(site.make_url("/big")), max_size=limit)
    assert (out.truncated, len(out.body), out.error) == (truncated, size, None)
    assert out.body == BIG[:size]


async def test_size_cap_from_config(site: TestServer) -> None:
    async with Fetcher(FetchConfig(max_size=1000, block_private=False), concurrency=1) as fetcher:
        out = await fetcher.fetch(str(site.make_url("/big")))
    assert (out.truncated, out.body) == ("length", BIG[:1000])


async def test_headers_keep_case_order_and_duplicates(site: TestServer, fetcher: Fetcher) -> None:
    out = await fetcher.fetch(str(site.make_url("/dup")))
    names = [(k, v) for k, v in out.headers if k.lower() in ("x-dup", "x-mixed")]
    assert names == [("X-Dup", "a"), ("x-MiXeD", "Café".encode().decode("latin-1")), ("X-Dup", "b")]


async def test_request_headers_recorded_as_sent(site: TestServer, fetcher: Fetcher) -> None:
    out = await fetcher.fetch(str(site.make_url("/echo")))
    sent = dict(out.request_headers)
    assert sent["Host"] == f"127.0.0.1:{site.port}"
    assert sent["User-Agent"] == CONFIG.user_agent
    assert (sent["Accept"], sent["Accept-Encoding"]) == (ACCEPT, ACCEPT_ENCODING)
    received, _port = site.app[SEEN][0]
    assert {k: received[k] for k in sent} == sent


async def test_connection_reused_after_full_body_not_after_cut(site: TestServer, fetcher: Fetcher) -> None:
    echo = str(site.make_url("/echo"))
    await fetcher.fetch(echo)
    await fetcher.fetch(echo)
    cut = await fetcher.fetch(echo + "?big", max_size=10)  # its connection still holds unread bytes
    await fetcher.fetch(echo)
    ports = [port for _headers, port in site.app[SEEN]]
    assert cut.truncated == "length"
    assert ports[0] == ports[1] == ports[2] != ports[3]


async def test_many_concurrent_fetches(site: TestServer, fetcher: Fetcher) -> None:
    outs = await asyncio.gather(*(fetcher.fetch(str(site.make_url("/page"))) for _ in range(50)))
    assert all(out.status == 200 and out.body == PAGE for out in outs)


# --- misbehaving servers -------------------------------------------------------------------------------

READ = "read"  # wait for the request head
RESET = "reset"  # close with an RST
CLOSE = "close"  # close with a FIN
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n"
Step = bytes | float | str
RawServer = Callable[..., Awaitable[str]]


@pytest.fixture
async def raw_server() -> AsyncIterator[RawServer]:
    """Start servers that play a script: bytes are sent, floats are pauses, strings are actions."""
    servers: list[asyncio.Server] = []
    tasks: set[asyncio.Task[None]] = set()

    async def start(*steps: Step) -> str:
        async def play(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            try:
                for step in steps:
                    if isinstance(step, bytes):
                        writer.write(step)
                        await writer.drain()
                    elif isinstance(step, float):
                        await asyncio.sleep(step)
                    elif step == READ:
                        await reader.readuntil(b"\r\n\r\n")
                    elif step == RESET:
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        writer.transport.abort()
                        return
                    elif step == CLOSE:
                        break
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(play, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"

    yield start
    for server in servers:
        server.close()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for server in servers:
        await server.wait_closed()


TRICKLE = [step for _ in range(30) for step in (b"0123456789", 0.05)]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        pytest.param(
            [READ, 5.0],
            {"status": None, "error": "read timeout", "retryable": True, "body": b""},
            id="stall-before-headers",
        ),
        pytest.param(
            [READ, HEAD, b"x" * 100, 5.0],
            {"status": 200, "error": "read timeout", "truncated": "time", "body": b"x" * 100},
            id="stall-mid-body",
        ),
        pytest.param(
            [READ, HEAD, b"x" * 100, 0.05, RESET],
            {"status": 200, "error": "connection reset", "truncated": "disconnect", "body": b"x" * 100},
            id="reset-mid-body",
        ),
        pytest.param(
            [READ, HEAD, b"x" * 100, 0.05, CLOSE],
            {"status": 200, "error": "connection closed mid-body", "truncated": "disconnect"},
            id="closed-mid-body",
        ),
        pytest.param(
            [READ, CLOSE],
            {"status": None, "error": "server disconnected", "retryable": True},
            id="closed-without-answer",
        ),
        pytest.param(
            [READ, b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<p>until the end</p>", CLOSE],
            {"status": 200, "http_version": "1.0", "body": b"<p>until the end</p>", "error": None},
            id="http10-no-length",
        ),
        pytest.param(
            [READ, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"],
            {"status": 200, "body": b"hello", "headers": [("Content-Length", "5")], "error": None},
            id="no-content-type-is-read",
        ),
        pytest.param(
            [READ, b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(200)) + b"\r\n"],
            {"status": None, "error": "too many headers", "retryable": False},
            id="too-many-headers",
        ),
        pytest.param(
            [READ, b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n"],
            {"status": None, "error": "header line too long", "retryable": False},
            id="header-too-long",
        ),
        pytest.param(
            [READ, b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\nhello"],
            {"status": None, "retryable": False},
            id="bad-content-length",
        ),
    ],
)
async def test_misbehaving_servers(
    raw_server: RawServer, fetcher: Fetcher, steps: list[Step], expected: dict[str, Any]
) -> None:
    url = await raw_server(*steps)
    out = await fetcher.fetch(url)
    assert {key: getattr(out, key) for key in expected} == expected


async def test_garbage_status_line(raw_server: RawServer, fetcher: Fetcher) -> None:
    out = await fetcher.fetch(await raw_server(READ, b"HELLO WORLD\r\n\r\n"))
    assert out.status is None
    assert out.error is not None and out.error.startswith("bad response: ")
    assert not out.retryable


async def test_slow_body_hits_total_timeout_with_partial_body(raw_server: RawServer, fetcher: Fetcher) -> None:
    out = await fetcher.fetch(await raw_server(READ, HEAD, *TRICKLE))
    assert (out.status, out.error, out.truncated, out.retryable) == (200, "total timeout", "time", True)
    assert 0 < len(out.body) < 300
    assert out.body == b"0123456789" * (len(out.body) // 10)
    assert out.elapsed >= CONFIG.total_timeout - 0.05  # a deadline never fires early


async def test_connection_refused(fetcher: Fetcher) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = await fetcher.fetch(f"http://127.0.0.1:{port}/")
    assert (out.status, out.error, out.retryable) == (None, "connection refused", True)


async def test_tls_to_a_plain_http_port(raw_server: RawServer, fetcher: Fetcher) -> None:
    url = await raw_server(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", 0.5)
    out = await fetcher.fetch(url.replace("http://", "https://"))
    assert out.error is not None and out.error.startswith("tls: ")
    assert (out.status, out.retryable) == (None, False)


@pytest.mark.parametrize("url", ["ftp://example.org/", "not a url", "http://[::1/", "http://"])
async def test_invalid_urls(fetcher: Fetcher, url: str) -> None:
    out = await fetcher.fetch(url)
    assert out.error is not None and out.error.startswith("invalid url: ")
    assert (out.status, out.retryable) == (None, False)


async def test_cancellation_propagates(raw_server: RawServer, fetcher: Fetcher, site: TestServer) -> None:
    task = asyncio.create_task(fetcher.fetch(await raw_server(READ, 5.0)))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    out = await fetcher.fetch(str(site.make_url("/page")))
    assert out.status == 200


async def test_fetch_outside_context_is_a_programming_error() -> None:
    with pytest.raises(RuntimeError, match="async with"):
        await Fetcher(CONFIG, concurrency=1).fetch("http://127.0.0.1/")


# --- pure helpers --------------------------------------------------------------------------------------

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("1.5", 1.5),
        ("-5", 0.0),
        ("1e12", 86_400.0),
        ("inf", 86_400.0),
        ("nan", None),
        ("soon", None),
        ("", None),
        (None, None),
        (email.utils.formatdate(NOW + 90, usegmt=True), 90.0),
        (email.utils.formatdate(NOW - 90, usegmt=True), 0.0),
        (email.utils.formatdate(NOW + 10 * 86_400, usegmt=True), 86_400.0),
        ("Tue, 14 Nov 2023 22:13:20", 0.0),  # no zone: read as GMT, and that is NOW + 0
        ("Tuesday, 32 Nov 2023 25:00:00 GMT", None),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW) == seconds


def _dns(code: int, message: str) -> aiohttp.ClientConnectorDNSError:
    return aiohttp.ClientConnectorDNSError(_KEY, socket.gaierror(code, message))


def _connect(code: int, message: str) -> aiohttp.ClientConnectorError:
    return aiohttp.ClientConnectorError(_KEY, OSError(code, message))


_KEY: Any = ConnectionKey("example.org", 80, False, True, None, None, None)


@pytest.mark.parametrize(
    ("exc", "reason", "retryable"),
    [
        (_dns(socket.EAI_NONAME, "Unknown host"), "dns: name not found", False),
        (_dns(socket.EAI_AGAIN, "Try again"), "dns: temporary failure", True),
        (aiohttp.ConnectionTimeoutError("slow"), "connect timeout", True),
        (aiohttp.SocketTimeoutError("slow"), "read timeout", True),
        (TimeoutError(), "total timeout", True),
        (_connect(errno.ECONNREFUSED, "Refused"), "connection refused", True),
        (_connect(errno.EHOSTUNREACH, "No route"), "host unreachable", True),
        (_connect(errno.EIO, "I/O error"), f"connect: [Errno {errno.EIO}] I/O error", True),
        (aiohttp.ServerDisconnectedError(), "server disconnected", True),
        (RuntimeError("boom\nbang"), "RuntimeError: boom bang", False),
    ],
)
def test_describe_error(exc: BaseException, reason: str, retryable: bool) -> None:
    assert describe_error(exc) == (reason, retryable)


# --- TLS, headers, auth, cookies, proxy ----------------------------------------------------------------


@pytest.fixture
async def tls_site() -> AsyncIterator[str]:
    """An HTTPS server on 127.0.0.1 whose certificate (for a.test) no one trusts; yields its port."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    CA().issue_cert("a.test").configure_cert(context)
    app = web.Application()
    app.router.add_get("/", _handler(ROUTES["/page"]))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    yield f"https://a.test:{runner.addresses[0][1]}/"
    await runner.cleanup()


@pytest.mark.parametrize("insecure", [False, True])
async def test_tls_certificate_checked_unless_insecure(tls_site: str, insecure: bool) -> None:
    config = FetchConfig(connect_timeout=1, resolve=("a.test:127.0.0.1",), insecure=insecure)
    async with Fetcher(config, concurrency=1) as fetcher:
        out = await fetcher.fetch(tls_site)
    if insecure:
        assert (out.status, out.body, out.error) == (200, PAGE, None)
    else:
        assert out.status is None and not out.retryable
        assert out.error is not None and out.error.startswith("tls: certificate verify failed: "), out.error
        assert "issuer" in out.error  # the reason OpenSSL gives, without its "[SSL: …] (_ssl.c)" wrapping


async def test_headers_sent_and_replacing_defaults(site: TestServer) -> None:
    headers = ("X-Token: abc", "user-agent: custom/1.0", "X-Two: 1", "X-Two: 2")
    async with Fetcher(FetchConfig(headers=headers, block_private=False), concurrency=1) as fetcher:
        out = await fetcher.fetch(str(site.make_url("/echo")))
    received, _port = site.app[SEEN][0]
    assert received["X-Token"] == "abc"
    assert received["User-Agent"] == "custom/1.0"
    assert received["Accept"] == ACCEPT
    sent = [(k.lower(), v) for k, v in out.request_headers]
    assert ("x-two", "1") in sent and ("x-two", "2") in sent
    assert [v for k, v in sent if k == "user-agent"] == ["custom/1.0"]


def _names(site: TestServer) -> tuple[str, ...]:
    return ("a.test:127.0.0.1", "b.test:127.0.0.1")


async def test_auth_goes_to_its_host_only(site: TestServer) -> None:
    port = site.port
    config = FetchConfig(resolve=_names(site), auth=(f"a.test:{port}:user:pa:ss", "b.test:user:nope"))
    async with Fetcher(config, concurrency=1) as fetcher:
        for host in ("a.test", "b.test"):
            await fetcher.fetch(f"http://{host}:{port}/echo")
    (to_a, _), (to_b, _) = site.app[SEEN]
    assert to_a["Authorization"] == "Basic " + base64.b64encode(b"user:pa:ss").decode()
    assert "Authorization" not in to_b  # b.test's credentials are for port 80 only


@pytest.mark.parametrize("cookies", [False, True])
async def test_cookies_kept_per_host_when_asked(site: TestServer, cookies: bool) -> None:
    port = site.port
    async with Fetcher(FetchConfig(resolve=_names(site), cookies=cookies), concurrency=1) as fetcher:
        await fetcher.fetch(f"http://a.test:{port}/set-cookie")
        await fetcher.fetch(f"http://a.test:{port}/echo")
        await fetcher.fetch(f"http://b.test:{port}/echo")
    (to_a, _), (to_b, _) = site.app[SEEN]
    assert to_a.get("Cookie") == ("sid=1; wide=2" if cookies else None)
    assert "Cookie" not in to_b  # not even the cookie a.test set for all of "test"


@pytest.fixture
async def proxy(site: TestServer) -> AsyncIterator[tuple[str, list[str]]]:
    """A forward proxy on 127.0.0.1 sending every request to `site`; yields its URL and the targets asked."""
    targets: list[str] = []

    async def forward(request: web.Request) -> web.Response:
        targets.append(request.raw_path)
        async with (
            aiohttp.ClientSession() as session,
            session.get(site.make_url(request.rel_url.path_qs), headers={"Host": request.headers["Host"]}) as resp,
        ):
            return web.Response(status=resp.status, body=await resp.read(), content_type=resp.content_type)

    app = web.Application()
    app.router.add_get("/{tail:.*}", forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", targets
    await runner.cleanup()


async def test_proxy_gets_every_request(site: TestServer, proxy: tuple[str, list[str]]) -> None:
    proxy_url, targets = proxy
    # The guard is on: the proxy's own address passes; names are the proxy's to resolve.
    async with Fetcher(FetchConfig(proxy=proxy_url), concurrency=1) as fetcher:
        out = await fetcher.fetch(f"http://origin.invalid:{site.port}/echo")
        blocked = await fetcher.fetch(f"http://127.0.0.2:{site.port}/echo")
    assert (out.status, out.body) == (200, PAGE)
    assert targets == [f"http://origin.invalid:{site.port}/echo"]
    assert site.app[SEEN][0][0]["Host"] == f"origin.invalid:{site.port}"
    assert blocked.error == "blocked: private address 127.0.0.2"  # a literal address is still judged here


@pytest.mark.parametrize(("method", "sent_again"), [("GET", True), ("PUT", True), ("POST", False)])
async def test_only_a_request_safe_to_repeat_is_sent_again_when_its_kept_alive_connection_drops(
    raw_server: RawServer, fetcher: Fetcher, method: str, sent_again: bool
) -> None:
    """The server answers once on each connection, then closes it when the next request arrives on it: the
    request may have reached it, so a POST (it may have acted on it) is not sent a second time."""
    url = await raw_server(READ, HEAD + b"x" * 1000, READ, CLOSE)
    first = await fetcher.fetch(url)
    assert first.status == 200
    again = await fetcher.fetch(url, method=method, body=b"the page's body")
    assert (again.status, again.error) == ((200, None) if sent_again else (None, "server disconnected"))
    assert (again.method, again.request_body) == (method, b"the page's body")


async def test_a_request_goes_with_the_method_body_and_headers_given(site: TestServer, fetcher: Fetcher) -> None:
    outcome = await fetcher.fetch(
        str(site.make_url("/api")),
        method="POST",
        body=b'{"id": 8}',
        headers={"Content-Type": "application/json", "X-Player-Key": "k7"},
        any_type=True,
    )
    assert outcome.status == 200
    assert json.loads(outcome.body) == {"method": "POST", "body": '{"id": 8}', "key": "k7"}  # as the server saw it
    sent = dict(outcome.request_headers)
    assert (sent["Content-Type"], sent["Content-Length"]) == ("application/json", "9")
