"""The test site's server: bytes as generated (gzip, chunked), redirects, request log and switches."""

from __future__ import annotations

import asyncio
import gzip
import signal
import subprocess
import sys
import time
import urllib.request

import aiohttp
import pytest

from tests.sites import SiteServer


async def get(url: str, **options: object) -> tuple[int, dict[str, str], bytes]:
    """One GET with a fresh session: status, headers, body exactly as sent (no decompression)."""
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.get(url, allow_redirects=False, **options) as response,  # type: ignore[arg-type]
    ):
        return response.status, dict(response.headers), await response.read()


@pytest.mark.parametrize("accept", ["gzip, deflate", "identity"])
async def test_bodies_arrive_as_generated_gzipped_or_chunked(site_server: SiteServer, accept: str) -> None:
    site = site_server.site
    routes = {path: route for path, route in site.routes.items() if route.gzip or route.chunked}
    assert sum(r.gzip for r in routes.values()) >= 20 and sum(r.chunked for r in routes.values()) >= 20
    for path, route in routes.items():
        status, headers, body = await get(site.url(path), headers={"Accept-Encoding": accept})
        gzipped = route.gzip and accept.startswith("gzip")
        assert status == route.status
        assert headers.get("Content-Encoding") == ("gzip" if gzipped else None)
        assert (headers.get("Transfer-Encoding") == "chunked") == route.chunked
        assert (gzip.decompress(body) if gzipped else body) == route.body
        assert headers["Content-Type"] == route.content_type


async def test_redirects_send_their_location_as_written(site_server: SiteServer) -> None:
    site = site_server.site
    redirects = {path: route for path, route in site.routes.items() if route.redirect}
    assert {route.status for route in redirects.values()} == {301, 302, 303, 307}
    for path, route in redirects.items():
        status, headers, _ = await get(site.url(path))
        assert (status, headers["Location"]) == (route.status, route.redirect.href)  # type: ignore[union-attr]


async def test_robots_txt_can_be_switched_off(site_server: SiteServer) -> None:
    status, _, body = await get(site_server.url + "robots.txt")
    assert (status, body.decode()) == (200, "User-agent: *\nDisallow: /private/\n")
    site_server.robots = False
    assert (await get(site_server.url + "robots.txt"))[0] == 404


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/nothing/", 404),
        ("/broken/", 500),
        ("/docs?x=1", 301),
        ("/files/logo.png", 200),
        ("/trap/x/x/x/x/x/", 200),
        ("/calendar/2026/01/", 200),
    ],
)
async def test_the_log_records_every_request_as_sent(site_server: SiteServer, path: str, status: int) -> None:
    assert (await get(site_server.url[:-1] + path))[0] == status
    (entry,) = site_server.log
    host = site_server.site.host
    assert (entry.path, entry.host, entry.method, entry.status) == (path, host, "GET", status)
    assert entry.time <= time.monotonic()


async def test_another_host_name_reaches_the_same_site_as_another_host_key(site_server: SiteServer) -> None:
    status, _, _ = await get(site_server.site.other_origin + "/")
    assert status == 200
    assert [entry.host for entry in site_server.log] == [site_server.site.other_origin.removeprefix("http://")]


async def test_delay_holds_requests_in_flight_per_host() -> None:
    async with SiteServer(pages=10, delay=0.2) as server:
        start = time.monotonic()
        other = get(server.site.other_origin + "/")
        results = await asyncio.gather(*(get(server.url) for _ in range(4)), other)
        assert time.monotonic() - start >= 0.2
        assert {status for status, _, _ in results} == {200}
        assert dict(server.max_in_flight) == {server.site.host: 4, server.site.other_origin[7:]: 1}


async def test_a_host_that_is_down_closes_every_connection_until_it_is_up() -> None:
    async with SiteServer(pages=10) as server:
        server.set_down(True)
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await get(server.url)
        assert server.log and {entry.status for entry in server.log} == {None}
        server.set_down(False)
        assert (await get(server.url))[0] == 200
        assert server.log[-1].status == 200


async def test_head_requests_get_headers_only(site_server: SiteServer) -> None:
    chunked = next(path for path, route in site_server.site.routes.items() if route.chunked)
    async with aiohttp.ClientSession() as session:
        for path in (chunked, "/"):
            async with session.head(site_server.site.url(path)) as response:
                assert (response.status, await response.read()) == (200, b"")


def test_python_m_tests_sites_serves_until_interrupted() -> None:
    command = [sys.executable, "-m", "tests.sites", "--port", "0", "--pages", "20", "--seed", "3"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()
            assert process.stdout.readline().startswith("  seed 3: 35 pages")
            with urllib.request.urlopen(url) as response:
                assert b"Page 0" in response.read()
            process.send_signal(signal.SIGINT)
            # Waits for the exit itself; the bound only ends a hang (a loaded machine took over 10 s).
            assert process.wait(timeout=120) == 0
        finally:
            if process.poll() is None:
                process.kill()
