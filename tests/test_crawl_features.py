"""Crawl features end to end, each against a small server made for it or the generated test site."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

import webtrawl
from tests.crawls import check_warcs, connect, fast_config, fetched_depths
from tests.sites import SiteServer
from webtrawl import CrawlConfig, Crawler, FetchConfig, PolitenessConfig, ScopeConfig
from webtrawl.settings import for_api

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def serve(routes: dict[str, Handler | str], host: str = "127.0.0.1") -> AsyncIterator[tuple[str, list]]:
    """A server answering each path with a handler or a fixed HTML body; yields its URL and request log."""
    log: list[tuple[float, str]] = []

    async def dispatch(request: web.Request) -> web.StreamResponse:
        log.append((time.monotonic(), request.path_qs))
        route = routes.get(request.path_qs, routes.get(request.path))
        if route is None:
            raise web.HTTPNotFound()
        if isinstance(route, str):
            return web.Response(text=route, content_type="text/html")
        return await route(request)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", dispatch)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://{host}:{port}/", log
    finally:
        await runner.cleanup()


def page(*links: str, title: str = "t", extra: str = "") -> str:
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in links)
    return f"<html><head><title>{title}</title>{extra}</head><body>{anchors}</body></html>"


def redirect(to: str, status: int = 302) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, headers={"Location": to})

    return handler


def config(seed: str, out: Path, **settings: object) -> CrawlConfig:
    return fast_config(seed, out, **settings)


def statuses(out: Path) -> dict[str, int | None]:
    return dict(connect(out).execute("SELECT url, status FROM captures ORDER BY id").fetchall())


async def test_the_per_host_limit_holds(site_server: SiteServer, tmp_path: Path) -> None:
    # The spacing a delay adds is the scheduler's, tested on its own clock (tests/test_politeness.py).
    site_server.delay = 0.15
    politeness = PolitenessConfig(per_host=2, delay=0)
    cfg = replace(config(site_server.url, tmp_path, max_depth=2), politeness=politeness, max_pages=16)
    await Crawler(cfg).run()
    assert site_server.max_in_flight[site_server.site.host] == 2


async def test_robots_crawl_delay_spaces_requests(tmp_path: Path) -> None:
    routes: dict[str, Handler | str] = {"/": page("/a", "/b", "/c")}
    for name in "abc":
        routes[f"/{name}"] = page()

    async def robots(request: web.Request) -> web.StreamResponse:
        return web.Response(text="User-agent: *\nCrawl-delay: 0.25\n")

    routes["/robots.txt"] = robots
    async with serve(routes) as (url, log):
        report = await Crawler(config(url, tmp_path)).run()
    # robots.txt comes first, so its Crawl-delay paces every page; the pace itself is the scheduler's
    # (tests/test_politeness.py), which a server's timestamps on a loaded machine cannot show.
    first, *rest = (path for _at, path in log)
    assert first == "/robots.txt" and sorted(rest) == ["/", "/a", "/b", "/c", "/sitemap.xml"]
    assert report.outcome == "finished"


async def test_seed_redirect_brings_its_target_host_into_scope(site_server: SiteServer, tmp_path: Path) -> None:
    site = site_server.site
    seed = site.url("/away")  # redirects to http://localhost:PORT/
    other = f"http://localhost:{site.port}/"
    await Crawler(config(seed, tmp_path, max_depth=1, max_pages=3)).run()
    urls = statuses(tmp_path)
    assert urls[seed] == 302 and urls[other] == 200
    # the resume remembers the added host: the pages it links to are crawled too
    report = await Crawler(config(seed, tmp_path, max_depth=1)).run()
    assert report.outcome == "finished"
    depth_one = {url for (url,) in connect(tmp_path).execute("SELECT url FROM urls WHERE depth = 1")}
    assert sum(url.startswith(other) for url in depth_one) > 5  # out of scope but for the redirect
    assert {r.host for r in site_server.log} == {site.host, f"localhost:{site.port}"}


async def test_redirect_loops_and_long_chains_are_cut(tmp_path: Path) -> None:
    routes: dict[str, Handler | str] = {
        "/": page("/loop/a", "/chain/0"),
        "/loop/a": redirect("/loop/b"),
        "/loop/b": redirect("/loop/a"),
    }
    for hop in range(15):
        routes[f"/chain/{hop}"] = redirect(f"/chain/{hop + 1}")
    async with serve(routes) as (url, log):
        await Crawler(config(url, tmp_path)).run()
    requested = [path for _, path in log if path.startswith("/chain/")]
    assert requested == [f"/chain/{hop}" for hop in range(11)]  # the seed link plus 10 redirects
    assert [path for _, path in log if path.startswith("/loop/")] == ["/loop/a", "/loop/b"]
    failed = dict(connect(tmp_path).execute("SELECT url, reason FROM urls WHERE state = 3").fetchall())
    assert failed == {url + "loop/b": "redirect loop", url + "chain/10": "too many redirects (more than 10)"}


async def test_nofollow_honoured_unless_ignored(site_server: SiteServer, tmp_path: Path) -> None:
    site = site_server.site
    await Crawler(config(site_server.url, tmp_path / "a", max_depth=site.deepest)).run()
    assert fetched_depths(tmp_path / "a") == site.expect(max_depth=site.deepest).fetched
    following = config(site_server.url, tmp_path / "b", scope=ScopeConfig(max_depth=site.deepest, follow_nofollow=True))
    await Crawler(following).run()
    expected = site.expect(max_depth=site.deepest, follow_nofollow=True).fetched
    assert fetched_depths(tmp_path / "b") == expected
    assert len(expected) > len(fetched_depths(tmp_path / "a"))


async def test_page_requisites_are_fetched_only_when_asked(tmp_path: Path) -> None:
    extra = '<link rel="stylesheet" href="/s.css"><script src="/app.js"></script>'
    body = page("/next", extra=extra) + '<img src="/logo.png">'

    async def binary(request: web.Request) -> web.StreamResponse:
        return web.Response(body=b"\x89PNG....", content_type="image/png")

    routes: dict[str, Handler | str] = {
        "/": body,
        "/next": page(),
        "/s.css": binary,
        "/app.js": binary,
        "/logo.png": binary,
    }
    async with serve(routes) as (url, log):
        await Crawler(config(url, tmp_path / "plain")).run()
        assert {path for _, path in log} == {"/robots.txt", "/sitemap.xml", "/", "/next"}
        log.clear()
        await Crawler(config(url, tmp_path / "req", scope=ScopeConfig(page_requisites=True))).run()
        expected = {"/robots.txt", "/sitemap.xml", "/", "/next", "/s.css", "/app.js", "/logo.png"}
        assert {path for _, path in log} == expected
    rows = connect(tmp_path / "req").execute("SELECT url, size, truncated FROM captures WHERE url LIKE '%.png'")
    assert list(rows) == [(url + "logo.png", 8, None)]  # requisite bodies are kept whole


async def test_non_html_bodies_are_skipped_unless_asked(site_server: SiteServer, tmp_path: Path) -> None:
    site = site_server.site
    await Crawler(config(site_server.url, tmp_path / "a", max_depth=site.deepest)).run()
    query = "SELECT size, truncated, content_type FROM captures WHERE url LIKE '%.txt'"
    assert connect(tmp_path / "a").execute(query).fetchone() == (0, "not-downloaded", "text/plain")
    check_warcs(tmp_path / "a")
    fetch = FetchConfig(backoff=0.05, fetch_non_html=True)
    await Crawler(config(site_server.url, tmp_path / "b", max_depth=site.deepest, fetch=fetch)).run()
    size, truncated, _ = connect(tmp_path / "b").execute(query).fetchone()
    assert size > 0 and truncated is None


async def test_max_size_cuts_the_body_and_marks_the_record(tmp_path: Path) -> None:
    big = page("/after") + "<p>" + "x" * 300_000 + "</p>"
    async with serve({"/": big, "/after": page()}) as (url, _log):
        await Crawler(config(url, tmp_path, fetch=FetchConfig(max_size=100_000))).run()
    size, truncated, name, offset = (
        connect(tmp_path)
        .execute("SELECT size, truncated, warc_file, warc_offset FROM captures WHERE url = ?", (url,))
        .fetchone()
    )
    assert (size, truncated) == (100_000, "length")
    with (tmp_path / "warc" / name).open("rb") as stream:
        stream.seek(offset)
        record = next(iter(ArchiveIterator(stream)))
        assert record.rec_headers.get_header("WARC-Truncated") == "length"
    assert fetched_depths(tmp_path) == {"/": 0, "/after": 1}  # links before the cut still count


async def test_retry_after_is_honoured(tmp_path: Path) -> None:
    calls: list[float] = []

    async def busy(request: web.Request) -> web.StreamResponse:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return web.Response(status=429, headers={"Retry-After": "1"})
        return web.Response(text=page(), content_type="text/html")

    async with serve({"/": page("/busy"), "/busy": busy}) as (url, _log):
        report = await Crawler(config(url, tmp_path)).run()
    assert report.done_total == 2
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.95
    assert [s for (s,) in connect(tmp_path).execute("SELECT status FROM captures ORDER BY id")] == [
        200,
        429,
        200,
    ]


async def test_mirror_writes_plain_files(site_server: SiteServer, tmp_path: Path) -> None:
    await Crawler(config(site_server.url, tmp_path, max_depth=1, mirror=True)).run()
    root = tmp_path / "mirror" / site_server.site.host.replace(":", "+")
    assert (root / "index.html").read_text().startswith("<!doctype html>")
    assert len(list(root.rglob("*.html"))) > 5


async def test_max_time_stops_the_run(site_server: SiteServer, tmp_path: Path) -> None:
    site_server.delay = 0.05
    report = await Crawler(config(site_server.url, tmp_path, max_depth=site_server.site.deepest, max_time=0.5)).run()
    assert report.outcome == "max-time"
    assert report.waiting > 0


def test_blocking_api_and_public_names(site_server_sync: str, tmp_path: Path) -> None:
    report = webtrawl.crawl(
        site_server_sync, out=tmp_path, max_pages=5, politeness=PolitenessConfig(delay=0, per_host=4)
    )
    assert report.done_total == 5
    assert webtrawl.__all__ == sorted(webtrawl.__all__)
    assert {"Crawler", "CrawlConfig", "crawl"} <= set(webtrawl.__all__)


def test_config_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "crawl.toml"
    path.write_text('concurrency = 5\n[scope]\nmode = "domain"\ndeny = ["/private/"]\n[politeness]\ndelay = 1.5\n')
    cfg = for_api(("http://example.org/",), {"config": path, "out": tmp_path})
    assert (cfg.concurrency, cfg.scope.mode, cfg.scope.deny, cfg.politeness.delay) == (
        5,
        "domain",
        ("/private/",),
        1.5,
    )
    assert json.loads(json.dumps(cfg.identity(["http://example.org/"], 1)))["scope"]["mode"] == "domain"


async def test_interrupt_then_resume(site_server: SiteServer, tmp_path: Path) -> None:
    import signal
    import sys

    site_server.delay = 0.02
    args = [
        sys.executable,
        "-m",
        "webtrawl",
        "crawl",
        site_server.url,
        "--out",
        str(tmp_path),
        "--max-depth",
        str(site_server.site.deepest),
        "--delay",
        "0",
        "--per-host",
        "4",
        "-q",
    ]
    proc = await asyncio.create_subprocess_exec(*args, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    for _ in range(600):  # Ctrl-C once the crawl is under way (the site saw a page request), however slow the start
        if any(r.path != "/robots.txt" for r in site_server.log):
            break
        await asyncio.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 130, err
    assert b"run the same command again to resume" in err
    assert out.startswith(b"interrupted")
    site_server.delay = 0
    proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0 and out.startswith(b"finished")
    assert fetched_depths(tmp_path) == site_server.site.expect(max_depth=site_server.site.deepest).fetched
