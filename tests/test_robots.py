"""robots.txt rules: parsing (protego), Google's status-code rules, and fetching with redirects."""

from __future__ import annotations

import gzip
import socket
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

import brotli
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from webtrawl.config import DEFAULT_USER_AGENT, FetchConfig
from webtrawl.fetch.fetcher import Fetcher
from webtrawl.fetch.robots import (
    ALLOW_ALL,
    ROBOTS_MAX_SIZE,
    RobotsRules,
    fetch_robots,
    parse_robots,
    product_token,
    robots_url,
    rules_from_outcome,
)
from webtrawl.models import FetchOutcome

UA = DEFAULT_USER_AGENT  # "webtrawl/<version> (+https://…)": its product token is "webtrawl"
SITE = "http://example.org"

GROUPS = """
User-agent: *
Disallow: /
Crawl-delay: 9

User-agent: WebTrawl
Disallow: /secret
Allow: /secret/open
Crawl-delay: 1.5

Sitemap: http://example.org/sitemap.xml
"""


@pytest.mark.parametrize(
    ("robots", "path", "allowed"),
    [
        # the longest matching rule wins; on a tie, Allow wins
        ("User-agent: *\nDisallow: /a\nAllow: /a/b", "/a/x", False),
        ("User-agent: *\nDisallow: /a\nAllow: /a/b", "/a/b/c", True),
        ("User-agent: *\nAllow: /a\nDisallow: /a/b", "/a/b", False),
        ("User-agent: *\nAllow: /p\nDisallow: /p", "/p", True),
        ("User-agent: *\nDisallow: /p\nAllow: /p", "/p", True),
        ("User-agent: *\nDisallow: /", "/", False),
        ("User-agent: *\nDisallow: /", "/anything?at=all", False),
        ("User-agent: *\nDisallow:", "/x", True),  # an empty Disallow allows everything
        ("User-agent: *\nDisallow: /private", "/private-not", False),  # a plain prefix
        ("User-agent: *\nDisallow: /private/", "/private", True),
        ("User-agent: *\nDisallow: /Dir", "/dir", True),  # paths are case-sensitive
        # wildcards and end anchors
        ("User-agent: *\nDisallow: /*.pdf$", "/docs/a.pdf", False),
        ("User-agent: *\nDisallow: /*.pdf$", "/docs/a.pdf?page=2", True),
        ("User-agent: *\nDisallow: /*.pdf", "/docs/a.pdf?page=2", False),
        ("User-agent: *\nDisallow: /*?sid=", "/cart?sid=42", False),
        ("User-agent: *\nDisallow: /*?sid=", "/cart?id=42", True),
        ("User-agent: *\nDisallow: /a/*/edit", "/a/b/c/edit", False),
        ("User-agent: *\nDisallow: /a/*/edit", "/a/edit", True),
        ("User-agent: *\nDisallow: /$", "/", False),
        ("User-agent: *\nDisallow: /$", "/page", True),
        ("User-agent: *\nDisallow: /*\nAllow: /*.html$", "/x.html", True),
        ("User-agent: *\nDisallow: /*\nAllow: /*.html$", "/x.htm", False),
        # percent-encoding compares equal either way
        ("User-agent: *\nDisallow: /caf%C3%A9", "/café", False),
        ("User-agent: *\nDisallow: /café", "/caf%C3%A9", False),
        # agent-specific groups: ours beats *, others are ignored
        (GROUPS, "/page", True),
        (GROUPS, "/secret/x", False),
        (GROUPS, "/secret/open/x", True),
        ("User-agent: otherbot\nDisallow: /", "/x", True),
        ("User-agent: webtrawl-pro\nDisallow: /", "/x", True),
        ("User-agent: otherbot\nUser-agent: webtrawl\nDisallow: /shared", "/shared", False),
        ("User-agent: *\nDisallow: /a\n\nUser-agent: webtrawl\nDisallow: /b", "/a", True),
        # only Allow and Disallow end a group's User-agent lines: other lines leave them in one group
        ("User-agent: webtrawl\nInvalid-Unknown-Line: x\nUser-agent: *\nDisallow: /", "/x", False),
        ("User-agent: webtrawl\nCrawl-delay: 2\nUser-agent: *\nDisallow: /", "/x", False),
        ("User-agent: webtrawl\nSitemap: /s.xml\nUser-agent: *\nDisallow: /", "/x", False),
        # a User-agent value names the agent up to its first character outside [a-zA-Z0-9_-]
        ("User-Agent: WEBTRAWL BOT\nDisallow: /", "/x", False),
        ("User-agent: webtrawl/2.0\nDisallow: /", "/x", False),
        ("User-agent: web\nAllow: /\nUser-agent: *\nDisallow: /", "/x", False),  # not a prefix
        ("User-agent: *bot\nDisallow: /", "/x", True),
        # what is not a robots.txt allows everything
        ("", "/x", True),
        ("<!doctype html><html><body><h1>Welcome</h1>Disallow: /</body></html>", "/x", True),
        ("\x00\x01\x02\ufffd\ufffd binary junk \x7f", "/x", True),
        ("Disallow: /no-group-above", "/no-group-above", True),
        ("\ufeffUser-agent: *\nDisallow: /bom", "/bom", False),
        ("User-agent: *\r\nDisallow: /crlf\r\n", "/crlf", False),
        ("User-agent: * # all\nDisallow: /c # comment", "/c", False),
        ("user-agent: *\ndisallow: /lower", "/lower", False),
        ("User-agent: *\nDisallow: /x\nDisallow: /robots.txt", "/robots.txt", True),
    ],
)
def test_allowed(robots: str, path: str, allowed: bool) -> None:
    assert parse_robots(robots, UA).allowed(SITE + path) is allowed


