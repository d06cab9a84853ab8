"""What a correct crawl of the test site does: the ground truth, kept in this one place.

A crawl seeded with "/" is expected to:

1. Fetch "/" at depth 0; every URL is fetched at the smallest depth it can be found at.
2. After fetching a URL, find more:
   - an HTML page (200) yields its links at depth + 1 — none if it has `<meta name=robots content=nofollow>`,
     and not those written with `rel=nofollow` (both are followed when `follow_nofollow` is on);
   - a redirect (3xx) yields its Location at the *same* depth;
   - anything else (404, 500, text/plain, JSON) yields nothing: only HTML is parsed.
3. Refuse a found URL for the first of these reasons that applies:
   "scheme"            not http(s): mailto:, javascript:, tel:
   "scope"             another host key than 127.0.0.1:PORT (localhost:PORT, example.invalid)
   "binary"            the last path segment's extension is in `webtrawl.config.BINARY_EXTENSIONS`
                       (.png and .pdf are; .txt and .json are not, so those are fetched but not parsed)
   "repeated-segments" a non-empty path segment occurs more than `max_repeated_segments` times
                       (so /trap/x/x/x/ is fetched and /trap/x/x/x/x/ is not)
   "robots"            the path starts with /private/ (when robots.txt is obeyed)
   "depth"             deeper than `max_depth`
   Links not followed per 2 are "nofollow".
4. Fetch every other found URL exactly once, recording its status — 3xx, 404 and 500 included.
   /robots.txt is fetched by the robots layer, not as a page, so it is not in `fetched`.
5. Never end on a site with the calendar unless `max_depth` is set: `expect` refuses to model that.

The default rules come from `webtrawl.config`, so the model follows the crawler's defaults.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from webtrawl.config import BINARY_EXTENSIONS, FetchConfig, ScopeConfig

from .routes import ROBOTS_DISALLOW

if TYPE_CHECKING:
    from .site import Site

REASONS = ("scheme", "scope", "binary", "repeated-segments", "robots", "depth", "nofollow")
"""Why a found URL is not fetched, in the order the rules are applied."""
_RANK = {reason: rank for rank, reason in enumerate(REASONS)}
_SCOPE = ScopeConfig()


class Rules(TypedDict, total=False):
    """The crawl settings the ground truth depends on (defaults: `expect`'s, i.e. the crawler's)."""

    max_depth: int | None
    respect_robots: bool
    follow_nofollow: bool
    max_repeated_segments: int


@dataclass(frozen=True, slots=True)
class Expectation:
    """The outcome of a correct crawl of the site under some rules."""

    fetched: dict[str, int]
    """Path → depth of every URL fetched."""
    status: dict[str, int]
    """Path → HTTP status of its (last) response."""
    dropped: dict[str, frozenset[str]]
    """Reason → URLs (absolute, normalized) found but never fetched, every reason in `REASONS` a key.
    A URL found several ways is listed once, under the earliest reason in `REASONS`: a reason of the URL
    itself beats "depth", which beats "nofollow" (a nofollow link says nothing about the URL)."""
    dropped_links: dict[str, int]
    """Reason → number of distinct (fetched page, refused URL) links; a redirect counts as a link."""

    @property
    def robots_blocked(self) -> frozenset[str]:
        """Paths linked from fetched pages but disallowed by robots.txt."""
        return frozenset("/" + url.split("/", 3)[3] for url in self.dropped["robots"])

    @property
    def out_of_scope(self) -> frozenset[str]:
        """URLs on other hosts that fetched pages link or redirect to."""
        return self.dropped["scope"]


def expect(
    site: Site,
    *,
    max_depth: int | None = _SCOPE.max_depth,
    respect_robots: bool = FetchConfig().respect_robots,
    follow_nofollow: bool = _SCOPE.follow_nofollow,
    max_repeated_segments: int = _SCOPE.max_repeated_segments,
) -> Expectation:
    """What a crawl of `site` with these rules fetches and drops (see the module docstring)."""
    if max_depth is None and site.calendar:
        raise ValueError("the calendar never ends: give max_depth, or build the site with calendar=False")
    return walk(
        site,
        max_depth=max_depth,
        respect_robots=respect_robots,
        follow_nofollow=follow_nofollow,
        max_repeated_segments=max_repeated_segments,
    )


def walk(
    site: Site,
    *,
    max_depth: int | None = None,
    respect_robots: bool = True,
    follow_nofollow: bool = False,
    max_repeated_segments: int = _SCOPE.max_repeated_segments,
    expand_calendar: bool = True,
) -> Expectation:
    """Breadth-first over the served routes (a redirect costs no depth, a link one), applying the rules.

    With `expand_calendar` off, calendar pages are fetched but their links not followed, which keeps a
    walk without `max_depth` finite; nothing but calendar pages is reachable only through them.
    """
    origin = site.origin
    prefix, cut = origin + "/", len(origin)

    def refusal(url: str, depth: int) -> str | None:
        if not url.startswith(("http://", "https://")):
            return "scheme"
        if not url.startswith(prefix):
            return "scope"
        path = url[cut:]
        name = path.rpartition("/")[2]
        if "." in name and name.rpartition(".")[2].lower() in BINARY_EXTENSIONS:
            return "binary"
        segments = [s for s in path.split("/") if s]
        if len(set(segments)) < len(segments) and max(map(segments.count, segments)) > max_repeated_segments:
            return "repeated-segments"
        if respect_robots and path.startswith(ROBOTS_DISALLOW):
            return "robots"
        if max_depth is not None and depth > max_depth:
            return "depth"
        return None

    depths = {"/": 0}
    status: dict[str, int] = {}
    reasons: dict[str, str] = {}
    refused_links: set[tuple[str, str, str]] = set()
    queue = deque(["/"])
    while queue:
        path = queue.popleft()
        if path in status:
            continue
        depth = depths[path]
        route = site.route(path)
        status[path] = route.status
        if route.redirect:
            found = [(route.redirect, depth, True)]
        elif expand_calendar or not path.startswith("/calendar/"):
            follow = follow_nofollow or not route.meta_nofollow
            found = [(h, depth + 1, follow and (follow_nofollow or not h.nofollow)) for h in route.links]
        else:
            found = []
        for href, found_depth, followed in found:
            reason = refusal(href.url, found_depth) if followed else "nofollow"
            if reason:
                reasons[href.url] = min(reasons.get(href.url, reason), reason, key=_RANK.__getitem__)
                refused_links.add((reason, path, href.url))
                continue
            target = href.url[cut:]
            if found_depth < depths.get(target, found_depth + 1):
                depths[target] = found_depth
                (queue.appendleft if found_depth == depth else queue.append)(target)
    fetched = {path: depths[path] for path in status}
    dropped: dict[str, set[str]] = {reason: set() for reason in REASONS}
    for url, reason in reasons.items():
        if not (url.startswith(prefix) and url[cut:] in fetched):
            dropped[reason].add(url)
    counts = dict.fromkeys(REASONS, 0)
    for reason, _, _ in refused_links:
        counts[reason] += 1
    return Expectation(
        fetched=fetched,
        status=status,
        dropped={reason: frozenset(urls) for reason, urls in dropped.items()},
        dropped_links=counts,
    )
