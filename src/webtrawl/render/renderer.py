"""The rendering page fetcher: the page's response from the crawl's fetcher, then the page run in Chromium
with every request it makes served by that same fetcher.

Why every request goes through webtrawl: the private-network guard, robots.txt, the crawl's User-Agent and
cookies, and the archive all live there, so a rendered page keeps every guarantee a fetched one has, and
the WARC holds the bytes as received of everything the page loaded. The browser is proxied to nowhere
(`browser.CHROMIUM_ARGS`): what escapes the routes reaches nothing.

Pacing: the page itself is fetched at its host's pace, and its host slot stays taken until the rendering
ends, so the host's delay runs from the end of a rendering to the start of the next page. The page's own
requests (its requisites) are not spaced by the delay — a page needs them together to load in reasonable
time, as a browser loads them — but at most `REQUISITES_PER_HOST` are in flight to one host at once, across
every page being rendered, and a requisite already fetched in this run is served from memory, not fetched
or archived again (`ResourceCache`). When the crawl collects media, the route also records what the page's
players ask for (`sniffer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from ..config import CrawlConfig
from ..errors import InvalidURL
from ..fetch.fetcher import Fetcher
from ..fetch.page import PageFetch, Rendering
from ..fetch.robots import ALLOW_ALL, RobotsRules
from ..models import FetchOutcome, Link
from ..parse.decode import decompress, sniff_charset, to_text
from ..parse.html import MAX_TEXT
from ..politeness import Politeness
from ..stats import Stats
from ..urls import normalize, origin
from .auto import looks_scripted
from .browser import BrowserGone, Chromium
from .cache import ResourceCache
from .forwarding import abort, browser_cookies, forwarded, fulfill
from .sniffer import media_request, media_response, sniffed

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page, Request, Route

log = logging.getLogger(__name__)

PAGE_SCRIPT = files(__package__).joinpath("page.js").read_text()
BEHAVIORS = files(__package__).joinpath("behaviors.js").read_text()

AUTO_LIMIT = 256 * 1024
"""Bytes of a page `--render auto` reads to judge it (on the event loop: an app shell is small, and a page
with links shows some early)."""
REQUISITES_PER_HOST = 6
"""Requests of rendered pages in flight to one host at once (what a browser opens per host)."""
IDLE_QUIET = 0.5
"""Seconds without a request in flight after which the network counts as idle."""
STEP_IDLE = 2.0
"""Seconds a behaviour step waits at most for the network to settle before the next step."""
READING_SHARE = 0.2
"""Share of `--render-timeout` (at least a second) kept for reading the page after its behaviours."""
MAX_SCROLLS = 30
MAX_LINKS = 10_000
MAX_MEDIA = 1000
"""Media addresses kept from one page (see `sniffer`)."""
_COLLECTED = FetchOutcome(url="", started_at=0.0)
"""What `_requisite` answers for a request the page's media downloader will collect instead of the browser."""
MAX_ROBOTS = 10_000
"""Hosts whose robots.txt the renderer keeps (those the crawl itself knows are asked of `Politeness`)."""
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", ""})
CALLS_PER_PAGE = 200
"""Requests other than GET one rendered page may send (an app that polls by POST is stopped there)."""


class _Session:
    """One page being rendered: what its requests brought, and whether the network is quiet."""

    def __init__(self, url: str, outcome: FetchOutcome, max_size: int) -> None:
        self.url = url
        self.outcome = outcome
        self.max_size = max_size
        self.document_served = False
        self.rendering = Rendering()
        self.links: dict[str, None] = {}
        self.in_flight = 0
        self.last_activity = time.monotonic()
        self.calls = 0
        """Requests other than GET sent (`CALLS_PER_PAGE`)."""
        self.crashed = False
        self.ended = False
        """The tab is closed: what its requests bring now is not the page's any more."""

    def note_link(self, url: str) -> None:
        try:
            link = normalize(url)
        except InvalidURL:
            return
        if link.startswith(("http://", "https://")) and len(self.links) < MAX_LINKS:
            self.links[link] = None

    def quiet_for(self, since: float) -> float:
        return 0.0 if self.in_flight else time.monotonic() - max(self.last_activity, since)


