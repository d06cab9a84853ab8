"""Scope: which URLs are in, and the reason given for each one that is not."""

from __future__ import annotations

from typing import Any

import pytest

from webtrawl.config import ScopeConfig
from webtrawl.scope import DEPTH_ONLY_REASONS, VERDICTS, Scope, is_requisite_path
from webtrawl.urls import normalize


def make(*seeds: str, **settings: Any) -> Scope:
    return Scope(ScopeConfig(**settings), [normalize(seed) for seed in seeds])


def verdict(scope: Scope, url: str, depth: int = 1) -> str | None:
    return scope.check(normalize(url), depth)


# (seed, url, expected) per mode
MODES = {
    "host": [
        ("http://example.com/", "http://example.com/a", None),
        ("http://example.com/", "https://example.com/a", None),
        ("http://example.com/", "http://user:pw@example.com/a", None),
        ("http://example.com/", "http://EXAMPLE.com:80/a", None),
        ("http://example.com/", "http://www.example.com/", "out-of-scope"),
        ("http://example.com/", "http://example.com:8080/", "out-of-scope"),
        ("http://example.com/", "http://other.org/", "out-of-scope"),
        ("http://example.com/", "http://example.com.evil.org/", "out-of-scope"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/x", None),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8081/x", "out-of-scope"),
        ("http://[::1]:8080/", "http://[::1]:8080/x", None),
    ],
    "domain": [
        ("http://www.example.com/", "http://example.com/", None),
        ("http://www.example.com/", "http://www.example.com/a", None),
        ("http://example.com/", "http://a.example.com/", None),
        ("http://example.com/", "http://a.b.example.com/x", None),
        ("http://example.com/", "https://a.example.com:8443/x", None),
        ("http://example.com/", "http://notexample.com/", "out-of-scope"),
        ("http://example.com/", "http://example.com.evil.org/", "out-of-scope"),
        ("http://example.com/", "http://com/", "out-of-scope"),
        ("http://a.example.com/", "http://example.com/", "out-of-scope"),
        ("http://a.example.com/", "http://b.a.example.com/", None),
        ("http://[::1]:8080/", "http://[::1]:9090/", None),
    ],
    "prefix": [
        ("http://example.com/docs/index.html", "http://example.com/docs/", None),
        ("http://example.com/docs/index.html", "http://example.com/docs/a/b", None),
        ("http://example.com/docs/index.html", "https://example.com/docs/x?y=1", None),
        ("http://example.com/docs/index.html", "http://example.com/docsx", "out-of-scope"),
        ("http://example.com/docs/index.html", "http://example.com/docs", "out-of-scope"),
        ("http://example.com/docs/index.html", "http://example.com/", "out-of-scope"),
        ("http://example.com/docs/index.html", "http://example.com/other/docs/", "out-of-scope"),
        ("http://example.com/docs/index.html", "http://other.org/docs/", "out-of-scope"),
        ("http://example.com/docs", "http://example.com/anything", None),
        ("http://example.com/a/b?next=/c/", "http://example.com/a/x", None),
        ("http://example.com/a/b?next=/c/", "http://example.com/c/", "out-of-scope"),
    ],
    "any": [
        ("http://example.com/", "http://example.com/a", None),
        ("http://example.com/", "https://anything.org:8443/x", None),
    ],
}


@pytest.mark.parametrize(
    ("mode", "seed", "url", "expected"),
    [(mode, *case) for mode, cases in MODES.items() for case in cases],
)
def test_modes(mode: str, seed: str, url: str, expected: str | None) -> None:
    assert verdict(make(seed, mode=mode), url) == expected


def test_several_seeds_each_bring_their_scope() -> None:
    scope = make("http://a.example/docs/", "http://a.example/blog/", "http://b.example/", mode="prefix")
    assert verdict(scope, "http://a.example/docs/x") is None
    assert verdict(scope, "http://a.example/blog/x") is None
    assert verdict(scope, "http://b.example/anything") is None
    assert verdict(scope, "http://a.example/shop/") == "out-of-scope"


SEED = "http://example.com/"

