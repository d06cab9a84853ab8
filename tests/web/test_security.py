"""The dashboard's defences as a client meets them: no framing by other sites, the token out of addresses and
logs and long enough, and HEAD wherever GET. One small finished crawl serves the module."""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.crawls import fast_config
from tests.sites import SiteServer
from tests.test_cli import one_line_error, webtrawl
from tests.web.test_browse import TestClient
from webtrawl import Crawler
from webtrawl.errors import ConfigError
from webtrawl.web.app import create_app
from webtrawl.web.serve import Dashboard
from webtrawl.web.site import Site

TOKEN = "a-token-of-24-characters"


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("security")

    async def run() -> None:
        async with SiteServer(pages=30, calendar=False) as server:
            await Crawler(fast_config(server.url, out)).run()

    asyncio.run(run())
    return out


@pytest.fixture(scope="module")
def capture_id(crawl: Path) -> int:
    conn = sqlite3.connect(f"file:{crawl / 'crawl.db'}?mode=ro", uri=True)
    try:
        (found,) = conn.execute("SELECT MIN(id) FROM captures WHERE status = 200 AND warc_file IS NOT NULL").fetchone()
    finally:
        conn.close()
    return int(found)


@pytest.fixture
def client(crawl: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Site(crawl))) as client:
        yield client


def _views(capture_id: int) -> list[str]:
    return [
        "/", "/pages", "/search?q=page", "/failed", "/dropped", f"/page/{capture_id}", "/page/999999",
        "/api/overview", "/api/pages", "/api/failed", "/api/live", "/api/history", "/metrics",
        "/static/style.css", "/static/live.js", "/favicon.ico", "/openapi.json", "/docs", "/no/such/route",
    ]  # fmt: skip


# -- framing -----------------------------------------------------------------------------------------


def test_no_dashboard_response_may_be_framed(client: TestClient, capture_id: int) -> None:
    for view in _views(capture_id):
        response = client.get(view)
        assert response.headers.get_list("content-security-policy") == ["frame-ancestors 'none'"], view
        assert response.headers["x-frame-options"] == "DENY", view


def test_archived_copies_keep_their_sandbox_and_only_the_dashboard_frames_them(
    client: TestClient, capture_id: int
) -> None:
    for view in (f"/archive/{capture_id}/raw", f"/archive/{capture_id}/source"):
        response = client.get(view)
        (policy,) = response.headers.get_list("content-security-policy")
        directives = [d.strip() for d in policy.split(";")]
        assert directives[0] == "sandbox" and "default-src 'none'" in directives, view
        assert [d for d in directives if d.startswith("frame-ancestors")] == ["frame-ancestors 'self'"], view
        assert response.headers["x-frame-options"] == "SAMEORIGIN"
    for view in (f"/archive/{capture_id}", "/archive/999999", "/archive/not-archived?url=http://x.example/"):
        response = client.get(view)
        assert response.headers.get_list("content-security-policy") == ["frame-ancestors 'self'"], view
        assert response.headers["x-frame-options"] == "SAMEORIGIN"


def test_a_refusal_for_want_of_a_token_may_not_be_framed_either(crawl: Path) -> None:
    with TestClient(create_app(Site(crawl, token=TOKEN))) as client:
        response = client.get("/")
        assert response.status_code == 401
        assert response.headers["content-security-policy"] == "frame-ancestors 'none'"


# -- the token ---------------------------------------------------------------------------------------


def test_a_token_in_the_address_becomes_a_cookie_and_leaves_the_address(crawl: Path) -> None:
    with TestClient(create_app(Site(crawl, token=TOKEN))) as client:
        response = client.get(f"/pages?status=200&token={TOKEN}&limit=5", follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"] == "/pages?status=200&limit=5"
        assert TOKEN not in response.headers["location"]
        assert f"webtrawl_token={TOKEN}" in response.headers["set-cookie"]
        assert "HttpOnly" in response.headers["set-cookie"] and "SameSite=strict" in response.headers["set-cookie"]
        page = client.get(response.headers["location"])  # with the cookie alone
        assert page.status_code == 200 and 'id="pages"' in page.text

        assert client.get(f"/?token={TOKEN}", follow_redirects=False).headers["location"] == "/"
        client.cookies.clear()
        assert client.get("/?token=not-the-token-at-all", follow_redirects=False).status_code == 401
        assert client.get("/", follow_redirects=False).status_code == 401
        # a control request is not turned into a GET
        control = client.post(f"/api/control/stop?token={TOKEN}", headers={"X-Webtrawl-Control": "1"})
        assert control.status_code == 409  # refused as not running: it reached the control


def test_the_access_log_shows_no_token(crawl: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="uvicorn.access")
    with Dashboard(Site(crawl, token=TOKEN), port=0, log_requests=True).beside() as server:
        assert TOKEN in server.url
        with httpx.Client(timeout=10, follow_redirects=True) as client:
            assert client.get(server.url).status_code == 200  # 303 to "/", then the overview by its cookie
            assert client.get(f"{server.url}&status=200".replace("/?", "/pages?", 1)).status_code == 200
    lines = [record.getMessage() for record in caplog.records if record.name == "uvicorn.access"]
    assert any("token=…" in line for line in lines) and any("/pages?status=200" in line for line in lines), lines
    assert not any(TOKEN in line for line in lines), lines


def test_a_short_token_is_refused_in_one_line(crawl: Path) -> None:
    for short in ("x", "fifteen-chars!!"):
        with pytest.raises(ConfigError, match="at least 16"):
            Dashboard(Site(crawl, token=short), port=0)
    Dashboard(Site(crawl, token="sixteen-chars!!!"), port=0)._socket.close()
    code, _out, err = asyncio.run(webtrawl("serve", str(crawl), "--port", "0", "--token", "abc"))
    assert code == 2
    one_line_error(err, "token", "at least 16")
    code, _out, err = asyncio.run(webtrawl("serve", str(crawl), "--port", "0", env={"WEBTRAWL_TOKEN": "short"}))
    assert code == 2
    one_line_error(err, "at least 16")


# -- HEAD --------------------------------------------------------------------------------------------


def test_head_answers_wherever_get_does(client: TestClient, capture_id: int) -> None:
    views = [*_views(capture_id), f"/archive/{capture_id}", f"/archive/{capture_id}/raw"]
    for view in views:
        got, head = client.get(view), client.head(view)
        assert head.status_code == got.status_code, view
        assert head.headers["content-type"] == got.headers["content-type"], view
        assert head.content == b"", view
        if "content-length" in got.headers:
            assert head.headers["content-length"] == got.headers["content-length"], view


def test_head_of_the_event_stream_ends_at_its_headers(crawl: Path) -> None:
    with Dashboard(Site(crawl), port=0).beside() as server, httpx.Client(base_url=server.url, timeout=5) as client:
        response = client.head("/api/events")  # the GET never ends: a HEAD that ran it on would time out
        assert response.status_code == 200 and response.content == b""
        assert response.headers["content-type"].startswith("text/event-stream")
        assert client.head("/").status_code == 200 and re.match(r"\d+$", client.head("/").headers["content-length"])
