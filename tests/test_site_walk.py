"""A reference crawl of the live test site must equal the site's ground truth.

`reference_walk` is a small breadth-first crawler written here from the rules in `tests/sites/model.py`
(stdlib HTML parser, ada-url resolution, Protego for robots.txt); it fetches the site over HTTP, so it also
checks that the server sends what was generated.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import ada_url
import aiohttp
import pytest
from protego import Protego

from tests.sites import REASONS, Site, SiteServer
from webtrawl.config import BINARY_EXTENSIONS


class LinkParser(HTMLParser):
    """`<a href rel>`, the first `<base href>` and `<meta name=robots>` nofollow, as a browser reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool]] = []
        self.base: str | None = None
        self.nofollow = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        if tag == "a" and "href" in attr:
            self.links.append((attr["href"], "nofollow" in attr.get("rel", "").lower().split()))
        elif tag == "base" and "href" in attr and self.base is None:
            self.base = attr["href"]
        elif tag == "meta" and attr.get("name", "").lower() == "robots":
            self.nofollow |= "nofollow" in re.split(r"[\s,]+", attr.get("content", "").lower())


def parse(page_url: str, body: bytes) -> tuple[list[tuple[str, bool]], bool]:
    """(resolved URL without fragment, rel=nofollow) per link, and whether the page says nofollow."""
    parser = LinkParser()
    parser.feed(body.decode())
    base = ada_url.join_url(page_url, parser.base) if parser.base else page_url
    return [(ada_url.join_url(base, href).split("#")[0], rel) for href, rel in parser.links], parser.nofollow


@dataclass
class Walk:
    fetched: dict[str, int] = field(default_factory=dict)
    status: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, set[str]] = field(default_factory=dict)
    refused: set[tuple[str, str, str]] = field(default_factory=set)
    wrong_bodies: list[str] = field(default_factory=list)


async def reference_walk(
    server: SiteServer,
    *,
    max_depth: int | None,
    respect_robots: bool = True,
    follow_nofollow: bool = False,
    max_repeated_segments: int = 3,
) -> Walk:
    """Crawl the live site level by level; a redirect target joins the level of its source."""
    site, walk = server.site, Walk()
    async with aiohttp.ClientSession() as session:
        async with session.get(site.url("/robots.txt")) as response:
            robots = Protego.parse(await response.text())

        def refusal(url: str, depth: int) -> str | None:
            parts = ada_url.URL(url)
            segments = Counter(s for s in parts.pathname.split("/") if s)
            extension = parts.pathname.rsplit("/", 1)[-1].rpartition(".")[2].lower()
            checks = {
                "scheme": parts.protocol not in ("http:", "https:"),
                "scope": parts.host != site.host,
                "binary": extension in BINARY_EXTENSIONS,
                "repeated-segments": max(segments.values(), default=0) > max_repeated_segments,
                "robots": respect_robots and not robots.can_fetch(url, "webtrawl"),
                "depth": max_depth is not None and depth > max_depth,
            }
            return next((reason for reason, refused in checks.items() if refused), None)

        async def fetch(path: str) -> tuple[str, list[tuple[str, bool]], bool, bool]:
            """(path, links found, whether they are all nofollow, whether it is a redirect)."""
            async with session.get(site.url(path), allow_redirects=False) as response:
                body = await response.read()
                walk.status[path] = response.status
                if body != site.route(path).body:
                    walk.wrong_bodies.append(path)
                if "Location" in response.headers:
                    location = ada_url.join_url(site.url(path), response.headers["Location"])
                    return path, [(location, False)], False, True
                if response.content_type == "text/html" and response.status == 200:
                    links, nofollow = parse(site.url(path), body)
                    return path, links, nofollow and not follow_nofollow, False
                return path, [], False, False

        depth, level = 0, {"/": None}
        while level:
            upcoming: dict[str, None] = {}
            while level:
                walk.fetched.update(dict.fromkeys(level, depth))
                found = await asyncio.gather(*(fetch(path) for path in level))
                level = {}
                for path, links, nofollow, redirect in found:
                    for url, rel in links:
                        followed = not nofollow and (follow_nofollow or not rel)
                        reason = refusal(url, depth + (not redirect)) if followed else "nofollow"
                        if reason:
                            walk.reasons.setdefault(url, set()).add(reason)
                            walk.refused.add((reason, path, url))
                        elif (target := "/" + url.split("/", 3)[3]) not in walk.fetched:
                            (level if redirect else upcoming)[target] = None
            level = {path: None for path in upcoming if path not in walk.fetched}
            depth += 1
    return walk


def dropped(walk: Walk, site: Site) -> dict[str, frozenset[str]]:
    """The walk's unfetched URLs by reason, a URL under its earliest reason in `REASONS` order."""
    groups: dict[str, set[str]] = {reason: set() for reason in REASONS}
    for url, reasons in walk.reasons.items():
        if not (url.startswith(site.origin + "/") and url[len(site.origin) :] in walk.fetched):
            groups[min(reasons, key=REASONS.index)].add(url)
    return {reason: frozenset(urls) for reason, urls in groups.items()}


RULES = {
    "default": {},
    "follow-nofollow": {"follow_nofollow": True},
    "ignore-robots": {"respect_robots": False},
    "max-depth-3": {"max_depth": 3},
    "max-depth-0": {"max_depth": 0},
    "one-repeat": {"max_repeated_segments": 1},
}


@pytest.mark.parametrize("rules", RULES.values(), ids=RULES.keys())
async def test_a_reference_crawl_of_the_live_site_matches_the_ground_truth(rules: dict[str, Any]) -> None:
    async with SiteServer(pages=120, seed=7) as server:
        rules = {"max_depth": server.site.deepest} | rules
        walk = await reference_walk(server, **rules)
        expected = server.site.expect(**rules)
    assert walk.wrong_bodies == []
    assert walk.fetched == expected.fetched
    assert walk.status == expected.status
    assert dropped(walk, server.site) == expected.dropped
    assert Counter(reason for reason, _, _ in walk.refused) == +Counter(expected.dropped_links)


async def test_the_default_site_served_by_the_fixture_matches_too(site_server: SiteServer) -> None:
    site = site_server.site
    walk = await reference_walk(site_server, max_depth=site.deepest)
    expected = site.expect(max_depth=site.deepest)
    assert (walk.fetched, walk.status, walk.wrong_bodies) == (expected.fetched, expected.status, [])
    assert dropped(walk, site) == expected.dropped


SHAPES = [(10, 0), (11, 1), (30, 2), (300, 0), (1000, 4)]


@pytest.mark.parametrize(("pages", "seed"), SHAPES)
def test_written_links_resolve_to_the_urls_the_ground_truth_follows(pages: int, seed: int) -> None:
    site = Site(pages=pages, seed=seed)
    for path, route in site.routes.items():
        if route.content_type.startswith("text/html") and route.status == 200:
            links, nofollow = parse(site.url(path), route.body)
            assert links == [(link.url, link.nofollow) for link in route.links], path
            assert nofollow == route.meta_nofollow
        if route.redirect:
            assert ada_url.join_url(site.url(path), route.redirect.href) == route.redirect.url