# (settings, url, depth, expected)
RULES = [
    # url-too-long: the normalized URL's length
    ({"max_url_length": 25}, "http://example.com/123456", 1, None),
    ({"max_url_length": 25}, "http://example.com/1234567", 1, "url-too-long"),
    ({"max_url_length": 25}, "http://other.org/123456789", 9, "url-too-long"),
    # too-deep: depth beyond max_depth; no limit by default
    ({"max_depth": 2}, "http://example.com/a", 2, None),
    ({"max_depth": 2}, "http://example.com/a", 3, "too-deep"),
    ({"max_depth": 0}, "http://example.com/a", 1, "too-deep"),
    ({"max_depth": 0}, "http://example.com/", 0, None),
    ({}, "http://example.com/a", 10_000, None),
    ({"max_depth": 2}, "http://other.org/", 3, "out-of-scope"),  # a reason of its own beats depth
    # deny / allow: searched in the whole normalized URL
    ({"deny": (r"/private/",)}, "http://example.com/private/x", 1, "deny-pattern"),
    ({"deny": (r"[?&]utm_source=",)}, "http://example.com/x?a=1&utm_source=9", 1, "deny-pattern"),
    ({"deny": (r"/private/", r"\.php$")}, "http://example.com/index.php", 1, "deny-pattern"),
    ({"deny": (r"/private/",)}, "http://example.com/public/x", 1, None),
    ({"allow": (r"/blog/",)}, "http://example.com/about", 1, "not-allowed"),
    ({"allow": (r"/blog/", r"/news/")}, "http://example.com/news/1", 1, None),
    ({"allow": (r"/blog/",), "deny": (r"draft",)}, "http://example.com/blog/draft", 1, "deny-pattern"),
    ({"deny": (r"other",)}, "http://other.org/", 1, "out-of-scope"),
    # too-many-query-params: non-empty parameters
    ({}, "http://example.com/s?" + "&".join(f"p{n}=1" for n in range(10)), 1, None),
    ({}, "http://example.com/s?" + "&".join(f"p{n}=1" for n in range(11)), 1, "too-many-query-params"),
    ({}, "http://example.com/s?a=1&&&&&&&&&&&&&&&b=2", 1, None),
    ({"max_query_params": 0}, "http://example.com/s?a", 1, "too-many-query-params"),
    ({"max_query_params": 0}, "http://example.com/s?&", 1, None),
    ({"max_query_params": 0}, "http://example.com/s", 1, None),
    ({"max_query_params": 2}, "http://example.com/s?a=1&b=2&c=3", 1, "too-many-query-params"),
    # repeated-path-segments: the a/b/a/b/a/b/a trap
    ({}, "http://example.com/a/b/a/b/a/b/a", 1, "repeated-path-segments"),
    ({}, "http://example.com/a/b/a/b/a/b/a/", 1, "repeated-path-segments"),
    ({}, "http://example.com/a/b/a/b/a/b", 1, None),
    ({}, "http://example.com/x/x/x/", 1, None),
    ({}, "http://example.com/x/x/x/x", 1, "repeated-path-segments"),
    ({}, "http://example.com/a//b//c//d//e", 1, "repeated-path-segments"),
    ({}, "http://example.com/a/b/a?a/a/a/a", 1, None),
    ({"max_repeated_segments": 1}, "http://example.com/a/b/a", 1, "repeated-path-segments"),
    ({"max_repeated_segments": 1}, "http://example.com/a/b/c/", 1, None),
    # calendar traps: endless next-month links
    ({}, "http://example.com/cal/2024/01/2024/02/2024/03/2024/04", 1, "repeated-path-segments"),
    (
        {},
        "http://example.com/calendar?y=2024&m=1&d=1&view=week&tz=utc&lang=en&f=1&s=2&p=3&q=4&r=5",
        1,
        "too-many-query-params",
    ),
    ({"max_depth": 5}, "http://example.com/calendar?month=2031-07", 6, "too-deep"),
    # meaningless-symbols: only when set; last segment, after percent-decoding
    ({}, "http://example.com/!!!!!!!!!!", 1, None),
    ({"max_meaningless_symbols": 3}, "http://example.com/a!b!c!d", 1, None),
    ({"max_meaningless_symbols": 3}, "http://example.com/a!b!c!d!e", 1, "meaningless-symbols"),
    ({"max_meaningless_symbols": 3}, "http://example.com/%21%21%21%21", 1, "meaningless-symbols"),
    ({"max_meaningless_symbols": 3}, "http://example.com/a$b(c)d$", 1, "meaningless-symbols"),
    ({"max_meaningless_symbols": 0}, "http://example.com/caf%C3%A9-%C3%BC_x.y~z", 1, None),
    ({"max_meaningless_symbols": 0}, "http://example.com/!!!!/ok", 1, None),
    ({"max_meaningless_symbols": 0}, "http://example.com/ok?a=!!!!", 1, None),
    # binary-extension: the last segment's extension, any case
    ({}, "http://example.com/photo.JPG", 1, "binary-extension"),
    ({}, "http://example.com/docs/file.pdf", 1, "binary-extension"),
    ({}, "http://example.com/a.tar.gz", 1, "binary-extension"),
    ({}, "http://example.com/style.css?v=3", 1, "binary-extension"),
    ({}, "http://example.com/page.html", 1, None),
    ({}, "http://example.com/downloads.zip/page", 1, None),
    ({}, "http://example.com/get?file=a.jpg", 1, None),
    ({}, "http://example.com/v1.2", 1, None),
    ({"page_requisites": True}, "http://example.com/style.css", 1, None),
    ({"page_requisites": True}, "http://example.com/logo.png", 1, None),
    ({"page_requisites": True}, "http://example.com/archive.zip", 1, "binary-extension"),
    ({"page_requisites": True}, "http://example.com/song.mp3", 1, "binary-extension"),
]


