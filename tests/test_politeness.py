"""Politeness end to end: robots.txt by Google's rules, X-Robots-Tag, adaptive delays, bounded host state."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web

from tests.crawls import connect
from tests.test_crawl_features import Handler, config, page, serve
from webtrawl import Crawler, FetchConfig, PolitenessConfig, ScopeConfig
from webtrawl.fetch.robots import ALLOW_ALL, RobotsRules, parse_robots
from webtrawl.politeness import Politeness


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
    assert failures(tmp_path) == {url: "robots.txt unreachable (HTTP 500)"}


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


HOST = "http://a.test"


def ready(config: PolitenessConfig, rules: RobotsRules = ALLOW_ALL) -> Politeness:
    politeness = Politeness(config, robots=None)
    politeness.set_rules(HOST, rules)
    return politeness


def test_a_delay_lets_one_request_start_per_delay_whatever_the_host_limit() -> None:
    # The scheduler's own clock (`now`): what it guarantees, measured without a server's timestamps.
    politeness = ready(PolitenessConfig(per_host=2, delay=0.1))
    assert politeness.free_slots(HOST, 10.0) == 1  # with a delay, one at a time
    politeness.reserve(HOST, 10.0)
    politeness.started(HOST, 10.0)
    assert politeness.free_slots(HOST, 10.099) == 0
    assert politeness.wait(HOST, 10.099) == pytest.approx(10.1)
    assert politeness.free_slots(HOST, 10.1) == 1
    politeness.reserve(HOST, 10.1)
    politeness.started(HOST, 10.15)  # the delay counts from the request's start
    assert politeness.free_slots(HOST, 10.2) == 0 and politeness.free_slots(HOST, 10.25) == 0  # two in flight
    politeness.release(HOST)
    assert politeness.free_slots(HOST, 10.25) == 1


def test_robots_crawl_delay_raises_the_delay_up_to_its_cap() -> None:
    slow = parse_robots("User-agent: *\nCrawl-delay: 0.25\n", "webtrawl")
    assert ready(PolitenessConfig(delay=0), slow).delay(HOST) == 0.25
    greedy = parse_robots("User-agent: *\nCrawl-delay: 3600\n", "webtrawl")
    assert ready(PolitenessConfig(delay=0, max_crawl_delay=30), greedy).delay(HOST) == 30


def test_adaptive_delay_backs_off_after_an_overload_and_follows_the_server_after() -> None:
    fixed = ready(PolitenessConfig(delay=0, adaptive=False, max_delay=0.4))
    fixed.reserve(HOST, 0.0)
    fixed.release(HOST, elapsed=0.01, overloaded=True)
    assert fixed.delay(HOST) == 0
    adaptive = ready(PolitenessConfig(delay=0, adaptive=True, max_delay=0.4))
    adaptive.reserve(HOST, 0.0)
    adaptive.release(HOST, elapsed=0.01, overloaded=True)
    assert adaptive.delay(HOST) == 0.4  # at least a second, within max-delay
    for _ in range(50):  # quick answers bring it down again
        adaptive.reserve(HOST, 0.0)
        adaptive.release(HOST, elapsed=0.001)
    assert adaptive.delay(HOST) < 0.01


async def test_adaptive_delay_backs_off_on_503(tmp_path: Path) -> None:
    """End to end: each 503 is asked for once and recorded; their spacing is the scheduler's (tested above
    on its own clock): a server's timestamps on a loaded machine cannot show it."""
    served: list[str] = []

    async def flaky(request: web.Request) -> web.StreamResponse:
        served.append(request.path)
        return web.Response(status=503, headers={"Retry-After": "0"})

    routes: dict[str, Handler | str] = {"/": page(*[f"/f{i}" for i in range(6)])}
    for i in range(6):
        routes[f"/f{i}"] = flaky
    fetch = FetchConfig(backoff=0.01, max_attempts=1)
    polite = PolitenessConfig(per_host=1, delay=0, adaptive=True, max_delay=0.05)
    async with serve(routes) as (url, _log):
        await Crawler(replace(config(url, tmp_path, fetch=fetch), politeness=polite)).run()
    assert sorted(served) == [f"/f{i}" for i in range(6)]
    assert len(failures(tmp_path)) == 6


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


def test_the_hosts_that_may_have_become_ready_are_named_once_oldest_first() -> None:
    politeness = ready(PolitenessConfig(per_host=1, delay=0))
    assert politeness.take_ready() == [HOST]  # its robots.txt arrived (see `ready`)
    other = "http://other.test"
    politeness.set_rules(other, ALLOW_ALL)
    assert politeness.take_ready() == [other]
    for host in (HOST, other, HOST):
        politeness.reserve(host, 1.0)
        politeness.release(host)
    politeness.reserve(other, 2.0)
    politeness.cancel(other)
    assert politeness.take_ready() == [HOST, other]  # each once, in the order they were first readied
    assert politeness.take_ready() == []


def test_a_claim_gives_back_the_slots_it_reserved_and_did_not_hand_out() -> None:
    politeness = ready(PolitenessConfig(per_host=4, delay=0))
    for _ in range(3):
        politeness.reserve(HOST, 1.0)
    politeness.claimed(HOST, reserved=3, handed=1, now=1.5)
    assert politeness.active(HOST) == 1 and politeness.free_slots(HOST, 1.5) == 3
    politeness.claimed(HOST, reserved=0, handed=0, now=2.0)
    assert politeness.active(HOST) == 1


def test_per_ip_limits_learn_an_address_from_the_dns_cache_given_at_build_time() -> None:
    from webtrawl.config import PolitenessConfig as Config

    known = {"http://a.test": "127.0.0.5", "http://b.test": "127.0.0.5"}
    politeness = Politeness(Config(per_host=4, per_ip=1, delay=0), robots=ALLOW_ALL, address_of=known.get)
    assert politeness.free_slots("http://a.test", 0.0) == 1  # asked as a claim does: the address is learnt here
    politeness.reserve("http://a.test", 0.0)
    assert politeness.free_slots("http://a.test", 0.0) == 0  # before any response
    assert politeness.free_slots("http://b.test", 0.0) == 0  # the same address, another name
    assert politeness.free_slots("http://c.test", 0.0) == 4  # unknown: per-host limits only


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
