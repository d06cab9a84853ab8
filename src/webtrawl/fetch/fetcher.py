"""The HTTP fetcher: one aiohttp session shared by every request of a crawl.

`Fetcher.fetch` turns one URL into one `FetchOutcome` and never raises for anything the URL or its
server does: every failure becomes an outcome with a short `error` and a `retryable` flag, so the crawl
loop handles a dead server the same way as a 404. Only cancellation propagates.

What it deliberately does not do, because other stages own it:
- follow redirects (a 3xx is an ordinary outcome; its target goes through scope and the frontier);
- decompress (the body is kept exactly as received, for the WARC record; parsing decodes a bounded copy);
- limit requests per host (politeness is decided when the frontier hands URLs out).

What it does for every request: names resolve through one cached `Resolver`, whose guard (and a check of
literal IP hosts here) keeps the crawl out of private networks; `--header` lines, `--auth` credentials
(for their host only: every redirect hop is a fetch of its own, so they never follow one elsewhere),
`--proxy` and `--cookies` apply.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import email.utils
import logging
import math
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from http.cookies import BaseCookie, Morsel
from types import SimpleNamespace, TracebackType
from typing import Any

import aiohttp
from aiohttp import ClientResponse
from aiohttp.http import HttpVersion10, HttpVersion11
from multidict import CIMultiDict
from yarl import URL

from ..config import FetchConfig
from ..models import FetchOutcome
from ..request_options import parse_auth, parse_header, parse_network, parse_pin
from .dns import AddressGuard, Resolver
from .failures import BlockedRequest, describe_error

logger = logging.getLogger(__name__)
requests_log = logging.getLogger("webtrawl.requests")

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
"""Media types whose body is read even when non-HTML bodies are not wanted."""

ACCEPT = "text/html,application/xhtml+xml,*/*;q=0.8"
ACCEPT_ENCODING = "gzip, deflate, br"
MAX_RETRY_AFTER = 86_400.0
"""A server asking to wait longer than a day is asked again after a day."""

# Big enough for the Set-Cookie and Content-Security-Policy lines real sites send (aiohttp's default
# of 8190 bytes fails some of them), small enough that headers cannot eat memory.
_MAX_HEADER_LINE = 32 * 1024

# aiohttp warns when asked to clean up closed TLS transports on a Python that no longer leaks them
# (fixed in 3.12.8 and 3.13.1); ask only where it is needed.
_NEEDS_CLEANUP_CLOSED = sys.version_info < (3, 12, 8) or (3, 13, 0) <= sys.version_info < (3, 13, 1)

_VERSIONS = {HttpVersion11: "1.1", HttpVersion10: "1.0"}
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
"""Methods a request may be sent again with when its connection failed under it (RFC 9110 §9.2.2)."""


class Fetcher:
    """Async context manager owning one aiohttp ClientSession + TCPConnector shared by all fetches.

    Connection pooling, keep-alive and the DNS cache only pay off when every request goes through the
    same session, so the crawl builds one `Fetcher` and passes it around.
    """

    def __init__(self, config: FetchConfig, *, concurrency: int, seeds: Iterable[str] = ()) -> None:
        """`seeds`: URLs whose hosts' current addresses the private-network guard lets through."""
        self._config = config
        self._concurrency = concurrency
        self._all_types = config.fetch_non_html
        # Built once: a ClientTimeout or header dict per request is avoidable churn on the hot path.
        self._timeout = aiohttp.ClientTimeout(
            total=config.total_timeout,
            sock_connect=config.connect_timeout,
            sock_read=config.read_timeout,
        )
        self._headers = _headers(config)
        self._auth = {
            key: {"Authorization": _basic(user, password)} for key, user, password in map(parse_auth, config.auth)
        }
        self._guard = AddressGuard(map(parse_network, config.allow_private)) if config.block_private else None
        # The proxy is trusted like the seeds: with one, the guard sees only the proxy's address.
        self._trusted = [_hostname(url) for url in (*seeds, *([config.proxy] if config.proxy else []))]
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None
        self._media: aiohttp.ClientSession | None = None
        self._resolver: Resolver | None = None

    async def __aenter__(self) -> Fetcher:
        config = self._config
        self._resolver = resolver = Resolver(ttl=config.dns_ttl, pins=map(parse_pin, config.resolve), guard=self._guard)
        await resolver.allow_hosts(self._trusted)
        # Without --cookies a crawl fetches each page as a first-time visitor: requests do not depend
        # on the order pages were fetched in, and no jar costs CPU on every request.
        jar = HostCookieJar(unsafe=True) if config.cookies else aiohttp.DummyCookieJar()
        reuse = aiohttp.TraceConfig()
        reuse.on_connection_reuseconn.append(_note_reuse)
        self._session = self._open_session(resolver, jar, limit=self._concurrency, trace=reuse)
        # Resends go out on connections of their own, never on another pooled one that may be as stale.
        self._fresh = self._open_session(resolver, jar, limit=max(1, self._concurrency // 4), force_close=True)
        return self

    def media_session(self) -> aiohttp.ClientSession:
        """The session media resolvers and downloads use (opened on first use, closed with the fetcher).

        Unlike page fetches it keeps cookies (a player page's cookie often unlocks its media API), has no
        total timeout (a large file takes as long as it takes; a stalled one hits the read timeout) and
        asks for the bytes as stored, so ranges count bytes of the file itself.
        """
        if self._resolver is None:
            raise RuntimeError("Fetcher.media_session called outside 'async with Fetcher(...)'")
        if self._media is None:
            config = self._config
            self._media = self._open_session(
                self._resolver,
                HostCookieJar(unsafe=True),
                limit=0,
                timeout=aiohttp.ClientTimeout(sock_connect=config.connect_timeout, sock_read=config.read_timeout),
                trace=self._hop_guard(),
            )
            self._media.headers.update({"Accept": "*/*", "Accept-Encoding": "identity"})
        return self._media

    def _hop_guard(self) -> aiohttp.TraceConfig | None:
        """Checks of the IP-literal hosts of a session that follows redirects (names meet the resolver's
        guard when they connect; literals never reach it): the first request's and every hop's."""
        guard = self._guard
        if guard is None:
            return None

        def check(url: URL) -> None:
            if reason := guard.check_host(url.raw_host or ""):
                raise BlockedRequest(reason)

        async def on_start(_s: object, _c: object, params: aiohttp.TraceRequestStartParams) -> None:
            check(params.url)

        async def on_redirect(_s: object, _c: object, params: aiohttp.TraceRequestRedirectParams) -> None:
            location = params.response.headers.get("Location")
            if location:
                try:
                    target = params.url.join(URL(location))
                except ValueError:
                    return  # aiohttp refuses it itself
                if guard.check_host(target.raw_host or ""):
                    params.response.close()
                    check(target)

        trace = aiohttp.TraceConfig()
        trace.on_request_start.append(on_start)
        trace.on_request_redirect.append(on_redirect)
        return trace

    def _open_session(
        self,
        resolver: Resolver,
        jar: aiohttp.abc.AbstractCookieJar,
        *,
        limit: int,
        trace: aiohttp.TraceConfig | None = None,
        force_close: bool = False,
        timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientSession:
        config = self._config
        connector = aiohttp.TCPConnector(
            limit=limit,
            limit_per_host=0,
            force_close=force_close,
            # The resolver caches, so that every new connection is judged by the guard.
            resolver=resolver,
            use_dns_cache=False,
            ssl=not config.insecure,
            enable_cleanup_closed=_NEEDS_CLEANUP_CLOSED,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            timeout=timeout or self._timeout,
            auto_decompress=False,
            cookie_jar=jar,
            proxy=config.proxy,
            max_line_size=_MAX_HEADER_LINE,
            max_field_size=_MAX_HEADER_LINE,
            trace_configs=[trace] if trace else None,
        )
        # aiohttp would resend a request the server dropped, even on a connection that was new (so a
        # server that always drops gets one request more than --retries allows) and on another pooled
        # connection (as stale as the first); `fetch` resends only after a reused connection, on a fresh one.
        session._retry_connection = False
        return session

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for session in (self._session, self._fresh, self._media):
            if session is not None:
                await session.close()
        self._session = self._fresh = self._media = None
        if self._resolver is not None:
            await self._resolver.close()
            self._resolver = None

    @property
    def cookie_jar(self) -> HostCookieJar | None:
        """The crawl's cookie jar (None without --cookies)."""
        jar = self._session.cookie_jar if self._session is not None else None
        return jar if isinstance(jar, HostCookieJar) else None

    def address_of(self, origin: str) -> str | None:
        """The address `origin`'s host is known to have now (from the DNS cache), or None."""
        if self._resolver is None:
            return None
        authority = origin.partition("//")[2]
        host = authority[: authority.index("]") + 1] if authority.startswith("[") else authority.partition(":")[0]
        return self._resolver.cached(host)

    async def fetch(
        self,
        url: str,
        *,
        any_type: bool = False,
        max_size: int | None = None,
        headers: Mapping[str, str] | None = None,
        method: str = "GET",
        body: bytes = b"",
        jar: bool = True,
    ) -> FetchOutcome:
        """Send one request for `url` (a GET unless a rendered page's script made another), without
        following redirects, and report what happened.

        The body is read only for HTML (or a missing Content-Type, which the parser must sniff) unless
        `any_type` or the config's `fetch_non_html` asks for every type; it is cut after `max_size`
        bytes (default: the config's). `headers` go with this request only (a re-fetch's validators, the
        headers a page's script set), over the crawl's own. `jar=False`: the crawl's cookie jar adds none of
        its cookies (a rendered page's request carries the browser's, or none where the browser sent none),
        and still keeps those the response sets. Never raises except `asyncio.CancelledError`.
        Each request is logged (`webtrawl.requests`, INFO: what `-v` shows).
        """
        outcome = await self._exchange(url, any_type, max_size, headers, method, body, jar)
        if requests_log.isEnabledFor(logging.INFO):
            got = outcome.error or f"{outcome.status} {outcome.content_type or '-'} {len(outcome.body):,} B"
            fields = {"url": url, "status": outcome.status, "error": outcome.error, "elapsed": outcome.elapsed}
            requests_log.info("%s %s -> %s in %.3f s", method, url, got, outcome.elapsed, extra=fields)
        return outcome

    async def _exchange(
        self,
        url: str,
        any_type: bool,
        max_size: int | None,
        headers: Mapping[str, str] | None,
        method: str,
        body: bytes,
        jar: bool,
    ) -> FetchOutcome:
        session = self._session
        if session is None:
            raise RuntimeError("Fetcher.fetch called outside 'async with Fetcher(...)'")
        loop = asyncio.get_running_loop()
        start = loop.time()
        outcome = FetchOutcome(url=url, started_at=time.time(), method=method, request_body=body)
        try:
            # Parsed once here, and sent exactly as normalized: yarl would otherwise re-encode the path
            # (`%7E` → `~`), so the server would see another URL than the one recorded.
            target = URL(url, encoded=True)
            guard = self._guard
            # An IP literal never reaches the resolver (which judges the addresses of names).
            if guard is not None and (blocked := guard.check_host(target.raw_host or "")):
                outcome.error = blocked
                return outcome
            auth = self._auth.get(target.host_port_subcomponent or "") if self._auth else None
            if headers:
                auth = {**(auth or {}), **headers}
            own_cookies = _OWN_COOKIES.set(not jar)  # read by `HostCookieJar` as aiohttp sends the request
            reused: list[bool] = []
            data = body or None
            try:
                resp = await session.request(
                    method, target, data=data, allow_redirects=False, headers=auth, trace_request_ctx=reused
                )
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                # A kept-alive connection the server closed as the request went out (RFC 9112 §9.3.1): it may
                # not have reached the server, so an idempotent request is sent again, once, on a new
                # connection (a POST is not: the server may have acted on it).
                if (
                    not reused
                    or isinstance(exc, aiohttp.ClientConnectorError)
                    or self._fresh is None
                    or method not in IDEMPOTENT
                ):
                    raise
                resp = await self._fresh.request(method, target, data=data, allow_redirects=False, headers=auth)
            finally:
                _OWN_COOKIES.reset(own_cookies)
        except Exception as exc:
            outcome.error, outcome.retryable = describe_error(exc)
            outcome.elapsed = loop.time() - start
            return outcome

        reusable = False
        try:
            outcome.ttfb = loop.time() - start
            _read_head(resp, outcome)
            if any_type or self._all_types or _is_html(resp):
                limit = self._config.max_size if max_size is None else max_size
                deadline = start + self._config.total_timeout
                reusable = await _read_body(resp, outcome, limit, deadline)
            elif resp.content_length != 0 and resp.status not in (204, 304):
                # Not a page: the headers are kept and the body is not downloaded.
                outcome.body_skipped = True
        except Exception as exc:  # not the server's doing: a bug here or an unforeseen library error
            logger.exception("unexpected error while reading %s", url)
            outcome.error, outcome.retryable = f"internal: {type(exc).__name__}: {exc}"[:200], False
        finally:
            # A connection goes back to the pool only after a complete body; one whose body was cut,
            # skipped or broken may still carry unread bytes, so it is closed.
            if reusable:
                resp.release()
            else:
                resp.close()
        outcome.elapsed = loop.time() - start
        return outcome


async def _note_reuse(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceConnectionReuseconnParams
) -> None:
    """Mark the request (its `trace_request_ctx` list) as sent on a pooled connection."""
    context.trace_request_ctx.append(True)


def _hostname(url: str) -> str:
    try:
        return URL(url).raw_host or ""
    except ValueError:
        return ""


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _headers(config: FetchConfig) -> CIMultiDict[str]:
    """The headers of every request: ours, with any the user names replaced by the user's."""
    headers = CIMultiDict({"User-Agent": config.user_agent, "Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING})
    extra = [parse_header(line) for line in config.headers]
    for name, _value in extra:
        headers.popall(name, None)
    for name, value in extra:
        headers.add(name, value)
    return headers


_NO_URL = URL()
_DOMAIN_ATTRIBUTE = re.compile(r";\s*domain\s*=[^;]*", re.IGNORECASE)


_OWN_COOKIES: contextvars.ContextVar[bool] = contextvars.ContextVar("own_cookies", default=False)
"""Set while a fetch whose cookies are its caller's (`Fetcher.fetch(jar=False)`) sends its request."""


class HostCookieJar(aiohttp.CookieJar):
    """A cookie jar that keeps every host's cookies to that host.

    The Domain attribute is dropped, so each cookie is host-only: without a list of public suffixes a
    jar cannot tell `Domain=example.com` (shared by one site's hosts) from `Domain=github.io` (shared by
    strangers), and a crawl visiting many sites must not carry one site's cookies to another.

    A request whose cookies are its caller's (a rendered page's, as the browser sent them, or none) gets none
    from the jar: aiohttp would put the jar's over the page's, and the page's are newer (a script just set
    one), or left out on purpose (a request the browser sends without credentials). The jar still keeps what
    the response sets, and takes the browser's after each rendered page (`take`).
    """

    def update_cookies_from_headers(self, headers: Sequence[str], response_url: URL) -> None:
        super().update_cookies_from_headers([_DOMAIN_ATTRIBUTE.sub("", line) for line in headers], response_url)

    def update_cookies(self, cookies: Any, response_url: URL = _NO_URL) -> None:
        items = cookies.items() if isinstance(cookies, BaseCookie | dict) else cookies
        kept = []
        for name, value in items:
            if isinstance(value, Morsel) and value["domain"]:
                value = value.copy()
                value["domain"] = ""
            kept.append((name, value))
        super().update_cookies(kept, response_url)

    def filter_cookies(self, request_url: URL = _NO_URL) -> BaseCookie[str]:
        if _OWN_COOKIES.get():
            return BaseCookie()
        return super().filter_cookies(request_url)

    def take(self, url: str, cookies: Iterable[Morsel[str]]) -> int:
        """Keep the cookies a browser holds for `url` that the jar lacks or holds with another value (one a
        page's script set), each as the browser has it (value, path, flags, expiry); a cookie the jar holds
        and the browser does not is left alone (the browser may have refused it). Returns how many were
        taken."""
        host = URL(url).raw_host or ""
        held = {(m["domain"], m["path"] or "/", m.key): m.coded_value for m in self if m["domain"] == host}
        taken = [m for m in cookies if held.get((host, m["path"] or "/", m.key)) != m.coded_value]
        if taken:
            self.update_cookies([(m.key, m) for m in taken], URL(url))
        return len(taken)


def _read_head(resp: ClientResponse, outcome: FetchOutcome) -> None:
    """Copy status line, headers and peer address from `resp` into `outcome`."""
    status = resp.status
    outcome.status = status
    outcome.reason = resp.reason or ""
    version = resp.version
    if version is not None:
        outcome.http_version = _VERSIONS.get(version) or f"{version.major}.{version.minor}"
    outcome.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]
    outcome.request_headers = list(resp.request_info.headers.items())
    # A body that arrived with the headers has already released its connection to the pool; the
    # response still knows the protocol (privately), whose transport is the open socket.
    connection = resp.connection
    protocol = connection.protocol if connection is not None else getattr(resp, "_protocol", None)
    transport = protocol.transport if protocol is not None else None
    if transport is not None:
        peer = transport.get_extra_info("peername")
        if peer:
            outcome.ip = peer[0]
    if status >= 500 or status == 429:
        outcome.retryable = True
        outcome.retry_after = parse_retry_after(resp.headers.get("Retry-After"), time.time())


def _is_html(resp: ClientResponse) -> bool:
    """Whether the body may be HTML: an HTML media type, or none at all (the parser sniffs it)."""
    value = resp.headers.get("Content-Type")
    if not value:
        return True
    return value.partition(";")[0].strip().lower() in HTML_TYPES


async def _read_body(resp: ClientResponse, outcome: FetchOutcome, limit: int, deadline: float) -> bool:
    """Read up to `limit` bytes into `outcome.body`; return whether the whole body arrived.

    The total timeout is enforced here as well as by aiohttp, so a server trickling a byte at a time
    (never tripping the read timeout) still cannot hold the request past its deadline. A body that
    arrived together with the headers (most small pages) is taken without arming that deadline.
    """
    content = resp.content
    chunks: list[bytes] = []
    size = 0
    try:
        if content.is_eof():
            chunk = content.read_nowait()
            chunks.append(chunk)
            size = len(chunk)
        else:
            async with asyncio.timeout_at(deadline):
                while chunk := await content.readany():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > limit:
                        break
    except (TimeoutError, aiohttp.ClientError) as exc:
        outcome.truncated = "time" if isinstance(exc, TimeoutError) else "disconnect"
        outcome.error, outcome.retryable = describe_error(exc)
    body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if size > limit:
        outcome.truncated = "length"
        body = body[:limit]
    outcome.body = body
    return outcome.truncated is None


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After value (delta seconds or an HTTP date), within [0, 1 day]."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - now  # a date without a zone is read as UTC, as HTTP dates are
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)
