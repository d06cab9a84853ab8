"""Why a request failed, in a few words a table column can hold, and whether asking again later may help.

Every failure of a fetch, a media download or a resolver's request is recorded with this reason, so the same
fault reads the same wherever it happened.
"""

from __future__ import annotations

import errno
import logging
import socket

import aiohttp

from .dns import ResolveError, gai_reason

logger = logging.getLogger(__name__)

_CONNECT_ERRNOS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.ENETUNREACH: "network unreachable",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ETIMEDOUT: "connect timeout",
}


class BlockedRequest(aiohttp.ClientError):
    """A request (or redirect hop) to an address the private-network guard refuses; the reason says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def describe_error(exc: BaseException) -> tuple[str, bool]:
    """A short reason for a failed request, and whether trying again later may succeed.

    Order matters: aiohttp's exception classes overlap (its timeouts are connection errors too).
    """
    if isinstance(exc, BlockedRequest):
        return exc.reason, False
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "connect timeout", True
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return "read timeout", True
    if isinstance(exc, TimeoutError):
        return "total timeout", True
    if isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, ResolveError):
        return exc.os_error.reason, exc.os_error.retryable  # the resolver's own words (dns:, blocked:)
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        gai = exc.os_error
        if isinstance(gai, socket.gaierror):
            return gai_reason(gai)
        return _short(f"dns: {gai.strerror or gai}"), True
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        cert = exc.certificate_error
        detail = getattr(cert, "verify_message", None) or getattr(cert, "reason", None) or cert
        return _short(f"tls: certificate verify failed: {detail}"), False
    if isinstance(exc, aiohttp.ClientSSLError):
        return _short(f"tls: {exc.os_error}"), False
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_error = exc.os_error
        return _CONNECT_ERRNOS.get(os_error.errno or 0) or _short(f"connect: {os_error}"), True
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "server disconnected", True
    if isinstance(exc, ConnectionResetError):
        return "connection reset", True
    if isinstance(exc, aiohttp.ClientPayloadError):
        # A body cut short; the socket error that cut it survives only in aiohttp's message.
        reset = "ConnectionResetError" in str(exc)
        return ("connection reset" if reset else "connection closed mid-body"), True
    if isinstance(exc, aiohttp.ClientResponseError):
        # aiohttp's HTTP parser rejected the status line or the headers.
        message = str(exc.message)
        if message.startswith("Too many headers"):
            return "too many headers", False
        if message.startswith("Got more than"):
            return "header line too long", False
        return _short(f"bad response: {message}"), False
    if isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError | ValueError):
        return _short(f"invalid url: {exc}"), False
    if isinstance(exc, OSError):
        return _short(f"connection error: {exc.strerror or exc}"), True
    if isinstance(exc, aiohttp.ClientError):
        return _short(f"{type(exc).__name__}: {exc}"), True
    logger.warning("unexpected fetch error", exc_info=exc)
    return _short(f"{type(exc).__name__}: {exc}"), False


def _short(reason: str) -> str:
    """A reason fit for a table column: one line, at most 200 characters."""
    return " ".join(reason.split())[:200]
