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
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import urljoin

from protego import Protego

from ..models import FetchOutcome, KeepResponse
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

    `allowed` is called for every URL before it is fetched, so it must stay cheap: the groups that apply
    to our agent are chosen once, when the file is parsed, and only their rules are kept.
    """

    parser: Protego | None = None
    """The rules that apply to `agent`, as one group; None when there is none to obey (allow all, or
    disallow all if unreachable)."""
    agent: str = "*"
    """The product token matched against User-agent lines, e.g. "webtrawl"."""
    unreachable: bool = False
    """robots.txt could not be read (5xx, 429, network error): everything is disallowed for now."""
    why: str = ""
    """When unreachable, what the fetch of robots.txt came to ("connection refused", "HTTP 503")."""
    sitemaps: tuple[str, ...] = ()

    def allowed(self, url: str) -> bool:
        """Whether `url` (on this site) may be fetched."""
        parser = self.parser
        if parser is None:
            return not self.unreachable
        return parser.can_fetch(url, self.agent)

    @property
    def refusal(self) -> str:
        """Why a URL these rules do not allow fails: the robots.txt that could not be read and why, or its rules."""
        if self.unreachable:
            return f"robots.txt unreachable ({self.why})" if self.why else "robots.txt unreachable"
        return "blocked by robots.txt"

    @property
    def crawl_delay(self) -> float | None:
        """Seconds between requests the site asks of this agent, if it says."""
        return None if self.parser is None else self.parser.crawl_delay(self.agent)


ALLOW_ALL = RobotsRules()
"""Rules that allow everything: a site without robots.txt, or a crawl told to ignore it."""

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
    """Rules from the text of a robots.txt, for the crawler calling itself `user_agent`.

    Groups are read as RFC 9309 and Google's parser (github.com/google/robotstxt) read them, which
    protego alone does not: a group's User-agent lines end only at an Allow or Disallow line, so an
    unknown line (or a Sitemap, a Crawl-delay) between two User-agent lines leaves them in one group;
    a User-agent value names the agent up to its first character outside [a-zA-Z0-9_-] ("FOO BAR" names
    foo, "bot2/1.0" bot2); every group naming our agent counts, and the `*` groups count only when none does. protego
    then matches paths against the rules of those groups alone.
    """
    agent = product_token(user_agent)
    parser = Protego.parse(_applicable(text.removeprefix("\ufeff"), agent))
    return RobotsRules(parser=parser, agent=agent, sitemaps=tuple(parser.sitemaps))


_MAX_LINE = 2083 * 8 - 1
"""Bytes of a line that count, as in Google's parser; the rest of a longer line is ignored."""

_KINDS = (
    ("user-agent", ("user-agent", "useragent", "user agent")),
    ("allow", ("allow",)),
    ("disallow", ("disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw")),
    ("sitemap", ("sitemap", "site-map")),
)
"""Line names by the prefixes that spell them, misspellings included, in the order Google tries them."""

_NAME = re.compile(r"[a-zA-Z0-9_-]*")


def _applicable(text: str, agent: str) -> str:
    """The robots.txt that holds just what applies to `agent`: the rules of its groups under one
    `User-agent: *`, and every Sitemap line.

    A group is one or more User-agent lines and what follows until a User-agent line comes after an Allow
    or Disallow; lines outside any group are ignored. Groups naming `agent` are merged, and so are the
    `*` groups, which apply only when no group names `agent`. A group naming both is `agent`'s.
    """
    name = _agent_name(agent)
    named: list[str] = []
    anyone: list[str] = []
    sitemaps: list[str] = []
    in_named = in_anyone = saw_rule = ever_named = False
    for line in text.splitlines():
        directive = _directive(line)
        if directive is None:
            continue
        kind, value = directive
        if kind == "user-agent":
            if saw_rule:
                in_named = in_anyone = saw_rule = False
            if value[:1] == "*" and value[1:2].strip() == "":
                in_anyone = True
            elif name and _agent_name(value) == name:
                in_named = ever_named = True
        elif kind == "sitemap":
            sitemaps.append(f"Sitemap: {value}")
        elif in_named or in_anyone:
            saw_rule = saw_rule or kind in ("allow", "disallow")
            (named if in_named else anyone).append(f"{kind}: {value}")
    rules = named if ever_named else anyone
    return "\n".join((["User-agent: *", *rules] if rules else []) + sitemaps)


