"""robots.txt: fetching it the way Google does, and answering "may this URL be fetched?" with protego.

Google's rules (developers.google.com/search/docs/crawling-indexing/robots/robots_txt), followed here:
- 2xx: the body is parsed; anything unparseable (an HTML page, junk) simply yields no rules: allow all.
  Only the first 500 KiB count.
- 3xx: followed for up to 5 hops; more (or a loop) is treated like a 404.
- 4xx (except 429): there is no robots.txt: allow all.
- 5xx, 429, a network error, or no answer at all: the site may be down, so disallow all for now;
  `RobotsRules.unreachable` tells the caller to try again later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import urljoin

from protego import Protego

from ..models import FetchOutcome
from ..parse.decode import decompress

if TYPE_CHECKING:
    from .fetcher import Fetcher

logger = logging.getLogger(__name__)

ROBOTS_MAX_SIZE = 512_000
"""Bytes of robots.txt read and parsed (Google's limit is 500 KiB); the rest is ignored."""

MAX_REDIRECTS = 5


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """What one site's robots.txt says to one crawler.

    `allowed` is called for every URL before it is fetched, so it must stay cheap: the parsed rules are
    kept, and protego remembers which group applies to our agent after the first call.
    """

    parser: Protego | None = None
    """The parsed file; None when there is none to obey (allow all, or disallow all if unreachable)."""
    agent: str = "*"
    """The product token matched against User-agent lines, e.g. "webtrawl"."""
    unreachable: bool = False
    """robots.txt could not be read (5xx, 429, network error): everything is disallowed for now."""
    sitemaps: tuple[str, ...] = ()

    def allowed(self, url: str) -> bool:
        """Whether `url` (on this site) may be fetched."""
        parser = self.parser
        if parser is None:
            return not self.unreachable
        return parser.can_fetch(url, self.agent)

    @property
    def crawl_delay(self) -> float | None:
        """Seconds between requests the site asks of this agent, if it says."""
        return None if self.parser is None else self.parser.crawl_delay(self.agent)


ALLOW_ALL = RobotsRules()
"""Rules that allow everything: a site without robots.txt, or a crawl told to ignore it."""

_UNREACHABLE = RobotsRules(unreachable=True)
_NEVER_SENT = ("blocked:", "dns:", "tls:")
"""Reasons of fetches that failed for good before any request reached a server."""


def robots_url(origin: str) -> str:
    """Where the robots.txt of `origin` ("http://host:port") lives."""
    return origin.rstrip("/") + "/robots.txt"


def product_token(user_agent: str) -> str:
    """The name robots.txt groups match: "webtrawl" from "webtrawl/0.1.0 (+https://…)"."""
    words = user_agent.split()
    token = words[0].split("/", 1)[0] if words else ""
    return token.lower() or "*"


def parse_robots(text: str, user_agent: str) -> RobotsRules:
    """Rules from the text of a robots.txt, for the crawler calling itself `user_agent`."""
    parser = Protego.parse(text.removeprefix("\ufeff"))
    return RobotsRules(parser=parser, agent=product_token(user_agent), sitemaps=tuple(parser.sitemaps))


@dataclass(frozen=True, slots=True)
class RobotsSource:
    """What fetching a robots.txt came to, before it is parsed for one agent: small, and shareable as is
    (the nodes of a crawl that spreads one site over many share one fetch)."""

    verdict: Literal["allow", "unreachable", "text"]
    text: str = ""

    def rules(self, user_agent: str) -> RobotsRules:
        if self.verdict == "text":
            return parse_robots(self.text, user_agent)
        return ALLOW_ALL if self.verdict == "allow" else _UNREACHABLE


_ALLOW = RobotsSource("allow")


def source_from_outcome(outcome: FetchOutcome | None) -> RobotsSource:
    """What the fetch of a robots.txt says (None: it could not be fetched at all).

    A 3xx here is a redirect the caller did not follow any further, which counts as "no robots.txt".
    """
    if outcome is None or outcome.status is None:
        if outcome is not None and not outcome.retryable and (outcome.error or "").startswith(_NEVER_SENT):
            # No server was asked (a refused address, a name that does not exist, a bad certificate): the
            # site's pages will fail the same way, each with that reason rather than "robots.txt unreachable".
            return _ALLOW
        return RobotsSource("unreachable")
    status = outcome.status
    if 200 <= status < 300:
        if outcome.error:
            # Cut by a timeout or a disconnect: the missing part may hold the Disallow that matters.
            return RobotsSource("unreachable")
        return RobotsSource("text", _text(outcome))
    if status >= 500 or status == 429:
        return RobotsSource("unreachable")
    return _ALLOW


def rules_from_outcome(outcome: FetchOutcome | None, user_agent: str) -> RobotsRules:
    """Rules from the fetch of a robots.txt (None: it could not be fetched at all)."""
    return source_from_outcome(outcome).rules(user_agent)


async def fetch_robots(fetcher: Fetcher, origin: str, user_agent: str) -> RobotsRules:
    """Fetch and parse the robots.txt of `origin` (see `fetch_robots_source`)."""
    return (await fetch_robots_source(fetcher, origin)).rules(user_agent)


async def fetch_robots_source(fetcher: Fetcher, origin: str) -> RobotsSource:
    """Fetch the robots.txt of `origin`, following up to 5 redirects.

    Never raises except on cancellation: every failure becomes a verdict (see the module docstring).
    """
    url = robots_url(origin)
    seen = {url}
    for _ in range(MAX_REDIRECTS + 1):
        outcome = await fetcher.fetch(url, any_type=True, max_size=ROBOTS_MAX_SIZE)
        status = outcome.status
        if status is None or not 300 <= status < 400:
            source = source_from_outcome(outcome)
            if source.verdict == "unreachable":
                logger.info("robots.txt of %s unreachable: %s", origin, outcome.error or status)
            return source
        location = (outcome.header("Location") or "").strip()
        try:
            url = urljoin(url, location) if location else ""
        except ValueError:  # e.g. "http://[oops/"
            url = ""
        # A redirect that goes nowhere usable, or in a circle, ends like too many redirects.
        if url in seen or not url.startswith(("http://", "https://")):
            return _ALLOW
        seen.add(url)
    logger.info("robots.txt of %s: more than %d redirects, allowing all", origin, MAX_REDIRECTS)
    return _ALLOW


def _text(outcome: FetchOutcome) -> str:
    """The body as text: Content-Encoding undone (the fetcher keeps it), at most ROBOTS_MAX_SIZE bytes."""
    body, _cut = decompress(outcome.body, outcome.header("Content-Encoding"), ROBOTS_MAX_SIZE)
    return body.decode("utf-8", errors="replace")


_VALUED_DIRECTIVES = frozenset({"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"})


def tag_directives(values: list[str], user_agent: str) -> frozenset[str]:
    """The `X-Robots-Tag` directives that apply to us, lower case, with "none" spelled out.

    A value may name an agent first (`googlebot: noindex`); such a value applies only when the agent is
    ours. Directives that carry a value after a colon (`max-snippet: 20`) are not agent names.
    """
    token = product_token(user_agent)
    found: set[str] = set()
    for value in values:
        head, colon, rest = value.partition(":")
        agent = head.strip().lower()
        if colon and agent not in _VALUED_DIRECTIVES and "," not in agent:
            if agent != token:
                continue
            value = rest
        for directive in value.lower().split(","):
            directive = directive.strip()
            found.update(("noindex", "nofollow") if directive == "none" else (directive,))
    return frozenset(found)
