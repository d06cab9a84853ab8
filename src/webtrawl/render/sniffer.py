"""The sniffer: which requests of a rendered page are media, and what a download of them must carry.

A player reveals its media by asking for it. An address that names media (by its extension, or asked for by
a media element) is not sent by the renderer: the media downloader fetches it whole, with Range resume, and
a stream's segments are never asked for by the player at all (its manifest request was not answered). One
that only its response shows to be media (an XHR or a `fetch()` of an address without an extension) was
sent, archived and handed to the page like any other request, and is collected again by the downloader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..fetch.page import Sniffed
from ..models import FetchOutcome
from ..parse.media import media_kind, sniff_kind

if TYPE_CHECKING:
    from playwright.async_api import Request


def media_request(request: Request) -> str | None:
    """The media kind an address names before it is sent: by its extension, or "" for a media element's
    request whose address names nothing."""
    kind = media_kind(request.url)
    if kind in ("audio", "video", "playlist"):
        return kind
    return "" if request.resource_type == "media" else None


def media_response(outcome: FetchOutcome) -> str | None:
    """The media kind a response turned out to hold: by its Content-Type, else by its first bytes."""
    kind = media_kind(outcome.url, outcome.content_type)
    if kind is None and outcome.content_type in ("", "application/octet-stream", "binary/octet-stream"):
        kind = sniff_kind(outcome.body[:1024])
    return kind if kind in ("audio", "video", "playlist") else None


async def sniffed(request: Request, kind: str, content_type: str) -> Sniffed:
    """The media address a request asked for, with the Referer and cookies the browser sent with it."""
    try:
        sent = await request.all_headers()
    except Exception:  # the page went away meanwhile: its Referer is all the download needs
        sent = request.headers
    headers = {name.title(): value for name, value in sent.items() if name.lower() in ("referer", "cookie")}
    return Sniffed(request.url, kind, content_type, headers)