@pytest.mark.parametrize(
    ("agent", "robots", "path", "allowed"),
    [
        # another bot's group, whose name differs from ours only after a digit or by one: the * group applies
        ("bot1/1.0", "User-agent: bot2\nDisallow: /\n\nUser-agent: *\nDisallow: /x", "/y", True),
        ("bot1/1.0", "User-agent: bot2\nDisallow: /\n\nUser-agent: *\nDisallow: /x", "/x", False),
        ("mybot3/2.0", "User-agent: mybot\nDisallow: /\n\nUser-agent: *\nDisallow: /x", "/y", True),
        ("mybot3/2.0", "User-agent: mybot\nDisallow: /\n\nUser-agent: *\nDisallow: /x", "/x", False),
        # our own group, named with its digits
        ("bot1/1.0", "User-agent: bot1\nDisallow: /\n\nUser-agent: *\nAllow: /", "/y", False),
        ("mybot3/2.0 (+https://example.org/bot)", "User-agent: MyBot3/9\nDisallow: /y", "/y", False),
    ],
)
def test_a_group_applies_to_the_agent_its_whole_product_token_names(
    agent: str, robots: str, path: str, allowed: bool
) -> None:
    assert parse_robots(robots, agent).allowed(SITE + path) is allowed


@pytest.mark.parametrize(
    ("robots", "delay"),
    [
        (GROUPS, 1.5),
        ("User-agent: *\nCrawl-delay: 4", 4.0),
        ("User-agent: *\nCrawl-delay: soon", None),
        ("User-agent: *\nCrawl-delay: -1", None),
        ("User-agent: *\nDisallow: /x", None),
        ("User-agent: otherbot\nCrawl-delay: 30", None),
        ("User-agent: webtrawl\nCrawl-delay: 2\nUser-agent: otherbot\nDisallow: /", 2.0),
        ("User-agent: *\nCrawl-delay: 5\nUser-agent: webtrawl\nDisallow: /x", None),
        ("", None),
    ],
)
def test_crawl_delay(robots: str, delay: float | None) -> None:
    assert parse_robots(robots, UA).crawl_delay == delay


def test_sitemaps() -> None:
    rules = parse_robots(GROUPS + "Sitemap: /relative.xml\n", UA)
    assert rules.sitemaps == ("http://example.org/sitemap.xml", "/relative.xml")