@pytest.mark.parametrize(("settings", "url", "depth", "expected"), RULES)
def test_rules(settings: dict[str, Any], url: str, depth: int, expected: str | None) -> None:
    assert verdict(make(SEED, **settings), url, depth) == expected


STRICT = {
    "max_url_length": 60,
    "max_depth": 3,
    "deny": (r"/private/",),
    "max_query_params": 2,
    "max_meaningless_symbols": 2,
}


@pytest.mark.parametrize(
    "url",
    [
        "http://other.org/",
        "http://example.com/private/",
        "http://example.com/s?a=1&b=2&c=3",
        "http://example.com/a/a/a/a",
        "http://example.com/a!b!c!d",
        "http://example.com/x.zip",
        "http://example.com/" + "x" * 60,
    ],
)
def test_only_depth_reasons_depend_on_depth(url: str) -> None:
    """A URL refused for another reason is refused at every depth, so it may be remembered as seen."""
    scope = make(SEED, **STRICT)
    reason = verdict(scope, url, 0)
    assert reason is not None and reason not in DEPTH_ONLY_REASONS
    assert {verdict(scope, url, depth) for depth in range(4)} == {reason}
    assert verdict(scope, url, 4) in {reason, *DEPTH_ONLY_REASONS}


def test_depth_only_reasons() -> None:
    assert verdict(make(SEED, max_depth=1), "http://example.com/x", 2) in DEPTH_ONLY_REASONS


def test_a_url_judged_too_deep_is_in_scope_found_shallower() -> None:
    scope = make(SEED, max_depth=1)
    assert verdict(scope, "http://example.com/x", 2) == "too-deep"
    assert verdict(scope, "http://example.com/x", 1) is None
    assert verdict(scope, "http://example.com/x", 2) == "too-deep"


def test_verdicts_hold_past_the_memory_of_them() -> None:
    """More URLs than `Scope` remembers verdicts of: each keeps its own verdict, judged again or not."""
    scope = make(SEED)
    urls = [f"http://{host}.com/{n}" for n in range(VERDICTS + 10) for host in ("example", "other")]
    expected = [None, "out-of-scope"] * (VERDICTS + 10)
    assert [verdict(scope, url) for url in urls] == expected
    assert [verdict(scope, url) for url in reversed(urls)] == expected[::-1]


def test_add_host_in_host_mode() -> None:
    scope = make(SEED)
    assert scope.hosts == frozenset({"example.com"})
    assert verdict(scope, "https://www.example.com/x") == "out-of-scope"
    scope.add_host("www.example.com")
    assert verdict(scope, "https://www.example.com/x") is None
    assert scope.hosts == frozenset({"example.com", "www.example.com"})


def test_add_host_in_domain_mode() -> None:
    scope = make(SEED, mode="domain")
    assert verdict(scope, "http://a.other.org/") == "out-of-scope"
    scope.add_host("www.other.org:8080")
    assert verdict(scope, "http://a.other.org/") is None
    assert verdict(scope, "http://other.org/") is None
    assert verdict(scope, "http://notother.org/") == "out-of-scope"


def test_add_host_in_prefix_mode_carries_the_seed_prefixes() -> None:
    scope = make("http://example.com/docs/", mode="prefix")
    scope.add_host("docs.example.org")
    assert verdict(scope, "https://docs.example.org/docs/x") is None
    assert verdict(scope, "https://docs.example.org/x") == "out-of-scope"
    scope.add_host("example.com")  # already in: keeps its prefix, does not open the whole host
    assert verdict(scope, "http://example.com/x") == "out-of-scope"
    assert scope.hosts == frozenset({"example.com", "docs.example.org"})


def test_add_host_in_any_mode_is_recorded() -> None:
    scope = make(SEED, mode="any")
    scope.add_host("other.org")
    assert scope.hosts == frozenset({"example.com", "other.org"})


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com/site.css", True),
        ("http://example.com/a/app.JS?v=1", True),
        ("http://example.com/font.woff2", True),
        ("http://example.com/logo.svg", True),
        ("http://example.com/page.html", False),
        ("http://example.com/report.pdf", False),
        ("http://example.com/css/", False),
        ("http://example.com/", False),
        ("http://example.com/x?f=a.css", False),
    ],
)
def test_is_requisite_path(url: str, expected: bool) -> None:
    assert is_requisite_path(normalize(url)) is expected
