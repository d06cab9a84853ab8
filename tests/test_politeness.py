"""Politeness end to end: robots.txt by Google's rules, X-Robots-Tag, adaptive delays, bounded host state."""

from __future__ import annotations

import time
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

from aiohttp import web

from tests.crawls import connect
from tests.test_crawl_features import Handler, config, page, serve
from webtrawl import Crawler, FetchConfig, PolitenessConfig, ScopeConfig
from webtrawl.fetch.politeness import Politeness
from webtrawl.fetch.robots import ALLOW_ALL


def failures(out: Path) -> dict[str, str]:
    return dict(connect(out).execute("SELECT url, reason FROM urls WHERE state = 3").fetchall())


async def test_robots_5xx_waits_and_asks_again(tmp_path: Path) -> None:
    answers = [500, 503]

    async def robots(request: web.Request) -> web.StreamResponse:
        if answers:
            return web.Response(status=answers.pop(0))
        return web.Response(text="User-agent: *\nDisallow: /no\n")

    routes: dict[str, Handler | str] = {"/robots.txt": robots, "/": page("/yes", "/no"), "/yes": page()}
    async with serve(routes) as (url, log):
        report = await Crawler(config(url, tmp_path)).run()
    assert [path for _, path in log].count("/robots.txt") == 3
    assert report.done_total == 2
    assert failures(tmp_path) == {url + "no": "blocked by robots.txt"}


async def test_robots_unreachable_for_good_fails_the_host_and_the_crawl_ends(tmp_path: Path) -> None:
    async def robots(request: web.Request) -> web.StreamResponse:
        return web.Response(status=500)

    async with serve({"/robots.txt": robots, "/": page("/a")}) as (url, log):
        fetch = FetchConfig(backoff=0.05, max_attempts=3)
        report = await Crawler(config(url, tmp_path, fetch=fetch)).run()
    assert report.outcome == "finished"
    assert [path for _, path in log] == ["/robots.txt"] * 3
    assert failures(tmp_path) == {url: "robots.txt unreachable"}


async def test_x_robots_tag_header_counts_like_meta_robots(tmp_path: Path) -> None:
    async def tagged(request: web.Request) -> web.StreamResponse:
        body = page("/behind", title="tagged") + "<p>secretword</p>"
        return web.Response(text=body, content_type="text/html", headers={"X-Robots-Tag": "noindex, nofollow"})

    routes: dict[str, Handler | str] = {"/": page("/tagged"), "/tagged": tagged, "/behind": page()}
    async with serve(routes) as (url, log):
        await Crawler(config(url, tmp_path)).run()
    assert "/behind" not in {path for _, path in log}
    assert connect(tmp_path).execute(
        "SELECT title, text FROM captures WHERE url = ?", (url + "tagged",)
    ).fetchone() == (
        "tagged",
        "",
    )


async def test_adaptive_delay_backs_off_on_503(tmp_path: Path) -> None:
    calls: list[float] = []

    async def flaky(request: web.Request) -> web.StreamResponse:
        calls.append(time.monotonic())
        return web.Response(status=503, headers={"Retry-After": "0"})

    routes: dict[str, Handler | str] = {"/": page(*[f"/f{i}" for i in range(6)])}
    for i in range(6):
        routes[f"/f{i}"] = flaky
    fetch = FetchConfig(backoff=0.01, max_attempts=1)
    for adaptive in (False, True):
        calls.clear()
        polite = PolitenessConfig(per_host=1, delay=0, adaptive=adaptive, max_delay=0.4)
        async with serve(routes) as (url, _log):
            await Crawler(replace(config(url, tmp_path / str(adaptive), fetch=fetch), politeness=polite)).run()
        gaps = [b - a for a, b in pairwise(calls)]
        assert len(gaps) == 5
        if adaptive:
            assert min(gaps[1:]) >= 0.39  # backed off to max-delay after the first 503
        else:
            assert max(gaps) < 0.2


def test_host_state_is_bounded() -> None:
    politeness = Politeness(PolitenessConfig(delay=0), robots=ALLOW_ALL, max_hosts=1000)
    for i in range(100_000):
        host = f"http://h{i}.test"
        politeness.reserve(host, 0.0)
        politeness.release(host)
    assert len(politeness._hosts) <= 1100  # forgotten in batches, at 10% over the bound
    busy = "http://busy.test"
    politeness.reserve(busy, 0.0)
    for i in range(5000):
        politeness.free_slots(f"http://other{i}.test", 0.0)
    assert politeness.free_slots(busy, 1.0) == 1  # a host with a request in flight is never forgotten


def test_per_ip_limit_spans_host_names() -> None:
    from webtrawl.config import PolitenessConfig as Config

    politeness = Politeness(Config(per_host=4, per_ip=3, delay=0), robots=ALLOW_ALL)
    hosts = [f"http://name{i}.test" for i in range(3)]
    for host in hosts:  # learn each host's address from a first response
        politeness.reserve(host, 0.0)
        politeness.release(host, ip="127.0.0.5")
    assert politeness.free_slots(hosts[0], 1.0) == 3
    politeness.reserve(hosts[0], 1.0)
    politeness.reserve(hosts[1], 1.0)
    assert politeness.free_slots(hosts[2], 1.0) == 1
    politeness.reserve(hosts[2], 1.0)
    assert [politeness.free_slots(host, 1.0) for host in hosts] == [0, 0, 0]
    politeness.release(hosts[1])
    assert politeness.free_slots(hosts[0], 1.0) == 1


async def test_per_ip_limit_holds_across_host_names_in_a_crawl(tmp_path: Path) -> None:
    import asyncio

    in_flight = {"now": 0, "max": 0}

    async def slow(request: web.Request) -> web.StreamResponse:
        in_flight["now"] += 1
        in_flight["max"] = max(in_flight["max"], in_flight["now"])
        await asyncio.sleep(0.05)
        in_flight["now"] -= 1
        return web.Response(text=page(), content_type="text/html")

    names = [f"name{i}.test" for i in range(4)]
    routes: dict[str, Handler | str] = {f"/p{i}": slow for i in range(5)}
    async with serve(routes) as (url, _log):  # the routes are filled in once the port is known
        port = url.rsplit(":", 1)[1].rstrip("/")
        routes["/"] = page(*[f"http://{name}:{port}/p{i}" for name in names for i in range(5)])
        fetch = FetchConfig(backoff=0.05, resolve=tuple(f"{name}:127.0.0.1" for name in names))
        cfg = config(f"http://{names[0]}:{port}/", tmp_path, scope=ScopeConfig(mode="any"), fetch=fetch)
        report = await Crawler(replace(cfg, politeness=PolitenessConfig(per_host=4, per_ip=2, delay=0))).run()
    assert report.done_total == 21
    assert in_flight["max"] == 2
