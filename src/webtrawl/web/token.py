"""The dashboard's token: required on every request once set, kept out of the address bar and the logs.

It comes as `?token=` once (the address `webtrawl serve` prints), then as a cookie, or as an `Authorization:
Bearer` header. A page opened with `?token=` is answered with the cookie and a 303 to the same address
without it, so the token leaves the address bar and the history; the archive's own addresses keep theirs
(`rewrite.archive_address`: a sandboxed copy's requests get no cookie). The access log shows `token=…`.
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode

from ..errors import ConfigError

if TYPE_CHECKING:  # the command line imports this module for `check_token`, and must start fast
    from fastapi import FastAPI, Request
    from fastapi.responses import Response

TOKEN_COOKIE = "webtrawl_token"
MIN_LENGTH = 16
"""Characters a token chosen by hand must have at least: it guards a server that can stop the crawl."""
CARRIED_BY_ADDRESS = ("/archive/url/", "/archive/not-archived")
"""Paths whose token stays in the address: what a sandboxed archived copy asks for, without the cookie."""
_IN_QUERY = re.compile(r"((?:^|[?&])token=)[^&\s\"]*")


def check_token(token: str | None) -> None:
    """Refuse a token too short to guard the dashboard."""
    if token is not None and len(token) < MIN_LENGTH:
        raise ConfigError(
            f"the dashboard token is {len(token)} characters long: give one of at least {MIN_LENGTH} "
            "(python -c 'import secrets; print(secrets.token_urlsafe())' makes one)"
        )


def require_token(app: FastAPI, token: str) -> None:
    """Every request carries the token; one that brings it in its address is sent on without it."""
    from fastapi.responses import JSONResponse, Response

    @app.middleware("http")
    async def check(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        in_address = request.query_params.get("token")
        given = (
            in_address
            or request.cookies.get(TOKEN_COOKIE)
            or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        )
        if not given or not hmac.compare_digest(given, token):
            return JSONResponse({"error": "a valid token is required"}, status_code=401)
        if in_address and request.method in ("GET", "HEAD") and not request.url.path.startswith(CARRIED_BY_ADDRESS):
            response: Response = Response(status_code=303, headers={"Location": _without_token(request)})
        else:
            response = await call_next(request)
        if in_address:
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        return response


def _without_token(request: Request) -> str:
    """The address asked for, as sent (its path still escaped), without its `token` parameters."""
    path = request.scope.get("raw_path") or request.url.path.encode()
    query = urlencode([(k, v) for k, v in parse_qsl(request.url.query, keep_blank_values=True) if k != "token"])
    return path.decode("latin-1") + (f"?{query}" if query else "")


class RedactTokens(logging.Filter):
    """Shows `token=…` in the access log's request lines instead of the token."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_IN_QUERY.sub(r"\1…", arg) if isinstance(arg, str) else arg for arg in record.args)
        return True


def redact_access_log() -> None:
    """Install `RedactTokens` on uvicorn's access log (once)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactTokens) for f in access.filters):
        access.addFilter(RedactTokens())