@pytest.mark.parametrize(
    ("user_agent", "token"),
    [
        (UA, "webtrawl"),
        ("WebTrawl/2.0", "webtrawl"),
        ("mybot", "mybot"),
        ("  spaced/1.0  (x)", "spaced"),
        ("Mozilla/5.0 (compatible; Foo/1.0)", "mozilla"),
        ("", "*"),
    ],
)
def test_product_token(user_agent: str, token: str) -> None:
    assert product_token(user_agent) == token


@pytest.mark.parametrize(
    ("origin", "url"),
    [
        ("http://example.org", "http://example.org/robots.txt"),
        ("https://example.org:8443", "https://example.org:8443/robots.txt"),
        ("http://example.org/", "http://example.org/robots.txt"),
    ],
)
def test_robots_url(origin: str, url: str) -> None:
    assert robots_url(origin) == url


def test_allow_all_and_unreachable() -> None:
    assert ALLOW_ALL.allowed(SITE + "/x") and not ALLOW_ALL.unreachable
    assert ALLOW_ALL.crawl_delay is None
    unreachable = rules_from_outcome(None, UA)
    assert unreachable.unreachable and not unreachable.allowed(SITE + "/x")


# --- rules from a fetch outcome --------------------------------------------------------------------------

DISALLOW_X = b"User-agent: *\nDisallow: /x\n"
LONG_GZIP = gzip.compress(DISALLOW_X + b"".join(b"# comment %d\n" % i for i in range(5000)))


def _outcome(
    status: int | None,
    body: bytes = b"",
    *,
    headers: list[tuple[str, str]] | None = None,
    truncated: str | None = None,
    error: str | None = None,
) -> FetchOutcome:
    return FetchOutcome(
        url=SITE + "/robots.txt",
        started_at=0.0,
        status=status,
        body=body,
        headers=headers or [],
        truncated=truncated,
        error=error,
    )


def _encoded(encoding: str, body: bytes) -> FetchOutcome:
    return _outcome(200, body, headers=[("Content-Encoding", encoding)])


RULES, ALLOW, DOWN = "rules", "allow all", "unreachable"
"""What came out: DISALLOW_X obeyed (/x no, /y yes), everything allowed, or everything refused for now."""


def _verdict(rules: RobotsRules, origin: str) -> str:
    x, y = rules.allowed(origin + "/x"), rules.allowed(origin + "/y")
    if rules.unreachable:
        assert not x and not y
        return DOWN
    return ALLOW if x else RULES if y else "?"


