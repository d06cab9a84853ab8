"""The test site's generator and ground truth: deterministic, unique words, exact expectations."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.sites import Expectation, Site


def bodies(site: Site) -> dict[str, bytes]:
    return {path: route.body for path, route in site.routes.items()}


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_the_same_seed_gives_the_same_site(seed: int) -> None:
    first, second = Site(pages=80, seed=seed), Site(pages=80, seed=seed)
    assert bodies(first) == bodies(second)
    assert first.pages == second.pages


def test_seed_and_port_change_the_site() -> None:
    site = Site(pages=80, seed=0, port=8765)
    assert bodies(Site(pages=80, seed=1, port=8765)) != bodies(site)
    moved = bodies(Site(pages=80, seed=0, port=9999))
    assert moved != bodies(site)
    assert {path: body.replace(b":9999", b":8765") for path, body in moved.items()} == bodies(site)


SHAPES = [(10, 0), (10, 5), (11, 1), (30, 2), (100, 3), (300, 0), (300, 9), (1000, 4)]


@pytest.mark.parametrize(("pages", "seed"), SHAPES)
def test_every_page_has_a_unique_title_and_word_and_a_true_depth(pages: int, seed: int) -> None:
    site = Site(pages=pages, seed=seed)
    tree = [path for path in site.pages if re.fullmatch(r"/(p\d+/)*", path)]
    assert len(tree) == pages
    assert site.deepest >= 6
    assert {page.depth for page in site.pages.values()} >= set(range(site.deepest + 1))
    titles = [page.title for page in site.pages.values()]
    assert len(set(titles)) == len(titles)
    assert all(re.fullmatch(r"Page \d+ — [a-z]+ [a-z]+", title) for title in titles)
    served = Counter(w for route in site.routes.values() for w in re.findall(rb"zq\d+[a-z]+", route.body))
    assert served == Counter(page.word.encode() for page in site.pages.values())
    for path, page in site.pages.items():
        body = site.route(path).body.decode()
        assert page.title in body and page.word in body
    fetched = site.expect(max_depth=site.deepest).fetched
    assert {path: page.depth for path, page in site.pages.items()} == {p: fetched.get(p) for p in site.pages}


def test_cross_links_make_shorter_paths_to_deep_pages() -> None:
    site = Site(pages=300, seed=0)
    tree = {path: page for path, page in site.pages.items() if re.fullmatch(r"/(p\d+/)*", path)}
    shortened = [path for path, page in tree.items() if (page.depth or 0) < path.count("/") - 1]
    assert len(shortened) > 10


def test_odd_links_are_written_several_ways() -> None:
    """Fragments, dot segments, absolute and upper-case forms, spaces: all present, all one URL each."""
    hrefs = [link.href for page in Site().pages.values() for link in page.links]
    for pattern in (
        r"#top$",
        r"#$",
        r"^\./",
        r"/\.\./",
        r"^http://127",
        r"^HTTP://",
        r"^\s.*\s$",
        r"^https?://[^/]+$",
    ):
        assert any(re.search(pattern, href) for href in hrefs), pattern


FETCHED = [
    ("/docs", 301), ("/docs/", 200), ("/docs/intro/", 200), ("/old-page", 302), ("/moved/", 200),
    ("/old-home", 301), ("/hop/1", 302), ("/hop/2", 303), ("/hop/3", 307), ("/chain-end/", 200),
    ("/away", 302), ("/missing/0/", 404), ("/missing/2/", 404), ("/broken/", 500), ("/files/notes.txt", 200),
    ("/files/data.json", 200), ("/privateer/", 200), ("/meta-nofollow/", 200), ("/based/", 200),
    ("/base-target/child/", 200), ("/trap/", 200), ("/trap/x/x/x/", 200), ("/calendar/2026/01/", 200),
]  # fmt: skip
DROPPED = [
    ("/files/logo.png", "binary"), ("/files/report.pdf", "binary"), ("/private/", "robots"),
    ("/private/ledger/", "robots"), ("/sponsored/", "nofollow"), ("/hidden/one/", "nofollow"),
    ("/hidden/two/", "nofollow"),
    ("/trap/x/x/x/x/", "repeated-segments"), ("http://localhost:8765/", "scope"),
    ("http://example.invalid/", "scope"), ("mailto:webmaster@example.invalid", "scheme"),
    ("javascript:void(0)", "scheme"), ("tel:+15550100", "scheme"),
]  # fmt: skip
SAME_DEPTH = [("/docs", "/docs/"), ("/old-page", "/moved/"), ("/hop/1", "/chain-end/"), ("/hop/1", "/hop/3")]


@pytest.fixture(scope="module")
def site() -> Site:
    return Site()


@pytest.fixture(scope="module")
def truth(site: Site) -> Expectation:
    """A default crawl of the default site, its depth limited only to stop the calendar."""
    return site.expect(max_depth=site.deepest)


@pytest.mark.parametrize(("path", "status"), FETCHED)
def test_a_default_crawl_fetches(truth: Expectation, path: str, status: int) -> None:
    assert truth.status[path] == status
    assert path in truth.fetched


@pytest.mark.parametrize(("url", "reason"), DROPPED)
def test_a_default_crawl_drops(site: Site, truth: Expectation, url: str, reason: str) -> None:
    assert (site.url(url) if url.startswith("/") else url) in truth.dropped[reason]
    assert url not in truth.fetched


@pytest.mark.parametrize("path", ["/from-text/", "/based/child/", "/robots.txt", "/trap/x/x/x/x/x/"])
def test_a_default_crawl_never_finds(site: Site, truth: Expectation, path: str) -> None:
    assert path not in truth.fetched
    assert all(site.url(path) not in urls for urls in truth.dropped.values())


@pytest.mark.parametrize(("source", "target"), SAME_DEPTH)
def test_a_redirect_target_has_its_sources_depth(truth: Expectation, source: str, target: str) -> None:
    assert truth.fetched[source] == truth.fetched[target]


def test_robots_blocked_and_out_of_scope_sets(truth: Expectation) -> None:
    assert truth.robots_blocked == {"/private/", "/private/ledger/"}
    assert truth.out_of_scope == {"http://localhost:8765/", "http://example.invalid/"}


@pytest.mark.parametrize(
    ("rules", "now_fetched"),
    [
        ({"follow_nofollow": True}, ["/sponsored/", "/hidden/one/", "/hidden/two/"]),
        ({"respect_robots": False}, ["/private/", "/private/ledger/"]),
        ({"max_repeated_segments": 4}, ["/trap/x/x/x/x/"]),
    ],
)
def test_rules_change_what_is_fetched(
    site: Site, truth: Expectation, rules: dict[str, Any], now_fetched: list[str]
) -> None:
    fetched = site.expected_fetched(max_depth=site.deepest, **rules)
    assert set(fetched) - set(truth.fetched) == set(now_fetched)


@pytest.mark.parametrize("max_depth", [0, 1, 2, 5])
def test_max_depth_cuts_the_crawl(site: Site, truth: Expectation, max_depth: int) -> None:
    expected = site.expect(max_depth=max_depth)
    assert expected.fetched == {path: depth for path, depth in truth.fetched.items() if depth <= max_depth}
    assert expected.dropped["depth"]


def test_without_a_calendar_a_crawl_without_max_depth_ends() -> None:
    site = Site(pages=50, calendar=False)
    fetched = site.expected_fetched()
    assert not any(path.startswith("/calendar/") for path in fetched)
    assert site.route("/calendar/2026/01/").status == 404
    assert max(fetched.values()) == max(site.deepest, fetched["/trap/x/x/x/"])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Site(pages=9), "at least 10 pages"),
        (lambda: Site(pages=20).expect(), "calendar never ends"),
        (lambda: Site(pages=20).expected_fetched(respect_robots=False), "calendar never ends"),
    ],
)
def test_impossible_requests_are_refused(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


CALENDAR = [
    ("/calendar/2026/01/", ["/calendar/2025/12/", "/calendar/2026/02/"]),
    ("/calendar/2026/12/", ["/calendar/2026/11/", "/calendar/2027/01/"]),
    ("/calendar/0001/01/", ["/calendar/0001/02/"]),
    ("/calendar/9999/12/", ["/calendar/9999/11/", "/calendar/10000/01/"]),
    ("/calendar/10000/01/", ["/calendar/9999/12/", "/calendar/10000/02/"]),
    ("/trap/", ["/trap/x/"]),
    ("/trap/x/x/x/x/x/", ["/trap/x/x/x/x/x/x/"]),
]


@pytest.mark.parametrize(("path", "months"), CALENDAR)
def test_endless_pages_are_made_on_demand(path: str, months: list[str]) -> None:
    route = Site(pages=10).route(path)
    assert route.status == 200
    assert [link.url.split("/", 3)[3] for link in route.links] == ["", *(m[1:] for m in months)]


@pytest.mark.parametrize(
    "path",
    ["/calendar/2026/1/", "/calendar/2026/13/", "/calendar/2026/00/", "/calendar/0000/05/",
     "/calendar/02026/01/", "/calendar/2026/01", "/trap/y/", "/trap/x", "/nothing/", "/p1", "/docs/nothing/"],
)  # fmt: skip
def test_unknown_paths_are_404(path: str) -> None:
    assert Site(pages=10).route(path).status == 404


def test_generation_is_fast() -> None:
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        Site(pages=300)
        timings.append(time.perf_counter() - start)
    assert min(timings) < 0.05
