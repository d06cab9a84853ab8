"""A deterministic test web site, generated in memory from a seed, with its ground truth.

`Site` holds what is served (`route(path)`), the pages with their unique words (`pages`), and what a crawl
fetches (`expect()`, rules in `model.py`). The site knows its port, because absolute links
(`http://127.0.0.1:PORT/...`) are part of its pages: the server binds first and builds the site afterwards.
Same seed and port → byte-identical site.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Unpack

from .build import Builder, build_tree
from .model import Expectation, Rules, expect, walk
from .routes import NOT_FOUND, ROBOTS_DISALLOW, Href, Route, render_html
from .specials import add_specials

_CALENDAR = re.compile(r"/calendar/(\d{4,})/(\d\d)/")
_TRAP = re.compile(r"/trap/(?:x/)*")
_MIN_PAGES = 10


@dataclass(frozen=True, slots=True)
class PageInfo:
    """An HTML page with a unique title and a word found on no other page."""

    title: str
    word: str
    depth: int | None
    """Depth at which a default crawl fetches the page (a redirect target inherits its source's depth);
    None when a default crawl never fetches it (robots-blocked, reachable only through nofollow or text)."""
    links: tuple[Href, ...]


class Site:
    """A generated site: `pages` tree pages (page 0 is "/", ≥ 10) plus the special pages of `specials.py`.

    With `calendar` on, "/" links a calendar of months that never ends, so `expect()` needs a `max_depth`
    (`site.deepest` reaches every other page). Calendar and trap pages are made on demand and are not in
    `pages`; neither are redirects, files and error responses.
    """

    def __init__(
        self, *, pages: int = 300, seed: int = 0, port: int = 8765, calendar: bool = True, address: str = "127.0.0.1"
    ) -> None:
        if pages < _MIN_PAGES:
            raise ValueError(f"a site needs at least {_MIN_PAGES} pages, not {pages}")
        self.seed = seed
        self.port = port
        self.calendar = calendar
        self.host = f"{address}:{port}"
        self.origin = f"http://{self.host}"
        self.other_origin = f"http://localhost:{port}"
        """The same server under another host key, so out of scope for a crawl of `origin`."""
        self.robots_txt = f"User-agent: *\nDisallow: {ROBOTS_DISALLOW}\n"
        builder = Builder(self.origin, random.Random(seed))
        hosts = build_tree(builder, pages)
        add_specials(builder, hosts, other_origin=self.other_origin, calendar=calendar)
        texts = builder.render()
        self.routes: dict[str, Route] = builder.routes
        self.routes["/robots.txt"] = Route(200, "text/plain; charset=utf-8", self.robots_txt.encode())
        depths = walk(self, expand_calendar=False).fetched
        self.pages: dict[str, PageInfo] = {
            path: PageInfo(title, word, depths.get(path), self.routes[path].links)
            for path, (title, word) in texts.items()
        }
        self.deepest: int = max(p.depth for p in self.pages.values() if p.depth is not None)
        """The depth of the deepest page a default crawl fetches."""

    def url(self, path: str) -> str:
        return self.origin + path

    def route(self, path: str) -> Route:
        """The response for `path` (percent-decoded, no query); calendar and trap pages are made on demand."""
        route = self.routes.get(path)
        if route is not None:
            return route
        if self.calendar and (match := _CALENDAR.fullmatch(path)):
            return self._calendar(int(match[1]), int(match[2]), path)
        if _TRAP.fullmatch(path):
            links = [self._href("/", "/"), self._href("x/", path + "x/")]
            return Route(200, body=render_html("Trap", "Deeper and deeper.", links), links=tuple(links))
        return Route(404, body=NOT_FOUND)

    def expect(self, **rules: Unpack[Rules]) -> Expectation:
        """What a crawl from "/" with these rules fetches and drops (rules and defaults in `model.py`)."""
        return expect(self, **rules)

    def expected_fetched(self, **rules: Unpack[Rules]) -> dict[str, int]:
        """Path → depth of every URL a crawl from "/" with these rules fetches."""
        return expect(self, **rules).fetched

    def _href(self, href: str, path: str) -> Href:
        return Href(href, self.origin + path)

    def _calendar(self, year: int, month: int, path: str) -> Route:
        """A month page linking the months before and after it (back to year 1, forward forever)."""
        if not (year >= 1 and 1 <= month <= 12 and path == f"/calendar/{year:04d}/{month:02d}/"):
            return Route(404, body=NOT_FOUND)
        links = [self._href("/", "/")]
        index = year * 12 + month - 1
        for y, m in (divmod(index - 1, 12), divmod(index + 1, 12)):
            if y >= 1:
                month_path = f"{y:04d}/{m + 1:02d}/"
                links.append(self._href(f"../../{month_path}", f"/calendar/{month_path}"))
        title = f"Calendar {year:04d}-{month:02d}"
        return Route(200, body=render_html(title, "Nothing happens this month.", links), links=tuple(links))