@pytest.mark.parametrize(
    ("outcome", "verdict"),
    [
        pytest.param(_outcome(200, DISALLOW_X), RULES, id="200"),
        pytest.param(_outcome(206, DISALLOW_X), RULES, id="206"),
        pytest.param(_outcome(200, b""), ALLOW, id="200-empty"),
        pytest.param(_outcome(200, b"# \xff\xfe\xc3\n" + DISALLOW_X), RULES, id="200-bad-utf8"),
        pytest.param(_encoded("gzip", gzip.compress(DISALLOW_X)), RULES, id="gzip"),
        pytest.param(_encoded("deflate", zlib.compress(DISALLOW_X)), RULES, id="deflate"),
        pytest.param(_encoded("deflate", zlib.compress(DISALLOW_X)[2:-4]), RULES, id="raw-deflate"),
        pytest.param(_encoded("br", brotli.compress(DISALLOW_X)), RULES, id="brotli"),
        pytest.param(_encoded("gzip", b"not gzip at all"), ALLOW, id="corrupt-gzip"),
        pytest.param(_encoded("gzip", LONG_GZIP[: len(LONG_GZIP) // 2]), RULES, id="cut-gzip"),
        pytest.param(_outcome(200, DISALLOW_X[:20], truncated="time", error="read timeout"), DOWN, id="cut"),
        pytest.param(_outcome(301, headers=[("Location", "/elsewhere")]), ALLOW, id="3xx-unfollowed"),
        pytest.param(_outcome(304), ALLOW, id="304"),
        pytest.param(_outcome(401), ALLOW, id="401"),
        pytest.param(_outcome(403), ALLOW, id="403"),
        pytest.param(_outcome(404, b"Disallow: /x"), ALLOW, id="404"),
        pytest.param(_outcome(410), ALLOW, id="410"),
        pytest.param(_outcome(429), DOWN, id="429"),
        pytest.param(_outcome(500, DISALLOW_X), DOWN, id="500"),
        pytest.param(_outcome(503), DOWN, id="503"),
        pytest.param(_outcome(None, error="connection refused"), DOWN, id="network-error"),
    ],
)
def test_rules_from_outcome(outcome: FetchOutcome, verdict: str) -> None:
    assert _verdict(rules_from_outcome(outcome, UA), SITE) == verdict


def test_truncated_body_still_parses_its_head() -> None:
    body = DISALLOW_X + b"# padding\n" * (ROBOTS_MAX_SIZE // 10)
    rules = rules_from_outcome(_outcome(200, body[:ROBOTS_MAX_SIZE], truncated="length"), UA)
    assert not rules.allowed(SITE + "/x")


def test_decompressed_body_is_bounded() -> None:
    late = b"# padding\n" * (ROBOTS_MAX_SIZE // 10) + b"User-agent: *\nDisallow: /late\n"
    rules = rules_from_outcome(_encoded("gzip", gzip.compress(DISALLOW_X + late)), UA)
    assert not rules.allowed(SITE + "/x")
    assert rules.allowed(SITE + "/late")


# --- fetch_robots against a server --------------------------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ServeRoutes = Callable[[dict[str, Handler]], Awaitable[str]]


def text(body: bytes | str, *, status: int = 200, content_type: str = "text/plain") -> Handler:
    async def handle(_request: web.Request) -> web.Response:
        data = body.encode() if isinstance(body, str) else body
        return web.Response(status=status, body=data, headers={"Content-Type": content_type})

    return handle


def redirect(location: str, status: int = 301) -> Handler:
    async def handle(_request: web.Request) -> web.Response:
        return web.Response(status=status, headers={"Location": location})

    return handle


@pytest.fixture
async def serve() -> AsyncIterator[ServeRoutes]:
    """Serve a set of routes on 127.0.0.1 and give back the site's origin."""
    servers: list[TestServer] = []

    async def start(routes: dict[str, Handler]) -> str:
        app = web.Application()
        for path, handler in routes.items():
            app.router.add_get(path, handler)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return f"http://127.0.0.1:{server.port}"

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    config = FetchConfig(connect_timeout=0.3, read_timeout=0.3, total_timeout=1.0, block_private=False)
    async with Fetcher(config, concurrency=4) as fetcher:
        yield fetcher


HUGE = "User-agent: *\nDisallow: /x\n" + "# padding\n" * 60_000 + "Disallow: /late\n"
CHAIN = {f"/r{i}": redirect(f"/r{i + 1}") for i in range(1, 5)}  # /r1 → /r2 → … → /r5


@pytest.mark.parametrize(
    ("routes", "verdict"),
    [
        pytest.param({"/robots.txt": text(DISALLOW_X)}, RULES, id="plain"),
        pytest.param({"/robots.txt": text(DISALLOW_X, content_type="image/png")}, RULES, id="any-type"),
        pytest.param({}, ALLOW, id="404"),
        pytest.param({"/robots.txt": text("oops", status=500)}, DOWN, id="500"),
        pytest.param({"/robots.txt": text("slow down", status=429)}, DOWN, id="429"),
        pytest.param(
            {"/robots.txt": redirect("/real/robots.txt"), "/real/robots.txt": text(DISALLOW_X)},
            RULES,
            id="redirect-to-another-path",
        ),
        pytest.param(
            {"/robots.txt": redirect("/r1", 302), **CHAIN, "/r5": text(DISALLOW_X)},
            RULES,
            id="five-redirects-followed",
        ),
        pytest.param(
            {"/robots.txt": redirect("/r1"), **CHAIN, "/r5": redirect("/r6"), "/r6": text(DISALLOW_X)},
            ALLOW,
            id="six-redirects-too-many",
        ),
        pytest.param({"/robots.txt": redirect("/a"), "/a": redirect("/robots.txt")}, ALLOW, id="loop"),
        pytest.param({"/robots.txt": redirect("")}, ALLOW, id="redirect-without-location"),
        pytest.param({"/robots.txt": redirect("ftp://example.org/robots.txt")}, ALLOW, id="redirect-to-ftp"),
        pytest.param({"/robots.txt": redirect("http://[oops/")}, ALLOW, id="redirect-to-bad-url"),
        pytest.param({"/robots.txt": redirect("/gone"), "/gone": text("", status=503)}, DOWN, id="to-5xx"),
        pytest.param(
            {"/robots.txt": text("<html><body>Hi! Disallow: /x</body></html>", content_type="text/html")},
            ALLOW,
            id="html-body",
        ),
        pytest.param({"/robots.txt": text(gzip.compress(DISALLOW_X))}, ALLOW, id="gzip-without-header"),
    ],
)
async def test_fetch_robots(serve: ServeRoutes, fetcher: Fetcher, routes: dict[str, Handler], verdict: str) -> None:
    origin = await serve(routes)
    kept: list[FetchOutcome] = []
    assert _verdict(await fetch_robots(fetcher, origin, UA, kept.append), origin) == verdict
    assert kept and kept[0].url == origin + "/robots.txt"  # every response goes to the archive, redirects too
    assert len(kept) == len({outcome.url for outcome in kept}) <= 6


def ignore(_outcome: FetchOutcome) -> None:
    """Where these tests send the responses a crawl would archive."""


async def test_fetch_robots_huge_file_is_cut(serve: ServeRoutes, fetcher: Fetcher) -> None:
    origin = await serve({"/robots.txt": text(HUGE)})
    rules = await fetch_robots(fetcher, origin, UA, ignore)
    assert not rules.allowed(origin + "/x")
    assert rules.allowed(origin + "/late")  # beyond the first 500 KiB: ignored


async def test_fetch_robots_gzip_encoded(serve: ServeRoutes, fetcher: Fetcher) -> None:
    async def gzipped(_request: web.Request) -> web.Response:
        body = gzip.compress(DISALLOW_X)
        return web.Response(body=body, headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})

    origin = await serve({"/robots.txt": gzipped})
    assert not (await fetch_robots(fetcher, origin, UA, ignore)).allowed(origin + "/x")


async def test_fetch_robots_server_down(fetcher: Fetcher) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rules = await fetch_robots(fetcher, f"http://127.0.0.1:{port}", UA, ignore)
    assert rules.unreachable and not rules.allowed(f"http://127.0.0.1:{port}/")


def test_rules_are_immutable() -> None:
    rules = parse_robots("User-agent: *\nDisallow: /x", UA)
    with pytest.raises(AttributeError):
        rules.unreachable = True  # type: ignore[misc]
    assert isinstance(rules, RobotsRules)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["noindex"], {"noindex"}),
        (["noindex, nofollow"], {"noindex", "nofollow"}),
        (["NONE"], {"noindex", "nofollow"}),
        (["googlebot: noindex"], set()),
        (["webtrawl: nofollow"], {"nofollow"}),
        (["unavailable_after: 25 Jun 2010 15:00:00 PST"], {"unavailable_after: 25 jun 2010 15:00:00 pst"}),
        (["max-snippet: 20, noindex"], {"max-snippet: 20", "noindex"}),
        (["googlebot: noindex", "nofollow"], {"nofollow"}),
        ([], set()),
    ],
)
def test_x_robots_tag_directives(values: list[str], expected: set[str]) -> None:
    from webtrawl.fetch.robots import tag_directives

    assert tag_directives(values, "webtrawl/0.1 (+https://example.org/)") == expected