class Renderer:
    """A `PageFetcher` that renders the pages its config chooses and fetches the others as `HttpPages` does.

    `async with Renderer(...)`: Chromium starts with the block (so a missing browser ends the crawl before it
    begins) and ends with it.
    """

    def __init__(
        self,
        config: CrawlConfig,
        fetcher: Fetcher,
        politeness: Politeness,
        stats: Stats,
        robots: Callable[[str], Awaitable[RobotsRules]],
    ) -> None:
        """`robots(origin)`: a host's robots.txt rules, for requests of pages to hosts the crawl has not met."""
        self._config = config
        self._render = config.render
        self._sniffing = bool(config.media.kinds)
        self._match = re.compile(config.render.match) if config.render.match else None
        self._fetcher = fetcher
        self._politeness = politeness
        self._stats = stats
        self._robots_source = robots
        self._robots: OrderedDict[str, asyncio.Task[RobotsRules]] = OrderedDict()
        self._per_host: dict[str, tuple[asyncio.Semaphore, list[int]]] = {}
        self._cache = ResourceCache()
        self._slots = asyncio.Semaphore(config.render.concurrency)
        self._sessions: dict[Any, _Session] = {}
        self._closing: set[asyncio.Future[None]] = set()
        self._stack = AsyncExitStack()
        self._chromium = Chromium(
            recycle_every=config.render.recycle_every, user_agent=config.fetch.user_agent, setup=self._setup
        )
        self._behavior = f"(async () => {{\n{config.render.behavior}\n}})()" if config.render.behavior else None

    async def __aenter__(self) -> Renderer:
        await self._stack.enter_async_context(self._chromium)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._robots.values():
            task.cancel()
        await asyncio.gather(*self._robots.values(), *self._closing, return_exceptions=True)
        await self._stack.aclose()

    @property
    def browser_restarts(self) -> int:
        return self._chromium.restarts

    async def fetch_page(self, url: str, *, any_type: bool = False, headers: dict[str, str] | None = None) -> PageFetch:
        outcome = await self._fetcher.fetch(url, any_type=any_type, headers=headers)
        if not self._wanted(url, outcome):
            return PageFetch(outcome)
        async with self._slots:
            rendering = await self._rendering(url, outcome)
        stats = self._stats
        stats.browser_restarts = self._chromium.restarts
        if rendering is not None and rendering.error is None:
            stats.rendered += 1
            stats.render_seconds += rendering.seconds
            stats.subresources += len(rendering.resources)
            stats.render_timeouts += bool(rendering.timeouts)
        return PageFetch(outcome, rendering)

    def _wanted(self, url: str, outcome: FetchOutcome) -> bool:
        """Whether this response is a page to render (see `RenderConfig`)."""
        if outcome.status is None or not 200 <= outcome.status < 300 or not outcome.body:
            return False
        if outcome.content_type not in HTML_TYPES or (self._match is not None and not self._match.search(url)):
            return False
        if self._render.mode == "auto":
            return looks_scripted(_decoded(outcome, AUTO_LIMIT), url) is not None
        return True

    async def _setup(self, context: BrowserContext) -> None:
        context.on("page", self._on_new_page)
        await context.add_init_script(PAGE_SCRIPT)
        await context.route("**/*", self._route)
        # A WebSocket the page opens is answered by no one: it would reach the network on its own.
        await context.route_web_socket("**/*", lambda _socket: None)

    async def _rendering(self, url: str, outcome: FetchOutcome) -> Rendering | None:
        session = _Session(url, outcome, self._config.fetch.max_size)
        rendering = session.rendering
        started = time.monotonic()
        try:
            async with self._chromium.page() as page:
                self._sessions[page] = session
                try:
                    await self._steps(page, session, started + self._render.timeout)
                finally:
                    session.ended = True
                    del self._sessions[page]
                if (jar := self._fetcher.cookie_jar) is not None:
                    jar.take(url, await browser_cookies(page.context, url))
        except BrowserGone as exc:
            rendering.error = f"browser crashed: {exc}"[:200]
        except Exception as exc:  # a fault of ours or of Playwright: the page is kept as it was served
            log.warning("could not render %s (kept as served): %r", url, exc)
            return None
        if session.crashed and rendering.error is None:
            rendering.error = "the page crashed the browser tab"
        rendering.resources = list(rendering.resources)  # what arrives after the tab closed is not added to this
        rendering.links = [Link(link) for link in session.links]
        rendering.seconds = time.monotonic() - started
        return rendering

    async def _steps(self, page: Page, session: _Session, deadline: float) -> None:
        """Load, settle, scroll, play, the user's behaviour, then read what is there; each step within what is
        left of the page's time. A step cut short is named in `timeouts`; the page keeps what it had by then."""
        from playwright.async_api import Error as PlaywrightError

        rendering = session.rendering
        page.on("crash", lambda _page: setattr(session, "crashed", True))
        page.set_default_timeout(self._render.timeout * 1000)

        # The behaviours leave the last part of the page's time to reading the page.
        behaviours_end = deadline - max(1.0, self._render.timeout * READING_SHARE)

        async def step(
            name: str, action: Callable[[], Awaitable[Any]], limit: float | None = None, *, last: bool = False
        ) -> Any:
            remaining = (deadline if last else behaviours_end) - time.monotonic()
            if remaining <= 0 or session.crashed:
                return None
            try:
                async with asyncio.timeout(remaining if limit is None else min(remaining, limit)):
                    return await action()
            except TimeoutError:
                rendering.timeouts.append(name)
            except PlaywrightError as exc:
                if not page.context.browser or not page.context.browser.is_connected():
                    raise BrowserGone(str(exc).splitlines()[0]) from None
                log.debug("rendering %s: %s failed: %s", session.url, name, exc)
            except (TypeError, ValueError, KeyError) as exc:  # the page changed what our scripts give back
                log.debug("rendering %s: %s gave something unexpected: %s", session.url, name, exc)
            return None

        async def idle(limit: float) -> bool:
            """Wait until no request was in flight for `IDLE_QUIET` seconds since now: what a step starts
            (a scroll's fetch) begins a moment after it."""
            since = time.monotonic()
            end = since + limit
            while session.quiet_for(since) < IDLE_QUIET:
                if time.monotonic() >= end:
                    return False
                await asyncio.sleep(0.05)
            return True

        async def settle(name: str, limit: float) -> None:
            if not await step(name, lambda: idle(limit)) and name not in rendering.timeouts:
                rendering.timeouts.append(name)

        await step("load", lambda: page.goto(session.url, wait_until="load"))
        await settle("network-idle", max(STEP_IDLE, self._render.timeout / 3))
        snapshot = await step("snapshot", lambda: self._snapshot(page, dom=False))
        await step("scroll", lambda: self._scroll(page, idle))
        started = await step("play", lambda: page.evaluate(f"({BEHAVIORS}).play()"))
        if isinstance(started, dict) and (started.get("media") or started.get("clicked")):
            await settle("network-idle", STEP_IDLE)
        if (behavior := self._behavior) is not None:
            await step("behavior", lambda: page.evaluate(behavior))
            await settle("network-idle", STEP_IDLE)
        snapshot = await step("snapshot", lambda: self._snapshot(page, dom=True), last=True) or snapshot
        if snapshot is not None:
            rendering.read = True
            rendering.title, rendering.text = snapshot["title"][:1000], snapshot["text"]
            for link in snapshot["links"]:
                session.note_link(link)
            if snapshot["dom"]:
                rendering.dom = snapshot["dom"].encode("utf-8", errors="replace")
        if self._render.screenshots:
            rendering.screenshot = await step("screenshot", lambda: _thumbnail(page), last=True)

    async def _snapshot(self, page: Page, *, dom: bool) -> dict[str, Any]:
        limits = {"links": MAX_LINKS, "text": MAX_TEXT, "dom": self._config.fetch.max_size if dom else 0}
        found = await page.evaluate(f"(limits) => ({BEHAVIORS}).snapshot(limits)", limits)
        # The page's own scripts share the world ours run in, and may have changed what they give back.
        if not isinstance(found, dict):
            raise ValueError(f"a snapshot of {type(found).__name__}")
        links = found.get("links")
        return {
            "title": _text(found.get("title")),
            "text": _text(found.get("text")),
            "links": [link for link in links[:MAX_LINKS] if isinstance(link, str)] if isinstance(links, list) else [],
            "dom": found.get("dom") if isinstance(found.get("dom"), str) else None,
        }

    async def _scroll(self, page: Page, idle: Callable[[float], Awaitable[bool]]) -> None:
        """Scroll to the bottom until the page stops growing (twice the same height); a page no taller than
        the window has nothing to scroll."""
        heights: list[float] = []
        for _ in range(MAX_SCROLLS):
            height, window = map(float, await page.evaluate(f"({BEHAVIORS}).scroll()"))
            if height <= window:
                return
            heights.append(height)
            await idle(STEP_IDLE)
            if len(heights) >= 2 and heights[-1] == heights[-2]:
                return

    async def _route(self, route: Route, request: Request) -> None:
        """Every request of every rendered page: the page's own document, or a request served by the fetcher."""
        try:
            page = request.frame.page
        except Exception:  # a frame gone (its page closed), or not there yet (a new window's first request)
            page = None
        session = self._sessions.get(page)
        if session is None:
            await self._stray(route, request)
            return
        url = request.url
        navigation = request.is_navigation_request()
        if navigation and request.method != "GET":  # a form sent: the page would leave, and it is no link
            session.rendering.refused.append((url, f"a form sent by {request.method}"))
            await abort(route, "blockedbyclient")
            return
        if navigation and request.frame.parent_frame is None:
            if not session.document_served:
                session.document_served = True
                await fulfill(route, session.outcome, session.max_size)
            else:  # the page wants to go elsewhere: that address is a link, and the page stays
                session.note_link(url)
                await abort(route, "aborted")
            return
        if navigation:
            session.note_link(url)  # a frame's document is a page of its own too
        session.rendering.requests += 1
        if not url.startswith(("http://", "https://")):
            await abort(route, "blockedbyclient")
            return
        session.in_flight += 1
        try:
            outcome = await self._requisite(session, request)
        except Exception as exc:  # a robots.txt source that failed (a distributed crawl's Redis): not sent
            log.warning("a request of %s was not sent: %r", session.url, exc)
            outcome = None
        finally:
            session.in_flight -= 1
            session.last_activity = time.monotonic()
        if outcome is _COLLECTED:
            await abort(route, "aborted")
        elif outcome is None:
            await abort(route, "blockedbyclient")
        elif outcome.status is None:
            await abort(route, "blockedbyclient" if (outcome.error or "").startswith("blocked") else "failed")
        else:
            await fulfill(route, outcome, session.max_size)

    async def _stray(self, route: Route, request: Request) -> None:
        """A request of no page being rendered: refused. A new window's first navigation (a link with a target
        that `page.js` did not see) is a link of the page it came from, known by its Referer."""
        await abort(route, "aborted")
        referer = request.headers.get("referer")
        if referer and request.is_navigation_request():
            for session in self._sessions.values():
                if session.url == referer:
                    session.note_link(request.url)
                    break

    def _on_new_page(self, page: Page) -> None:
        """A window a rendered page opened anyway is closed (a tab of ours has no opener)."""
        task = asyncio.ensure_future(_close_if_opened(page))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _requisite(self, session: _Session, request: Request) -> FetchOutcome | None:
        """A request of a rendered page: from the cache, or refused, or collected as media (not sent: see
        `_sniffed`), or fetched as the page made it (method, body, the browser's headers and cookies) and
        then archived.

        Only GETs are served from the cache and sniffed for media: a POST's answer depends on its body, and
        an address a player asks for by POST is none the media downloader could fetch."""
        url, method = request.url, request.method
        get = method == "GET"
        cached = self._cache.get(url) if get else None
        if cached is not None:
            return cached
        try:
            site = origin(normalize(url))
        except InvalidURL:
            return None
        rules = await self._robots_for(site)
        if not rules.allowed(url):
            session.rendering.refused.append((url, "robots.txt"))
            return None
        if not get:
            if session.calls >= CALLS_PER_PAGE:
                session.rendering.refused.append((url, f"over {CALLS_PER_PAGE} requests other than GET a page"))
                return None
            session.calls += 1
        if get and self._sniffing and (kind := media_request(request)) is not None:
            await self._sniffed(session, request, kind, "")
            return _COLLECTED
        headers = await forwarded(request)
        async with self._host_slot(site):
            outcome = await self._fetcher.fetch(
                url, any_type=True, headers=headers, method=method, body=request.post_data_buffer or b"", jar=False
            )
        if outcome.status is None and (outcome.error or "").startswith("blocked"):
            session.rendering.refused.append((url, "private-address"))
            return outcome
        if outcome.status is not None and not session.ended:
            session.rendering.resources.append(outcome)
            if get:
                self._cache.put(outcome)
            if get and self._sniffing and outcome.status == 200 and (kind := media_response(outcome)) is not None:
                await self._sniffed(session, request, kind, outcome.content_type)
        return outcome

    async def _sniffed(self, session: _Session, request: Request, kind: str, content_type: str) -> None:
        media = await sniffed(request, kind, content_type)
        if len(session.rendering.media) < MAX_MEDIA and not session.ended:
            session.rendering.media.append(media)

    @contextlib.asynccontextmanager
    async def _host_slot(self, site: str) -> AsyncIterator[None]:
        """One of the `REQUISITES_PER_HOST` slots of `site`; a host's slots are forgotten when none is in use."""
        semaphore, users = self._per_host.setdefault(site, (asyncio.Semaphore(REQUISITES_PER_HOST), [0]))
        users[0] += 1
        try:
            async with semaphore:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._per_host[site]

    async def _robots_for(self, site: str) -> RobotsRules:
        """The robots.txt rules of `site`: the crawl's own when it knows the host, else fetched once a run."""
        if not self._config.fetch.respect_robots:
            return ALLOW_ALL
        known = self._politeness.rules(site)
        if known is not None:
            return known
        task = self._robots.get(site)
        if task is not None and task.done() and task.exception() is not None:
            del self._robots[site]  # asked again by the next request
            task = None
        if task is None:
            task = self._robots[site] = asyncio.ensure_future(self._robots_source(site))
            while len(self._robots) > MAX_ROBOTS:  # the oldest is forgotten, not cancelled: a page may await it
                self._robots.popitem(last=False)
        return await asyncio.shield(task)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _decoded(outcome: FetchOutcome, max_size: int) -> str:
    body, _cut = decompress(outcome.body, outcome.header("Content-Encoding"), max_size)
    return to_text(body, sniff_charset(body, outcome.header("Content-Type")))


async def _close_if_opened(page: Page) -> None:
    try:
        if await page.opener() is not None:
            await page.close(run_before_unload=False)
    except Exception as exc:  # closed meanwhile
        log.debug("a window a page opened: %s", exc)


async def _thumbnail(page: Page) -> bytes:
    """A quarter-size JPEG of the visible part of the page."""
    import base64

    session = await page.context.new_cdp_session(page)
    try:
        clip = {"x": 0, "y": 0, "width": 1280, "height": 800, "scale": 0.25}
        shot = await session.send("Page.captureScreenshot", {"format": "jpeg", "quality": 70, "clip": clip})
    finally:
        await session.detach()
    return base64.b64decode(shot["data"])
