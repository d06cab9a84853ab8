"""One contract for every page fetcher the engine may be handed (`fetch.page.PageFetcher`): the page's own
response comes back as received, whatever happened, and nothing raises. A rendering fetcher adds its
rendering to a page it rendered, and only to one."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from webtrawl.config import CrawlConfig, RenderConfig
from webtrawl.fetch.fetcher import Fetcher
from webtrawl.fetch.page import HttpPages, PageFetcher
from webtrawl.fetch.robots import ALLOW_ALL, RobotsRules
from webtrawl.politeness import Politeness
from webtrawl.render.renderer import Renderer
from webtrawl.stats import Stats

pytestmark = pytest.mark.slow

PAGE = b"<!doctype html><title>Served</title><p>served text</p><script>document.title = 'Rendered'</script>"
GZIPPED = gzip.compress(PAGE, mtime=0)


async def _page(request: web.Request) -> web.Response:
    return web.Response(body=GZIPPED, headers={"Content-Type": "text/html", "Content-Encoding": "gzip"})


async def _hostile(request: web.Request) -> web.Response:
    """A page whose scripts take away what the renderer's own scripts use to read it."""
    script = "Set = null; Array.from = null; document.querySelectorAll = () => 42; history.pushState = null;"
    return web.Response(text=f"<title>Hostile</title><p>kept</p><script>{script}</script>", content_type="text/html")


async def _image(request: web.Request) -> web.Response:
    return web.Response(body=b"\x89PNG" + bytes(5000), content_type="image/png")


@pytest.fixture
async def server() -> AsyncIterator[TestServer]:
    app = web.Application()
    app.router.add_get("/page", _page)
    app.router.add_get("/image.png", _image)
    app.router.add_get("/hostile", _hostile)
    async with TestServer(app, host="127.0.0.1") as running:
        yield running


@pytest.fixture(params=["http", "render"])
async def pages(request: pytest.FixtureRequest, server: TestServer, tmp_path: Path) -> AsyncIterator[PageFetcher]:
    seed = str(server.make_url("/page"))
    config = CrawlConfig(seeds=(seed,), out=tmp_path, render=RenderConfig(mode="all", timeout=5))

    async def robots(origin: str) -> RobotsRules:
        return ALLOW_ALL

    async with AsyncExitStack() as stack:
        fetcher = await stack.enter_async_context(Fetcher(config.fetch, concurrency=4, seeds=[seed]))
        if request.param == "http":
            yield HttpPages(fetcher)
        else:
            politeness = Politeness(config.politeness, robots=ALLOW_ALL)
            yield await stack.enter_async_context(Renderer(config, fetcher, politeness, Stats(), robots))


async def test_a_page_comes_back_as_received(pages: PageFetcher, server: TestServer) -> None:
    fetched = await pages.fetch_page(str(server.make_url("/page")))
    assert fetched.outcome.status == 200
    assert fetched.outcome.body == GZIPPED, "the body as received, Content-Encoding kept"
    if isinstance(pages, Renderer):
        assert fetched.rendering is not None and fetched.rendering.title == "Rendered"
        assert "served text" in fetched.rendering.text
    else:
        assert fetched.rendering is None


async def test_an_error_status_is_an_outcome_and_is_not_rendered(pages: PageFetcher, server: TestServer) -> None:
    fetched = await pages.fetch_page(str(server.make_url("/missing")))
    assert (fetched.outcome.status, fetched.rendering) == (404, None)


async def test_a_dead_server_is_an_outcome(pages: PageFetcher, unused_tcp_port: int) -> None:
    fetched = await pages.fetch_page(f"http://127.0.0.1:{unused_tcp_port}/")
    assert fetched.outcome.status is None and fetched.outcome.error == "connection refused"
    assert fetched.rendering is None


async def test_a_private_address_is_refused(pages: PageFetcher) -> None:
    fetched = await pages.fetch_page("http://10.255.255.1/")
    assert (fetched.outcome.error or "").startswith("blocked"), fetched.outcome.error
    assert fetched.rendering is None


async def test_a_file_that_is_not_a_page_is_not_downloaded(pages: PageFetcher, server: TestServer) -> None:
    fetched = await pages.fetch_page(str(server.make_url("/image.png")))
    outcome = fetched.outcome
    assert (outcome.status, outcome.body_skipped, outcome.truncated, outcome.body) == (200, True, None, b"")
    assert fetched.rendering is None


async def test_a_page_that_breaks_the_renderer_s_scripts_is_still_fetched(
    pages: PageFetcher, server: TestServer
) -> None:
    """Unread, it keeps the title and text it was served with (see `pages._take_rendering`)."""
    fetched = await pages.fetch_page(str(server.make_url("/hostile")))
    assert fetched.outcome.status == 200 and b"kept" in fetched.outcome.body
    if isinstance(pages, Renderer):
        assert fetched.rendering is not None
        assert (fetched.rendering.error, fetched.rendering.read, fetched.rendering.text) == (None, False, "")
