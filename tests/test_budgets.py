"""Budgets against crawler traps, end to end: what a crawl of a trap-laden site fetches, drops and reports."""

from __future__ import annotations

from pathlib import Path

from tests.crawls import connect, fast_config
from tests.test_cli import FAST, webtrawl
from tests.test_crawl_features import Handler, page, serve
from webtrawl import Crawler, ScopeConfig
from webtrawl.frontier import budgets
from webtrawl.frontier.budgets import Budgets
from webtrawl.models import NewURL
from webtrawl.settings import for_api
from webtrawl.urls import fingerprint, origin

ITEMS = 5000


def shop(items: int = ITEMS, *, more: int = 0) -> dict[str, Handler | str]:
    """ "/" links /about, /more and /items/0 … /items/N-1; /more links `more` items beyond those."""
    routes: dict[str, Handler | str] = {
        "/": page("/about", "/more", *(f"/items/{n}" for n in range(items))),
        "/about": page(),
        "/more": page(*(f"/items/{n}" for n in range(items, items + more))),
    }
    for n in range(items + more):
        routes[f"/items/{n}"] = page()
    return routes


def fetched(out: Path, prefix: str) -> int:
    (count,) = (
        connect(out).execute("SELECT COUNT(*) FROM urls WHERE url LIKE ? AND state = 2", (f"%{prefix}%",)).fetchone()
    )
    return int(count)


def in_frontier(out: Path, prefix: str) -> int:
    (count,) = connect(out).execute("SELECT COUNT(*) FROM urls WHERE url LIKE ?", (f"%{prefix}%",)).fetchone()
    return int(count)


async def test_a_template_with_thousands_of_urls_is_capped_and_the_rest_counted(tmp_path: Path) -> None:
    async with serve(shop()) as (url, log):
        scope = ScopeConfig(max_urls_per_template=100)
        report = await Crawler(fast_config(url, tmp_path, scope=scope)).run()
    assert report.outcome == "finished"
    assert fetched(tmp_path, "/items/") == 100
    assert sum(path.startswith("/items/") for _, path in log) == 100
    assert fetched(tmp_path, "/about") == fetched(tmp_path, "/more") == 1  # other shapes are not affected
    assert report.drops["template-budget"] == ITEMS - 100
    dropped = {u for (u,) in connect(tmp_path).execute("SELECT url FROM dropped WHERE reason = 'template-budget'")}
    assert dropped == {f"{url}items/{n}" for n in range(100, ITEMS)}  # the first ones found got in


async def test_an_endless_calendar_ends_at_its_template_budget(tmp_path: Path) -> None:
    routes: dict[str, Handler | str] = {"/": page("/cal/2026/01/")}
    for year in range(2000, 2100):  # "endless": far more months than the budget lets the crawl see
        for month in range(12):
            after, before = year * 12 + month + 1, year * 12 + month - 1
            routes[f"/cal/{year}/{month + 1:02d}/"] = page(
                f"/cal/{after // 12}/{after % 12 + 1:02d}/", f"/cal/{before // 12}/{before % 12 + 1:02d}/"
            )
    async with serve(routes) as (url, _log):
        report = await Crawler(fast_config(url, tmp_path, scope=ScopeConfig(max_urls_per_template=30))).run()
    assert report.outcome == "finished"
    assert fetched(tmp_path, "/cal/") == 30
    assert report.drops == {"template-budget": 2}  # one month beyond each end of what was fetched


async def test_the_host_budget_caps_a_host_whatever_its_shapes(tmp_path: Path) -> None:
    words = [f"{a}{b}" for a in "abcde" for b in "abcdefghij"]  # 50 shapes: no template repeats
    routes: dict[str, Handler | str] = {"/": page(*(f"/{w}" for w in words))}
    routes.update({f"/{w}": page() for w in words})
    async with serve(routes) as (url, log):
        scope = ScopeConfig(max_urls_per_host=10, max_urls_per_template=None)
        report = await Crawler(fast_config(url, tmp_path, scope=scope)).run()
    assert report.done_total == 10  # the seed counts too
    assert len([path for _, path in log if path.strip("/") in words]) == 9
    assert report.drops == {"host-budget": 41}


async def test_a_resumed_crawl_keeps_its_counts(tmp_path: Path) -> None:
    async with serve(shop(more=100)) as (url, log):
        scope = ScopeConfig(max_urls_per_template=100)
        first = await Crawler(fast_config(url, tmp_path, scope=scope, max_pages=1)).run()
        assert first.outcome == "max-pages"
        assert in_frontier(tmp_path, "/items/") == 100
        again = await Crawler(fast_config(url, tmp_path, scope=scope)).run()  # counters rebuilt from the frontier
    assert again.outcome == "finished"
    assert fetched(tmp_path, "/more") == 1
    assert in_frontier(tmp_path, "/items/") == fetched(tmp_path, "/items/") == 100
    assert again.drops["template-budget"] == ITEMS  # 4,900 from "/", and all 100 /more found
    assert sum(path.startswith("/items/") for _, path in log) == 100


async def test_budget_and_sitemap_flags_on_the_command_line(tmp_path: Path) -> None:
    async with serve(shop(items=40)) as (url, log):
        args = ("--max-urls-per-template", "5", "--max-urls-per-host", "0", "--no-sitemaps")
        code, out, err = await webtrawl("crawl", url, "--out", str(tmp_path), *FAST, *args)
    assert code == 0, err
    assert "template-budget" in out
    assert fetched(tmp_path, "/items/") == 5
    assert "/sitemap.xml" not in {path for _, path in log}


def new_url(path: str) -> NewURL:
    url = "http://a.test" + path
    return NewURL(url=url, fp=fingerprint(url), host=origin(url), depth=1)


def letters(number: int) -> str:
    """`number` in base 26, a-z: a path segment without digits, so each number is its own template."""
    word = ""
    while True:
        number, digit = divmod(number, 26)
        word = chr(97 + digit) + word
        if not number:
            return word


def test_template_counters_stay_bounded_and_still_catch_a_trap(monkeypatch) -> None:
    monkeypatch.setattr(budgets, "MAX_TEMPLATES", 1000)
    counters = Budgets(None, 50)
    trap = 0
    for n in range(20_000):
        # a site of distinct pages (one template each) with a trap's URLs mixed in, one in ten
        urls = [new_url(f"/wiki/{letters(n)}")] + ([new_url(f"/trap/{n}/")] if n % 10 == 0 else [])
        refused, pending = counters.admit(urls, [1] * len(urls), lambda fps: set())
        trap += len(urls) == 2 and 1 not in refused
        counters.count_new(entry for i, entry in enumerate(pending) if i not in refused)
        assert counters.templates <= budgets.MAX_TEMPLATES
    assert trap == 50


def test_budgets_from_a_config_file(tmp_path: Path) -> None:
    toml = tmp_path / "crawl.toml"
    toml.write_text("[scope]\nmax_urls_per_host = 0\nmax_urls_per_template = 500\nsitemaps = false\n")
    config = for_api(("http://a.test/",), {"config": toml, "out": tmp_path})
    assert (config.scope.max_urls_per_host, config.scope.max_urls_per_template) == (None, 500)  # 0: no limit
    assert not config.scope.sitemaps
    assert ScopeConfig().max_urls_per_host == 1_000_000 and ScopeConfig().max_urls_per_template == 10_000
