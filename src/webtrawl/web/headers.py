"""What every response of the dashboard gets, whatever route made it: HEAD answered wherever GET is, and
headers that keep other sites from framing it.

Both are plain ASGI middleware around the whole app, so they also cover static files, 401s and errors.
"""

from __future__ import annotations

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

NO_FRAMING = (b"content-security-policy", b"frame-ancestors 'none'")
"""Another site could frame the dashboard under a page of its own and have its Stop button clicked."""
NO_FRAMING_OLD = (b"x-frame-options", b"DENY")
"""The same for browsers that know no `frame-ancestors`."""


class HeadAsGet:
    """HEAD wherever GET: the app answers a GET, and the client gets its status and headers without the body.

    The app is stopped once the headers are out: an event stream would otherwise run on with nobody reading.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        with anyio.CancelScope() as answered:

            async def headers_only(message: Message) -> None:
                if message["type"] == "http.response.start":
                    await send(message)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    answered.cancel()

            await self.app({**scope, "method": "GET"}, receive, headers_only)


class NoFraming:
    """`frame-ancestors 'none'` and `X-Frame-Options: DENY` on every response that does not say otherwise.

    A response with a policy of its own gets the directive added to it, unless it already says who may frame
    it: the archive's pages and copies are framed by the dashboard itself (see `archive.COPY_HEADERS`).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def framed_never(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = _no_framing(list(message.get("headers", [])))
            await send(message)

        await self.app(scope, receive, framed_never)


def _no_framing(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    names = [name.lower() for name, _value in headers]
    policies = [i for i, name in enumerate(names) if name == NO_FRAMING[0]]
    if not policies:
        headers.append(NO_FRAMING)
    elif not any(b"frame-ancestors" in headers[i][1] for i in policies):
        name, value = headers[policies[0]]
        headers[policies[0]] = (name, value.rstrip(b"; ") + b"; " + NO_FRAMING[1])
    if NO_FRAMING_OLD[0] not in names:
        headers.append(NO_FRAMING_OLD)
    return headers
