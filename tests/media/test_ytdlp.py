"""The yt-dlp bridge: which pages it claims, and a whole crawl through it against a local page."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web

from tests.crawls import fast_config
from tests.media.test_media_crawl import recorded
from webtrawl import Crawler
from webtrawl.config import MediaConfig
from webtrawl.errors import ConfigError
from webtrawl.media.resolvers import Page, Registry
from webtrawl.media.ytdlp import YtDlpResolver

VIDEO = b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 400
USER_AGENT = "webtrawl-test/1.0 (media)"


class AnyPageYtDlp(YtDlpResolver):
    """yt-dlp with its generic extractor allowed, so that it reads a page of a local site."""

    name = "ytdlp-any"
    generic = True


def install(directory: Path) -> Path:
    info = directory / "webtrawl_ytdlp_any-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: webtrawl-ytdlp-any\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[webtrawl.resolvers]\nytdlp-any = {__name__}:AnyPageYtDlp\n")
    return directory


def test_it_claims_pages_of_sites_yt_dlp_knows_and_no_other() -> None:
    resolver = YtDlpResolver()
    known = Page("https://www.youtube.com/watch?v=dQw4w9WgXcQ", "", [])
    unknown = Page("https://example.org/watch?v=dQw4w9WgXcQ", "", [])
    assert [task.key for task in resolver.find(known)] == ["ytdlp:https://www.youtube.com/watch?v=dQw4w9WgXcQ"]
    assert list(resolver.find(unknown)) == []


def test_it_is_used_only_when_named() -> None:
    assert Registry().get("ytdlp") is None
    assert isinstance(Registry(("ytdlp",)).get("ytdlp"), YtDlpResolver)


def test_naming_it_without_yt_dlp_installed_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yt_dlp", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r"needs yt-dlp: pip install 'webtrawl\[ytdlp\]'"):
        Registry(("ytdlp",))


@pytest.mark.slow
async def test_a_crawl_downloads_what_yt_dlp_resolves_with_the_crawls_user_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(install(tmp_path / "plugins")))

    async def watch(request: web.Request) -> web.Response:
        body = '<!doctype html><title>Clip</title><video src="/media/clip.mp4"></video>'
        return web.Response(text=body, content_type="text/html")

    async def clip(request: web.Request) -> web.Response:
        if request.headers.get("User-Agent") != USER_AGENT:  # bound to the client, as many sites bind theirs
            raise web.HTTPForbidden()
        return web.Response(body=VIDEO, content_type="video/mp4")

    app = web.Application()
    app.router.add_get("/watch", watch)
    app.router.add_get("/media/clip.mp4", clip)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        page = f"http://127.0.0.1:{runner.addresses[0][1]}/watch"
        config = fast_config(page, tmp_path / "out")
        config = replace(
            config,
            fetch=replace(config.fetch, user_agent=USER_AGENT),
            media=MediaConfig(kinds=("video",), resolvers=("ytdlp-any",)),
        )
        report = await Crawler(config).run()
    finally:
        await runner.cleanup()
    assert report.outcome == "finished"
    (row,) = recorded(tmp_path / "out")
    assert row.task == f"ytdlp-any:{page}" and row.error is None
    assert row.sha256 == hashlib.sha256(VIDEO).hexdigest()
    assert (tmp_path / "out" / row.path).read_bytes() == VIDEO
