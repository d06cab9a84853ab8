"""Between the browser and the fetcher (`render.renderer`): what a rendered page's request carries when the
fetcher sends it for the browser, the answer handed back to the browser, and the cookies the browser holds
once a page rendered."""

from __future__ import annotations

import logging
import time
from http.cookies import CookieError, Morsel
from typing import TYPE_CHECKING

from ..models import FetchOutcome
from ..parse.decode import decompress

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Request, Route

log = logging.getLogger(__name__)

_HOP_HEADERS = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive", "trailer", "upgrade"}
)
"""Headers not handed to the browser with a body it gets decoded and whole."""
OWNED = frozenset(
    {"host", "connection", "content-length", "transfer-encoding", "keep-alive", "te", "trailer", "upgrade",
     "proxy-authorization", "proxy-connection", "accept-encoding", "range", "if-range"}
)  # fmt: skip
"""Headers of a page's request the fetcher writes itself, not the browser: the connection's, the body's
length, Accept-Encoding (the fetcher decodes what it asked for before handing it to the browser), and Range
(the archive keeps whole responses, and a browser takes a whole answer to a range it asked for)."""


async def browser_cookies(context: BrowserContext, url: str) -> list[Morsel[str]]:
    """The browser's cookies for the page once it rendered, those its scripts set included, as the crawl's
    jar takes them (with --cookies, `HostCookieJar.take`), so the next pages of the host are fetched with
    them; each as the browser holds it, its value as sent. A cookie whose name the jar cannot hold
    (`cart[1]`) stays the browser's alone."""
    try:
        found = await context.cookies([url])
    except Exception as exc:  # the browser went away meanwhile: the jar keeps what the responses set
        log.debug("could not read the cookies of %s: %s", url, exc)
        return []
    morsels = []
    for cookie in found:
        morsel: Morsel[str] = Morsel()
        try:
            morsel.set(cookie["name"], cookie["value"], cookie["value"])
        except CookieError:
            continue
        morsel["path"] = cookie.get("path") or "/"
        morsel["secure"] = bool(cookie.get("secure"))
        morsel["httponly"] = bool(cookie.get("httpOnly"))
        expires = cookie.get("expires", -1)
        if expires and expires > 0:
            morsel["max-age"] = str(max(0, int(expires - time.time())))
        morsels.append(morsel)
    return morsels


async def forwarded(request: Request) -> dict[str, str]:
    """The headers the browser sent with `request` (its cookies included), but those the fetcher owns; named
    as HTTP/1.1 names them (Playwright hands them over in lower case)."""
    try:
        sent = await request.all_headers()
    except Exception:  # the page went away meanwhile: what the request object holds (no cookies)
        sent = request.headers
    return {name.title(): value for name, value in sent.items() if name.lower() not in OWNED and name[:1] != ":"}


async def fulfill(route: Route, outcome: FetchOutcome, max_size: int) -> None:
    """Hand the browser a response as the fetcher received it, its body decoded (the browser gets no
    Content-Encoding from a fulfilled request)."""
    assert outcome.status is not None
    body, _cut = decompress(outcome.body, outcome.header("Content-Encoding"), max_size)
    headers: dict[str, str] = {}
    for name, value in outcome.headers:
        lower = name.lower()
        if lower in _HOP_HEADERS:
            continue
        headers[lower] = f"{headers[lower]}\n{value}" if lower == "set-cookie" and lower in headers else value
    try:
        await route.fulfill(status=outcome.status, headers=headers, body=body)
    except Exception as exc:  # the page went away meanwhile
        log.debug("could not answer %s: %s", outcome.url, exc)


async def abort(route: Route, code: str) -> None:
    try:
        await route.abort(code)
    except Exception as exc:  # the page went away meanwhile
        log.debug("could not refuse a request: %s", exc)
