"""A rendered page's requests are sent as the page made them (method, body, the headers and cookies its
scripts set), archived with their bodies, and still under robots.txt: the apps of tests/sites/players.py
(`/apps`) only hand their players an address when asked that way."""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from tests.crawls import fast_config, path_of
from tests.pywb import add_and_serve, get
from tests.render.test_sniffer import Sniffed, sniff
from tests.sites.players import PlayerSite
from tests.sites.serving import serve
from webtrawl import Crawler
from webtrawl.config import RenderConfig
from webtrawl.render.renderer import CALLS_PER_PAGE
from webtrawl.store.crawls import crawl_id_of
from webtrawl.store.export import export
from webtrawl.store.replay import captures_of_url, read_response
from webtrawl.store.shards import source_of

pytestmark = pytest.mark.slow

QUERY = {"query": "media", "id": 8}


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Sniffed:
    return asyncio.run(sniff(tmp_path_factory.mktemp("apps"), "/apps"))


@pytest.mark.parametrize(
    ("app", "media_id"), [("keyed", 7), ("posted", 8), ("session", 9), ("consent", 10), ("token", 11)]
)
def test_a_player_that_asks_its_api_as_an_app_does_gets_its_track(apps: Sniffed, app: str, media_id: int) -> None:
    row = apps.rows[f"{apps.origin}/media/{media_id}.mp3"]
    assert row.error is None and row.path is not None, row
    assert (apps.out / row.path).read_bytes() == PlayerSite.body(media_id)
    assert row.page_url == f"{apps.origin}/app/{app}"


def test_a_post_reaches_the_server_as_the_page_sent_it(apps: Sniffed) -> None:
    [post] = [r for r in apps.requests if r.path == "/api/graphql"]
    assert post.method == "POST"
    assert json.loads(post.body) == QUERY
    assert post.headers["Content-Type"] == "application/json"
    assert post.headers["User-Agent"] == apps.agent  # the agent the signed address is bound to
    assert post.headers["Referer"] == f"{apps.origin}/app/posted"
    [keyed] = [r for r in apps.requests if r.path == "/api/keyed/7"]
    assert keyed.headers["X-Player-Key"] == "k7"
    [consent] = [r for r in apps.requests if r.path == "/api/consent/10"]
    assert "consent=yes" in consent.headers["Cookie"] and "visitor=v1" in consent.headers["Cookie"]


