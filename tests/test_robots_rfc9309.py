"""Google's robots.txt test suite (github.com/google/robotstxt, robots_test.cc), case by case.

Every EXPECT_TRUE / EXPECT_FALSE of `IsUserAgentAllowed(robotstxt, useragent, url)` there is one case
here, in the same order, run through `parse_robots(robotstxt, useragent).allowed(url)`. The tests of
Google's internals (IsValidUserAgentToObey, line counting, GetPathParamsQuery, MaybeEscapePattern) have
no counterpart here; the sitemap one does, through `RobotsRules.sitemaps`.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from webtrawl.fetch.robots import parse_robots


class Case(NamedTuple):
    robots: str
    agent: str
    url: str
    allowed: bool


def _group(robots: str, agent: str, *checks: tuple[str, bool]) -> list[Case]:
    return [Case(robots, agent, url, allowed) for url, allowed in checks]


CASES: dict[str, list[Case]] = {}

CASES["GoogleOnly_SystemTest"] = [
    Case("", "FooBot", "", True),
    Case("user-agent: FooBot\ndisallow: /\n", "", "", True),
    Case("user-agent: FooBot\ndisallow: /\n", "FooBot", "", False),
    Case("", "", "", True),
]

CASES["ID_LineSyntax_Line"] = [
    Case("user-agent: FooBot\ndisallow: /\n", "FooBot", "http://foo.bar/x/y", False),
    Case("foo: FooBot\nbar: /\n", "FooBot", "http://foo.bar/x/y", True),
    Case("user-agent FooBot\ndisallow /\n", "FooBot", "http://foo.bar/x/y", False),
]

_GROUPS = (
    "allow: /foo/bar/\n"
    "\n"
    "user-agent: FooBot\n"
    "disallow: /\n"
    "allow: /x/\n"
    "user-agent: BarBot\n"
    "disallow: /\n"
    "allow: /y/\n"
    "\n"
    "\n"
    "allow: /w/\n"
    "user-agent: BazBot\n"
    "\n"
    "user-agent: FooBot\n"
    "allow: /z/\n"
    "disallow: /\n"
)
CASES["ID_LineSyntax_Groups"] = [
    Case(_GROUPS, "FooBot", "http://foo.bar/x/b", True),
    Case(_GROUPS, "FooBot", "http://foo.bar/z/d", True),
    Case(_GROUPS, "FooBot", "http://foo.bar/y/c", False),
    Case(_GROUPS, "BarBot", "http://foo.bar/y/c", True),
    Case(_GROUPS, "BarBot", "http://foo.bar/w/a", True),
    Case(_GROUPS, "BarBot", "http://foo.bar/z/d", False),
    Case(_GROUPS, "BazBot", "http://foo.bar/z/d", True),
    Case(_GROUPS, "FooBot", "http://foo.bar/foo/bar/", False),
    Case(_GROUPS, "BarBot", "http://foo.bar/foo/bar/", False),
    Case(_GROUPS, "BazBot", "http://foo.bar/foo/bar/", False),
]

_SITEMAP_INSIDE = "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n"
_UNKNOWN_INSIDE = "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n"
CASES["ID_LineSyntax_Groups_OtherRules"] = [
    Case(_SITEMAP_INSIDE, "FooBot", "http://foo.bar/", False),
    Case(_SITEMAP_INSIDE, "BarBot", "http://foo.bar/", False),
    Case(_UNKNOWN_INSIDE, "FooBot", "http://foo.bar/", False),
    Case(_UNKNOWN_INSIDE, "BarBot", "http://foo.bar/", False),
]

_UPPER = "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n"
_LOWER = "user-agent: FooBot\nallow: /x/\ndisallow: /\n"
_CAMEL = "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n"
CASES["ID_REPLineNamesCaseInsensitive"] = [
    *(Case(robots, "FooBot", "http://foo.bar/x/y", True) for robots in (_UPPER, _LOWER, _CAMEL)),
    *(Case(robots, "FooBot", "http://foo.bar/a/b", False) for robots in (_UPPER, _LOWER, _CAMEL)),
]

_VALUES = [
    "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
    "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n",
    "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n",
]
CASES["ID_UserAgentValueCaseInsensitive"] = [
    Case(robots, agent, url, allowed)
    for agent in ("Foo", "foo")
    for url, allowed in (("http://foo.bar/x/y", True), ("http://foo.bar/a/b", False))
    for robots in _VALUES
]

_UP_TO_SPACE = "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n"
CASES["GoogleOnly_AcceptUserAgentUpToFirstSpace"] = [
    Case(_UP_TO_SPACE, "Foo", "http://foo.bar/x/y", True),
    Case(_UP_TO_SPACE, "Foo Bar", "http://foo.bar/x/y", False),
]

_GLOBAL = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"
_ONLY_SPECIFIC = "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\ndisallow: /\n"
CASES["ID_GlobalGroups_Secondary"] = [
    Case("", "FooBot", "http://foo.bar/x/y", True),
    Case(_GLOBAL, "FooBot", "http://foo.bar/x/y", False),
    Case(_GLOBAL, "BarBot", "http://foo.bar/x/y", True),
    Case(_ONLY_SPECIFIC, "QuxBot", "http://foo.bar/x/y", True),
]

CASES["ID_AllowDisallow_Value_CaseSensitive"] = [
    Case("user-agent: FooBot\ndisallow: /x/\n", "FooBot", "http://foo.bar/x/y", False),
    Case("user-agent: FooBot\ndisallow: /X/\n", "FooBot", "http://foo.bar/x/y", True),
]

_PAGE = "http://foo.bar/x/page.html"
CASES["ID_LongestMatch"] = [
    Case("user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n", "FooBot", _PAGE, False),
    *_group(
        "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
        "FooBot",
        (_PAGE, True),
        ("http://foo.bar/x/", False),
    ),
    Case("user-agent: FooBot\ndisallow: \nallow: \n", "FooBot", _PAGE, True),
    Case("user-agent: FooBot\ndisallow: /\nallow: /\n", "FooBot", _PAGE, True),
    *_group(
        "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
        "FooBot",
        ("http://foo.bar/x", False),
        ("http://foo.bar/x/", True),
    ),
    Case("user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n", "FooBot", _PAGE, True),
    *_group(
        "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
        "FooBot",
        ("http://foo.bar/page.html", False),
        ("http://foo.bar/page", True),
    ),
    *_group(
        "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
        "FooBot",
        (_PAGE, True),
        ("http://foo.bar/x/y.html", False),
    ),
    *_group(
        "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
        "FooBot",
        ("http://foo.bar/x/page", True),
        ("http://foo.bar/y/page", False),
    ),
]

CASES["ID_Encoding"] = [
    Case(
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
        "FooBot",
        "http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par",
        True,
    ),
    *_group(
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n",
        "FooBot",
        ("http://foo.bar/foo/bar/%E3%83%84", True),
        ("http://foo.bar/foo/bar/ツ", False),
    ),
    *_group(
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
        "FooBot",
        ("http://foo.bar/foo/bar/%E3%83%84", True),
        ("http://foo.bar/foo/bar/ツ", False),
    ),
    *_group(
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
        "FooBot",
        ("http://foo.bar/foo/bar/baz", False),
        ("http://foo.bar/foo/bar/%62%61%7A", True),
    ),
]

CASES["ID_SpecialCharacters"] = [
    *_group(
        "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
        "FooBot",
        ("http://foo.bar/foo/bar/quz", False),
        ("http://foo.bar/foo/quz", True),
        ("http://foo.bar/foo//quz", True),
        ("http://foo.bar/foo/bax/quz", True),
    ),
    *_group(
        "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
        "FooBot",
        ("http://foo.bar/foo/bar", False),
        ("http://foo.bar/foo/bar/qux", True),
        ("http://foo.bar/foo/bar/", True),
        ("http://foo.bar/foo/bar/baz", True),
    ),
    *_group(
        "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
        "FooBot",
        ("http://foo.bar/foo/bar", True),
        ("http://foo.bar/foo/quz", False),
    ),
]

CASES["GoogleOnly_IndexHTMLisDirectory"] = _group(
    "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
    "foobot",
    ("http://foo.com/allowed-slash/", True),
    ("http://foo.com/allowed-slash/index.htm", False),
    ("http://foo.com/allowed-slash/index.html", True),
    ("http://foo.com/anyother-url", False),
)

_MAX_LINE = 2083 * 8
_CUT_DISALLOW = "/x/".ljust(_MAX_LINE - len("/x/") - len("disallow: ") + 1, "a")
_CUT_ALLOW_A = "/x/".ljust(_MAX_LINE - len("/x/") - len("allow: ") + 1, "a")
_CUT_ALLOW_B = "/x/".ljust(len(_CUT_ALLOW_A), "b")
_CUT_ALLOWS = f"user-agent: FooBot\ndisallow: /\nallow: {_CUT_ALLOW_A}/qux\nallow: {_CUT_ALLOW_B}/qux\n"
CASES["GoogleOnly_LineTooLong"] = [
    *_group(
        f"user-agent: FooBot\ndisallow: {_CUT_DISALLOW}/qux\n",
        "FooBot",
        ("http://foo.bar/fux", True),
        (f"http://foo.bar{_CUT_DISALLOW}/fux", False),
    ),
    *_group(
        _CUT_ALLOWS,
        "FooBot",
        ("http://foo.bar/", False),
        (f"http://foo.bar{_CUT_ALLOW_A}/qux", True),
        (f"http://foo.bar{_CUT_ALLOW_B}/fux", True),
    ),
]

CASES["GoogleOnly_DocumentationChecks"] = [
    *_group(
        "user-agent: FooBot\ndisallow: /\nallow: /fish\n",
        "FooBot",
        ("http://foo.bar/bar", False),
        ("http://foo.bar/fish", True),
        ("http://foo.bar/fish.html", True),
        ("http://foo.bar/fish/salmon.html", True),
        ("http://foo.bar/fishheads", True),
        ("http://foo.bar/fishheads/yummy.html", True),
        ("http://foo.bar/fish.html?id=anything", True),
        ("http://foo.bar/Fish.asp", False),
        ("http://foo.bar/catfish", False),
        ("http://foo.bar/?id=fish", False),
    ),
    *_group(
        "user-agent: FooBot\ndisallow: /\nallow: /fish*\n",
        "FooBot",
        ("http://foo.bar/bar", False),
        ("http://foo.bar/fish", True),
        ("http://foo.bar/fish.html", True),
        ("http://foo.bar/fish/salmon.html", True),
        ("http://foo.bar/fishheads", True),
        ("http://foo.bar/fishheads/yummy.html", True),
        ("http://foo.bar/fish.html?id=anything", True),
        ("http://foo.bar/Fish.bar", False),
        ("http://foo.bar/catfish", False),
        ("http://foo.bar/?id=fish", False),
    ),
    *_group(
        "user-agent: FooBot\ndisallow: /\nallow: /fish/\n",
        "FooBot",
        ("http://foo.bar/bar", False),
        ("http://foo.bar/fish/", True),
        ("http://foo.bar/fish/salmon", True),
        ("http://foo.bar/fish/?salmon", True),
        ("http://foo.bar/fish/salmon.html", True),
        ("http://foo.bar/fish/?id=anything", True),
        ("http://foo.bar/fish", False),
        ("http://foo.bar/fish.html", False),
        ("http://foo.bar/Fish/Salmon.html", False),
    ),
    *_group(
        "user-agent: FooBot\ndisallow: /\nallow: /*.php\n",
        "FooBot",
        ("http://foo.bar/bar", False),
        ("http://foo.bar/filename.php", True),
        ("http://foo.bar/folder/filename.php", True),
        ("http://foo.bar/folder/filename.php?parameters", True),
        ("http://foo.bar//folder/any.php.file.html", True),
        ("http://foo.bar/filename.php/", True),
        ("http://foo.bar/index?f=filename.php/", True),
        ("http://foo.bar/php/", False),
        ("http://foo.bar/index?php", False),
        ("http://foo.bar/windows.PHP", False),
    ),
    *_group(
        "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n",
        "FooBot",
        ("http://foo.bar/bar", False),
        ("http://foo.bar/filename.php", True),
        ("http://foo.bar/folder/filename.php", True),
        ("http://foo.bar/filename.php?parameters", False),
        ("http://foo.bar/filename.php/", False),
        ("http://foo.bar/filename.php5", False),
        ("http://foo.bar/php/", False),
        ("http://foo.bar/filename?php", False),
        ("http://foo.bar/aaaphpaaa", False),
        ("http://foo.bar//windows.PHP", False),
    ),
    *_group(
        "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n",
        "FooBot",
        ("http://foo.bar/bar", False),
        ("http://foo.bar/fish.php", True),
        ("http://foo.bar/fishheads/catfish.php?parameters", True),
        ("http://foo.bar/Fish.PHP", False),
    ),
    Case("user-agent: FooBot\nallow: /p\ndisallow: /\n", "FooBot", "http://example.com/page", True),
    Case("user-agent: FooBot\nallow: /folder\ndisallow: /folder\n", "FooBot", "http://example.com/folder/page", True),
    Case("user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n", "FooBot", "http://example.com/page.htm", False),
    *_group(
        "user-agent: FooBot\nallow: /$\ndisallow: /\n",
        "FooBot",
        ("http://example.com/", True),
        ("http://example.com/page.html", False),
    ),
]

_ENCODES = (
    "webtrawl percent-encodes a URL before matching it (as its URL normalization does), so /foo/bar/ツ is "
    "/foo/bar/%E3%83%84; Google's matcher leaves the encoding to its caller"
)
DIFFERENT: dict[str, str] = {
    "GoogleOnly_AcceptUserAgentUpToFirstSpace-2": (
        "webtrawl is given its whole User-Agent header and obeys the product token in it, the first word: "
        "'Foo Bar' is the agent foo; Google's matcher is given a product token, and 'Foo Bar' is none"
    ),
    "ID_Encoding-3": _ENCODES,
    "ID_Encoding-5": _ENCODES,
    "ID_Encoding-6": (
        "protego reads a percent-escaped unreserved character as that character (RFC 3986 2.3: they are "
        "equivalent), so /foo/bar/%62%61%7A is /foo/bar/baz; Google compares the escapes as written"
    ),
}
"""Cases webtrawl answers differently on purpose, by id, with the reason."""


def _params() -> list[object]:
    params: list[object] = []
    for test, cases in CASES.items():
        for number, case in enumerate(cases, 1):
            case_id = f"{test}-{number}"
            marks = [pytest.mark.xfail(reason=DIFFERENT[case_id], strict=True)] if case_id in DIFFERENT else []
            params.append(pytest.param(case, id=case_id, marks=marks))
    return params


def test_case_count() -> None:
    assert sum(map(len, CASES.values())) == 145  # the EXPECTs of IsUserAgentAllowed in robots_test.cc


@pytest.mark.parametrize("case", _params())
def test_google_case(case: Case) -> None:
    assert parse_robots(case.robots, case.agent).allowed(case.url) is case.allowed


_SITEMAP = "http://foo.bar/sitemap.xml"
_BEFORE = "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\n"


@pytest.mark.parametrize("robots", [f"{_BEFORE}Sitemap: {_SITEMAP}\n", f"Sitemap: {_SITEMAP}\n{_BEFORE}"])
def test_sitemap_line_anywhere(robots: str) -> None:
    """ID_NonStandardLineExample_Sitemap: a Sitemap line counts wherever it stands."""
    assert parse_robots(robots, "foo").sitemaps == (_SITEMAP,)
