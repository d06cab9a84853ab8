"""The private-network guard: which addresses pass, and what a fetch or a crawl does at a refused one.

Only loopback addresses are ever connected to here; the other private ranges are judged on paper.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from tests.crawls import fast_config
from tests.test_cli import one_line_error, webtrawl
from webtrawl import Crawler, FetchConfig, ScopeConfig
from webtrawl.fetch.dns import AddressGuard
from webtrawl.fetch.fetcher import Fetcher
from webtrawl.request_options import parse_network

FAST = {"connect_timeout": 1.0, "read_timeout": 1.0, "total_timeout": 2.0}


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("8.8.8.8", True),
        ("1.1.1.1", True),
        ("2001:4860:4860::8888", True),
        ("::ffff:8.8.8.8", True),
        ("10.1.2.3", False),  # RFC 1918
        ("172.16.0.1", False),
        ("172.31.255.255", False),
        ("192.168.1.1", False),
        ("127.0.0.1", False),  # loopback
        ("127.0.0.2", False),
        ("::1", False),
        ("169.254.169.254", False),  # link-local: the cloud metadata service
        ("fe80::1", False),
        ("fc00::1", False),  # ULA
        ("fd12:3456::1", False),
        ("100.64.0.1", False),  # carrier-grade NAT
        ("0.0.0.0", False),  # unspecified
        ("::", False),
        ("224.0.0.1", False),  # multicast
        ("239.255.255.250", False),
        ("ff02::1", False),
        ("255.255.255.255", False),  # broadcast
        ("240.0.0.1", False),  # reserved
        ("192.0.2.1", False),  # documentation
        ("::ffff:10.1.2.3", False),  # IPv4-mapped
        ("::ffff:127.0.0.1", False),
        ("2002:a01:203::1", False),  # 6to4 around 10.1.2.3
        ("64:ff9b::a01:203", False),  # NAT64 around 10.1.2.3
        ("64:ff9b::808:808", True),  # NAT64 around 8.8.8.8
    ],
)
def test_default_guard(address: str, allowed: bool) -> None:
    verdict = AddressGuard().check(address)
    assert verdict == (None if allowed else f"blocked: private address {address}")


@pytest.mark.parametrize(
    ("networks", "address", "allowed"),
    [
        (["10.0.0.0/8"], "10.1.2.3", True),
        (["10.0.0.0/8"], "192.168.1.1", False),
        (["10.0.0.0/8"], "::ffff:10.1.2.3", True),
        (["127.0.0.2"], "127.0.0.2", True),
        (["127.0.0.2"], "127.0.0.3", False),
        (["0.0.0.0/0"], "192.168.1.1", True),
        (["0.0.0.0/0"], "169.254.169.254", False),  # link-local needs a link-local block
        (["::/0"], "fe80::1", False),
        (["169.254.0.0/16"], "169.254.169.254", True),
        (["169.254.169.254/32"], "169.254.169.254", True),
        (["fe80::/10"], "fe80::1", True),
        (["fe80::/10"], "169.254.169.254", False),
        (["fd00::/8"], "fd12:3456::1", True),
    ],
)
def test_allow_private(networks: list[str], address: str, allowed: bool) -> None:
    guard = AddressGuard(map(parse_network, networks))
    assert (guard.check(address) is None) == allowed


def test_exact_addresses_allowed_whatever_they_are() -> None:
    guard = AddressGuard()
    guard.allow("169.254.169.254")
    guard.allow("::1")
    assert guard.check("169.254.169.254") is None
    assert guard.check("::1") is None
    assert guard.check("169.254.169.253") is not None


@pytest.mark.parametrize("host", ["example.org", "localhost", "a.test", "", "host1", "2130706433", "127.1"])
def test_check_host_leaves_names_to_the_resolver(host: str) -> None:
    assert AddressGuard().check_host(host) is None


@asynccontextmanager
async def serve(host: str, routes: dict[str, web.Response] | None = None) -> AsyncIterator[tuple[str, list[str]]]:
    """A server on `host` answering every path with a page (or `routes`); yields its URL and the paths asked."""
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.path)
        return (routes or {}).get(request.path) or web.Response(text="<title>ok</title>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, 0).start()
    try:
        yield f"http://{host}:{runner.addresses[0][1]}/", seen
    finally:
        await runner.cleanup()


async def test_seed_address_passes_other_loopback_addresses_do_not() -> None:
    async with (
        serve("127.0.0.1") as (seed, _),
        serve("127.0.0.2") as (other, other_seen),
        Fetcher(FetchConfig(**FAST), concurrency=2, seeds=[seed]) as fetcher,
    ):
        assert (await fetcher.fetch(seed)).status == 200
        out = await fetcher.fetch(other)
    assert (out.status, out.error, out.retryable) == (None, "blocked: private address 127.0.0.2", False)
    assert other_seen == []


async def test_names_are_judged_by_their_addresses() -> None:
    async with serve("127.0.0.1") as (url, seen):
        by_name = url.replace("127.0.0.1", "localhost")
        async with Fetcher(FetchConfig(**FAST), concurrency=2) as fetcher:
            out = await fetcher.fetch(by_name)
        assert out.error in ("blocked: private address 127.0.0.1", "blocked: private address ::1")
        assert seen == []
        async with Fetcher(FetchConfig(**FAST), concurrency=2, seeds=[url]) as fetcher:
            out = await fetcher.fetch(by_name)  # localhost is 127.0.0.1 too, the seed's address
        assert (out.status, out.ip) == (200, "127.0.0.1")


@pytest.mark.parametrize(
    "settings",
    [
        {"resolve": ("a.test:127.0.0.2",)},  # a pinned name: the user chose its address
        {"allow_private": ("127.0.0.0/8",)},
        {"block_private": False},
    ],
    ids=["pinned", "allowed", "guard-off"],
)
async def test_ways_to_let_a_private_address_through(settings: dict[str, object]) -> None:
    async with serve("127.0.0.2") as (url, seen):
        if "resolve" in settings:
            url = url.replace("127.0.0.2", "a.test")
        async with Fetcher(FetchConfig(**FAST, **settings), concurrency=2) as fetcher:  # type: ignore[arg-type]
            out = await fetcher.fetch(url)
    assert (out.status, out.error, out.ip) == (200, None, "127.0.0.2")
    assert seen == ["/"]


async def test_unknown_name_fails_for_good() -> None:
    async with Fetcher(FetchConfig(**FAST), concurrency=2) as fetcher:
        out = await fetcher.fetch("http://no-such-host.invalid/")
    assert (out.status, out.error, out.retryable) == (None, "dns: name not found", False)


def failures(out: Path) -> dict[str, str]:
    conn = sqlite3.connect(f"file:{out / 'crawl.db'}?mode=ro", uri=True)
    return dict(conn.execute("SELECT url, reason FROM urls WHERE state = 3").fetchall())


@pytest.mark.parametrize("allowed", [False, True])
async def test_crawl_redirect_to_another_loopback_address(tmp_path: Path, allowed: bool) -> None:
    async with serve("127.0.0.2") as (target, target_seen):
        moved = web.Response(status=302, headers={"Location": target + "page"})
        async with serve("127.0.0.1", {"/": moved}) as (seed, _):
            settings = {"allow_private": ("127.0.0.2/32",)} if allowed else {}
            fetch = FetchConfig(backoff=0.05, **FAST, **settings)  # type: ignore[arg-type]
            report = await Crawler(fast_config(seed, tmp_path, fetch=fetch, max_depth=1)).run()
    if allowed:
        assert "/page" in target_seen
        assert (report.done_total, report.failed_total) == (2, 0)
    else:
        assert target_seen == []  # not even robots.txt was asked for
        assert failures(tmp_path) == {target + "page": "blocked: private address 127.0.0.2"}


async def test_crawl_records_dns_failures(tmp_path: Path) -> None:
    links = '<a href="http://no-such-host.invalid/x">x</a>'
    page = web.Response(text=links, content_type="text/html")
    async with serve("127.0.0.1", {"/": page}) as (seed, _):
        fetch = FetchConfig(backoff=0.05, **FAST)
        await Crawler(fast_config(seed, tmp_path, fetch=fetch, scope=ScopeConfig(mode="any", max_depth=1))).run()
    assert failures(tmp_path) == {"http://no-such-host.invalid/x": "dns: name not found"}


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--resolve", "nocolon"], "bad resolve entry 'nocolon'"),
        (["--resolve", "a.test:not-an-ip"], "bad resolve entry"),
        (["--allow-private", "999.1.1.1/99"], "bad allow-private network '999.1.1.1/99'"),
        (["--auth", "x"], "bad auth for 'x'"),
        (["--auth", "a.test:secret"], "bad auth for 'a.test'"),  # the password is not echoed
        (["--header", "no colon"], "bad header 'no colon'"),
        (["--header", "Bad Name: x"], "bad header"),
        (["--proxy", "socks5://127.0.0.1:1080"], "bad proxy"),
        (["--dns-ttl", "5"], "dns-ttl must be between 60 and 3600"),
    ],
)
async def test_bad_values_are_usage_errors(tmp_path: Path, flags: list[str], fragment: str) -> None:
    code, _out, err = await webtrawl("crawl", "http://127.0.0.1:9/", "--out", str(tmp_path), *flags)
    assert code == 2
    one_line_error(err, fragment)
    assert "secret" not in err


async def test_cli_headers_auth_and_cookies_per_host(tmp_path: Path) -> None:
    seen: list[tuple[str, str, dict[str, str]]] = []

    async def handle(request: web.Request) -> web.Response:
        host = request.headers["Host"]
        seen.append((host.split(":")[0], request.path, dict(request.headers)))
        if request.path == "/robots.txt":
            return web.Response(status=404)
        if host.startswith("a.test") and request.path == "/":
            port = host.split(":")[1]
            return web.Response(status=302, headers={"Location": f"http://b.test:{port}/", "Set-Cookie": "sid=1"})
        return web.Response(text='<a href="/x">x</a>', content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        code, _out, err = await webtrawl(
            *("crawl", f"http://a.test:{port}/", "--out", str(tmp_path), "-q", "--delay", "0"),
            *("--resolve", "a.test:127.0.0.1", "--resolve", f"b.test:{port}:127.0.0.1"),
            *("--auth", f"a.test:{port}:user:pw", "--header", "X-Crawl: yes", "--cookies"),
        )
    finally:
        await runner.cleanup()
    assert code == 0, err
    asked = {(host, path) for host, path, _ in seen}
    assert {("a.test", "/"), ("b.test", "/"), ("b.test", "/x")} <= asked
    assert {host for host, _ in asked} == {"a.test", "b.test"}
    assert all(headers["X-Crawl"] == "yes" for _, _, headers in seen)
    assert all(("Authorization" in headers) == (host == "a.test") for host, _, headers in seen)
    assert not any("Cookie" in headers for host, _, headers in seen if host == "b.test")