def test_a_post_is_archived_with_its_body_and_the_archive_checks(apps: Sniffed) -> None:
    posts = []
    warcs = sorted((apps.out / "warc").glob("*.warc.gz"))
    for path in warcs:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                uri = record.rec_headers.get_header("WARC-Target-URI")
                if record.rec_type == "request" and uri.endswith("/api/graphql"):
                    posts.append((record.http_headers.protocol, record.content_stream().read()))
    assert [(method, json.loads(body)) for method, body in posts] == [("POST", QUERY)]
    checked = subprocess.run(
        [Path(sys.executable).parent / "warcio", "check", *map(str, warcs)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_robots_txt_keeps_a_page_s_post_from_being_sent(tmp_path: Path) -> None:
    result = await sniff(tmp_path, "/app/posted", disallow="/api/graphql")
    assert not [r for r in result.requests if r.path == "/api/graphql"]
    conn = sqlite3.connect(tmp_path / "crawl.db")
    try:
        dropped = conn.execute("SELECT url, reason FROM dropped").fetchall()
    finally:
        conn.close()
    assert dropped == [(f"{result.origin}/api/graphql", "robots.txt")]
    assert f"{result.origin}/media/8.mp3" not in result.rows


ECHO_PAGE = """<!doctype html><title>{name}</title><p>page {name}</p><script>
(async () => {{
  const got = await (await fetch('/echo.js')).text();
  const posted = await (await fetch('/echo.js', {{method: 'POST', body: 'from {name}'}})).text();
  document.body.insertAdjacentHTML('beforeend', `<p>${{got}} and ${{posted}}</p>`);
}})();
</script>"""


async def test_a_post_is_answered_by_the_server_never_from_what_a_get_or_another_post_got(tmp_path: Path) -> None:
    """`/echo.js` is a cacheable script: the renderer keeps its GET answer for the next pages, and must still
    send each page's POST, with that page's body."""
    posted: list[bytes] = []

    async def home(request: web.Request) -> web.Response:
        links = "".join(f'<a href="/{name}">{name}</a>' for name in ("one", "two", "three"))
        return web.Response(text=ECHO_PAGE.format(name="home") + links, content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=ECHO_PAGE.format(name=request.match_info["name"]), content_type="text/html")

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        if request.method == "POST":
            posted.append(body)
        answer = f"answer to {request.method} {body.decode()}".strip()
        return web.Response(text=answer, content_type="text/javascript", headers={"Cache-Control": "max-age=3600"})

    app = web.Application()
    app.router.add_get("/", home)
    app.router.add_get("/{name}", page)
    app.router.add_route("*", "/echo.js", echo)
    runner, url = await serve(app)
    try:
        config = replace(fast_config(url + "/", tmp_path, max_depth=1), render=RenderConfig(mode="all", timeout=8.0))
        await Crawler(config).run()
    finally:
        await runner.cleanup()
    names = ("home", "one", "two", "three")
    assert sorted(posted) == sorted(f"from {name}".encode() for name in names)
    conn = sqlite3.connect(tmp_path / "crawl.db")
    try:
        texts = {path_of(url): text for url, text in conn.execute("SELECT url, text FROM captures")}
    finally:
        conn.close()
    for name in names:
        assert f"answer to GET and answer to POST from {name}" in texts["/" if name == "home" else f"/{name}"]
    # Replay (the archive view, `show`) takes only a GET's answer for a copy of the URL.
    conn = sqlite3.connect(tmp_path / "crawl.db")
    try:
        copies = captures_of_url(conn, crawl_id_of(conn, "default"), f"{url}/echo.js")
        (posts,) = conn.execute("SELECT COUNT(*) FROM resources WHERE method = 'POST'").fetchone()
    finally:
        conn.close()
    assert copies and posts == len(names)
    for copy in copies:
        assert copy.warc_file is not None and copy.warc_offset is not None and copy.warc_length is not None
        record = tmp_path / "warc" / copy.warc_file
        assert read_response(record, copy.warc_offset, copy.warc_length, copy.url).body == b"answer to GET"


async def test_a_page_that_posts_without_end_is_stopped_at_its_budget(tmp_path: Path) -> None:
    posted: list[bytes] = []
    script = "for (let i = 0; i < 230; i++) { fetch('/beacon', {method: 'POST', body: String(i)}).catch(() => {}); }"

    async def home(request: web.Request) -> web.Response:
        return web.Response(text=f"<title>Beacons</title><script>{script}</script>", content_type="text/html")

    async def beacon(request: web.Request) -> web.Response:
        posted.append(await request.read())
        return web.Response(status=204)

    app = web.Application()
    app.router.add_get("/", home)
    app.router.add_post("/beacon", beacon)
    runner, url = await serve(app)
    try:
        # The page goes idle once its beacons are answered or refused: the time limit only bounds a stall.
        config = replace(fast_config(url + "/", tmp_path, max_depth=0), render=RenderConfig(mode="all", timeout=30.0))
        await Crawler(config).run()
    finally:
        await runner.cleanup()
    assert len(posted) == CALLS_PER_PAGE
    conn = sqlite3.connect(tmp_path / "crawl.db")
    try:
        dropped = conn.execute("SELECT url, reason FROM dropped").fetchall()
    finally:
        conn.close()
    assert dropped == [(f"{url}/beacon", f"over {CALLS_PER_PAGE} requests other than GET a page")]


def test_the_cdxj_row_of_a_post_names_its_method_and_body(apps: Sniffed) -> None:
    conn = sqlite3.connect(apps.out / "crawl.db")
    try:
        out = io.StringIO()
        export([source_of(conn, "default")], "cdxj", out)
    finally:
        conn.close()
    rows = [line.split(" ", 2) for line in out.getvalue().splitlines()]
    [(key, _stamp, fields)] = [row for row in rows if json.loads(row[2])["url"].endswith("/api/graphql")]
    assert key.endswith(")/api/graphql?__wb_method=post&id=8&query=media")  # as pywb's indexer keys it
    assert json.loads(fields) | {"method": "POST", "requestBody": "query=media&id=8"} == json.loads(fields)
    gets = [json.loads(row[2]) for row in rows if json.loads(row[2])["url"].endswith("/api/keyed/7")]
    assert gets and all("method" not in row for row in gets)


async def test_pywb_replays_a_post_by_its_body(apps: Sniffed, pywb_bin: Path, wayback: tuple[Path, str]) -> None:
    root, replay = wayback
    server = add_and_serve(pywb_bin, root, replay, sorted((apps.out / "warc").glob("*.warc.gz")))
    try:
        url = f"{replay}/id_/{apps.origin}/api/graphql"
        asked = json.dumps(QUERY).encode()
        status, _headers, body = await asyncio.to_thread(get, url, asked, {"Content-Type": "application/json"})
        assert status == 200 and json.loads(body)["url"].startswith("/media/8.mp3?")
    finally:
        server.kill()
        server.wait()


async def test_a_call_to_an_api_on_another_host_passes_its_cors_preflight(tmp_path: Path) -> None:
    """A header the script sets makes the browser check the call with the other host first (a CORS preflight,
    OPTIONS): Playwright answers that for a routed request inside the browser, and the call itself goes to
    the API, with its header."""
    seen: list[tuple[str, str | None]] = []

    async def api(request: web.Request) -> web.Response:
        seen.append((request.method, request.headers.get("X-Player-Key")))
        cors = {
            "Access-Control-Allow-Origin": "*",
            "Access-Control-Allow-Headers": "X-Player-Key",
            "Access-Control-Allow-Methods": "GET",
        }
        if request.method == "OPTIONS":
            return web.Response(status=204, headers=cors)
        if request.headers.get("X-Player-Key") != "k7":
            raise web.HTTPForbidden()
        return web.Response(text="<b>the key was right</b>", content_type="text/plain", headers=cors)

    api_app = web.Application()
    api_app.router.add_route("*", "/api", api)
    api_runner, api_url = await serve(api_app, "127.0.0.2")
    script = (
        f"fetch('{api_url}/api', {{headers: {{'X-Player-Key': 'k7'}}}}).then(r => r.text())"
        ".then(t => document.body.insertAdjacentText('beforeend', t));"
    )

    async def home(request: web.Request) -> web.Response:
        return web.Response(
            text=f"<title>Keyed</title><p>asked: </p><script>{script}</script>", content_type="text/html"
        )

    app = web.Application()
    app.router.add_get("/", home)
    runner, url = await serve(app)
    try:
        config = fast_config(url + "/", tmp_path, max_depth=0)
        fetch = replace(config.fetch, allow_private=("127.0.0.2/32",))  # the API's host: no seed's
        await Crawler(replace(config, fetch=fetch, render=RenderConfig(mode="all", timeout=8.0))).run()
    finally:
        await runner.cleanup()
        await api_runner.cleanup()
    assert seen == [("GET", "k7")]
    conn = sqlite3.connect(tmp_path / "crawl.db")
    try:
        (text,) = conn.execute("SELECT text FROM captures").fetchone()
    finally:
        conn.close()
    assert "the key was right" in text


async def test_with_cookies_kept_the_cookies_a_page_s_script_sets_go_with_the_host_s_next_pages(
    tmp_path: Path,
) -> None:
    """`--cookies`: /app/one's response sets `token=old`; its script sets `token=new`, `consent=yes` and a
    `cart[1]` the jar cannot hold. Its own call carries the browser's (newer) token, not the jar's; /app/two,
    fetched by the crawl's fetcher, carries the consent and the token the script set, as the browser holds
    them."""
    calls: dict[str, str] = {}
    documents: list[str] = []
    script = (
        "document.cookie = 'token=new; path=/'; document.cookie = 'consent=yes; path=/';"
        "document.cookie = 'cart[1]=x; path=/';"
        "fetch('/api/' + location.pathname.split('/').pop())"
        ".then(r => r.text()).then(t => document.body.insertAdjacentText('beforeend', t));"
    )

    async def one(request: web.Request) -> web.Response:
        html = f"<title>One</title><a href='/app/two'>two</a><p>api: </p><script>{script}</script>"
        response = web.Response(text=html, content_type="text/html")
        response.set_cookie("token", "old", path="/")
        return response

    async def two(request: web.Request) -> web.Response:
        documents.append(request.headers.get("Cookie", ""))
        if request.cookies.get("consent") != "yes":
            raise web.HTTPForbidden()
        return web.Response(text="<title>Two</title><p>consented</p>", content_type="text/html")

    async def api(request: web.Request) -> web.Response:
        calls[request.match_info["page"]] = request.headers.get("Cookie", "")
        return web.Response(text="api said yes" if request.cookies.get("token") == "new" else "api said no")

    app = web.Application()
    app.router.add_get("/app/one", one)
    app.router.add_get("/app/two", two)
    app.router.add_get("/api/{page}", api)
    runner, url = await serve(app)
    try:
        config = fast_config(url + "/app/one", tmp_path, max_depth=1)
        fetch = replace(config.fetch, cookies=True)
        await Crawler(replace(config, fetch=fetch, render=RenderConfig(mode="all", timeout=8.0))).run()
    finally:
        await runner.cleanup()
    assert "token=new" in calls["one"] and "token=old" not in calls["one"]
    [document] = documents
    assert "consent=yes" in document and "token=new" in document and "token=old" not in document
    conn = sqlite3.connect(tmp_path / "crawl.db")
    try:
        pages = {
            path_of(url): (status, text) for url, status, text in conn.execute("SELECT url, status, text FROM captures")
        }
    finally:
        conn.close()
    assert "api said yes" in pages["/app/one"][1]
    assert pages["/app/two"][0] == 200