def _agent_name(value: str) -> str:
    """The product token a User-agent value names: its start up to the first character outside
    [a-zA-Z0-9_-], lower-cased ("" when it starts with another character). Google's parser stops at a digit
    too, which makes `bot2` name `bot` and match a crawler called bot1; the whole token names one agent."""
    match = _NAME.match(value)
    return match[0].lower() if match else ""


def _directive(line: str) -> tuple[str, str] | None:
    """(kind, value) of one robots.txt line, None for a blank line, a comment or no `name: value` shape.

    The kind is "user-agent", "allow", "disallow", "sitemap" or, for any other name, that name lower-cased.
    As in Google's parser, a name counts by its prefix ("Disallowed:" is a Disallow), and a line without a
    colon may use whitespace instead when it has exactly two words ("Disallow /x").
    """
    if len(line) > _MAX_LINE // 4:  # a shorter line cannot exceed the limit, even in four-byte characters
        line = line.encode("utf-8", "surrogatepass")[:_MAX_LINE].decode("utf-8", "ignore")
    line = line.partition("#")[0].strip()
    key, colon, value = line.partition(":")
    if not colon:
        words = line.split()
        if len(words) != 2:
            return None
        key, value = words
    key = key.strip().lower()
    if not key:
        return None
    kind = next((kind for kind, prefixes in _KINDS if key.startswith(prefixes)), key)
    return kind, value.strip()


@dataclass(frozen=True, slots=True)
class RobotsSource:
    """What fetching a robots.txt came to, before it is parsed for one agent: small, and shareable as is
    (the nodes of a crawl that spreads one site over many share one fetch)."""

    verdict: Literal["allow", "unreachable", "text"]
    text: str = ""

    def rules(self, user_agent: str) -> RobotsRules:
        """The rules for `user_agent`; for an unreachable robots.txt, `text` says why."""
        if self.verdict == "text":
            return parse_robots(self.text, user_agent)
        return ALLOW_ALL if self.verdict == "allow" else RobotsRules(unreachable=True, why=self.text)


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
        return RobotsSource("unreachable", "no answer" if outcome is None else outcome.error or "no answer")
    status = outcome.status
    if 200 <= status < 300:
        if outcome.error:
            # Cut by a timeout or a disconnect: the missing part may hold the Disallow that matters.
            return RobotsSource("unreachable", f"cut: {outcome.error}")
        return RobotsSource("text", _text(outcome))
    if status >= 500 or status == 429:
        return RobotsSource("unreachable", f"HTTP {status}")
    return _ALLOW


def rules_from_outcome(outcome: FetchOutcome | None, user_agent: str) -> RobotsRules:
    """Rules from the fetch of a robots.txt (None: it could not be fetched at all)."""
    return source_from_outcome(outcome).rules(user_agent)


async def fetch_robots(fetcher: Fetcher, origin: str, user_agent: str, keep: KeepResponse) -> RobotsRules:
    """Fetch and parse the robots.txt of `origin` (see `fetch_robots_source`)."""
    return (await fetch_robots_source(fetcher, origin, keep)).rules(user_agent)


async def fetch_robots_source(fetcher: Fetcher, origin: str, keep: KeepResponse) -> RobotsSource:
    """Fetch the robots.txt of `origin`, following up to 5 redirects; each response is handed to `keep`
    (the archive: it shows what the crawl was allowed).

    Never raises except on cancellation: every failure becomes a verdict (see the module docstring).
    """
    url = robots_url(origin)
    seen = {url}
    for _ in range(MAX_REDIRECTS + 1):
        outcome = await fetcher.fetch(url, any_type=True, max_size=ROBOTS_MAX_SIZE)
        keep(outcome)
        status = outcome.status
        if status is None or not 300 <= status < 400:
            source = source_from_outcome(outcome)
            if source.verdict == "unreachable":
                logger.info("robots.txt of %s unreachable: %s", origin, source.text)
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
