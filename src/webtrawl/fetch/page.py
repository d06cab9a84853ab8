"""How the engine gets a page: one narrow protocol, an HTTP implementation and (in `render`) a rendering one.

The engine is handed a `PageFetcher` and never builds one, so what a page costs (one request, or a browser
tab and every request the page makes) is chosen per URL by whoever built it. Both return the page's own
response as received, which is what the archive keeps and what the engine judges; a rendering fetcher adds
what the browser saw (`Rendering`). One contract suite (`tests/render/test_page_fetchers.py`) holds both to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..models import FetchOutcome, Link
from .fetcher import Fetcher


@dataclass(frozen=True, slots=True)
class Sniffed:
    """A media address a rendered page asked for (its player revealed it), and how it was asked for."""

    url: str
    kind: str
    """`audio`, `video` or `playlist` (HLS, DASH, M3U…); empty when only the request said "media"."""
    content_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    """What a download must send again, as the browser sent it: the Referer and the page's cookies."""


@dataclass(slots=True, kw_only=True)
class Rendering:
    """What the browser made of a page: the page as a reader saw it, and every request it made."""

    read: bool = False
    """Whether the rendered page could be read (a page stuck in a script cannot): only then do `title` and
    `text` stand for the page."""
    title: str = ""
    text: str = ""
    """The rendered page's visible text (what a script wrote included)."""
    links: list[Link] = field(default_factory=list)
    """From the rendered DOM (anchors, frames), `history.pushState`, `window.open` and blocked navigations."""
    resources: list[FetchOutcome] = field(default_factory=list)
    """The responses to the page's own requests (scripts, styles, XHR, images, media, frames), as received,
    in the order they ended; those served from the renderer's cache are not repeated."""
    media: list[Sniffed] = field(default_factory=list)
    """Audio, video and stream manifests the page asked for (when the crawl collects media), in order."""
    refused: list[tuple[str, str]] = field(default_factory=list)
    """Requests of the page not sent, with why: `private-address`, `robots.txt`, `a form sent by POST`,
    `over 200 requests other than GET a page`."""
    dom: bytes | None = None
    """The rendered document, serialized (UTF-8): what the archive replays without running a script."""
    screenshot: bytes | None = None
    """A JPEG thumbnail of the page (with `--screenshots`)."""
    timeouts: list[str] = field(default_factory=list)
    """Steps cut short by `--render-timeout` (load, network-idle, scroll, play, behavior, snapshot)."""
    seconds: float = 0.0
    requests: int = 0
    """Requests the page made, those served from the cache included."""
    error: str | None = None
    """Why there is no rendering although one was wanted (the browser crashed): the page is tried again."""


@dataclass(slots=True)
class PageFetch:
    """One page fetched: its response, and its rendering when it was rendered."""

    outcome: FetchOutcome
    rendering: Rendering | None = None


class PageFetcher(Protocol):
    """What the engine asks for a URL. Never raises except `asyncio.CancelledError`."""

    async def fetch_page(
        self, url: str, *, any_type: bool = False, headers: dict[str, str] | None = None
    ) -> PageFetch: ...


class HttpPages:
    """Pages as the server sends them: one request each, nothing run."""

    def __init__(self, fetcher: Fetcher) -> None:
        self._fetcher = fetcher

    async def fetch_page(self, url: str, *, any_type: bool = False, headers: dict[str, str] | None = None) -> PageFetch:
        return PageFetch(await self._fetcher.fetch(url, any_type=any_type, headers=headers))
