"""The sniffer: with `--render --media`, the media a page's players ask for when they run (tests/sites/players.py)
are collected with the User-Agent, Referer and cookies the browser used, under a name that does not change."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.crawls import fast_config
from tests.media.test_media_crawl import recorded
from tests.sites.players import PlayerSite, Request
from webtrawl import Crawler
from webtrawl.config import MediaConfig, RenderConfig
from webtrawl.models import MediaFile

pytestmark = pytest.mark.slow


@dataclass
class Sniffed:
    out: Path
    rows: dict[str, MediaFile]
    """By the media's address without its query."""
    requests: list[Request]
    issued: dict[int, int]
    origin: str
    agent: str


async def sniff(out: Path, seed: str = "/", **site: object) -> Sniffed:
    async with PlayerSite(**site) as players:  # type: ignore[arg-type]
        config = fast_config(players.url + seed, out, max_depth=1)
        config = replace(
            config, render=RenderConfig(mode="all", timeout=8.0), media=MediaConfig(kinds=("audio", "video"))
        )
        await Crawler(config).run()
        rows = {row.task.removeprefix("sniffed:").split("?")[0]: row for row in recorded(out)}
        return Sniffed(out, rows, list(players.requests), dict(players.issued), players.url, config.fetch.user_agent)


@pytest.fixture(scope="module")
def sniffed(tmp_path_factory: pytest.TempPathFactory) -> Sniffed:
    return asyncio.run(sniff(tmp_path_factory.mktemp("sniffed")))


@pytest.mark.parametrize(
    ("player", "address", "media_id"),
    [
        ("load", "/media/1.mp3", 1),
        ("click", "/media/2.mp3", 2),
        ("timer", "/media/3.mp4", 3),
        ("typed", "/stream", 4),
        ("bytes", "/blob", 5),
    ],
)
def test_what_a_player_plays_is_collected_whole(sniffed: Sniffed, player: str, address: str, media_id: int) -> None:
    row = sniffed.rows[sniffed.origin + address]
    assert row.error is None and row.path is not None, row
    assert (sniffed.out / row.path).read_bytes() == PlayerSite.body(media_id)
    assert row.page_url.startswith(sniffed.origin + "/player/")
    assert row.url is not None and "signature=" in row.url  # the address the player was given


def test_the_download_carried_what_the_browser_sent(sniffed: Sniffed) -> None:
    served = [r for r in sniffed.requests if r.path.startswith("/media/1.mp3")]
    assert served, "the media was never asked for"
    for request in served:
        assert request.headers["User-Agent"] == sniffed.agent
        assert request.headers["Referer"].startswith(sniffed.origin + "/player/")
        assert "visitor=v1" in request.headers["Cookie"]


def test_an_address_named_media_is_not_downloaded_by_the_browser(sniffed: Sniffed) -> None:
    # One request for /media/2.mp3: the downloader's. The browser's was answered by no one.
    assert len([r for r in sniffed.requests if r.path.startswith("/media/2.mp3")]) == 1


def test_a_stream_a_player_fetches_is_collected_as_one_file(sniffed: Sniffed) -> None:
    row = sniffed.rows[sniffed.origin + "/hls/6/index.m3u8"]
    assert row.error is None and row.stream == "hls" and row.segments == 3
    assert row.path is not None and (sniffed.out / row.path).read_bytes() == PlayerSite.hls_body()


def test_the_same_media_on_two_pages_is_one_task_named_without_its_signature(sniffed: Sniffed) -> None:
    [task] = [row for row in recorded(sniffed.out) if "/media/1.mp3" in row.task]
    assert task.task == f"sniffed:{sniffed.origin}/media/1.mp3"
    assert task.page_url in (f"{sniffed.origin}/player/load", f"{sniffed.origin}/player/again")
    files = [path for path in (sniffed.out / "media").rglob("*") if path.is_file()]
    assert len(files) == 6 and not [path for path in files if path.name.endswith(".part")]


async def test_an_address_that_expired_is_asked_for_again_by_rendering_the_page(tmp_path: Path) -> None:
    result = await sniff(tmp_path, "/player/load", refuse_first={1})
    row = result.rows[result.origin + "/media/1.mp3"]
    assert row.error is None and row.path is not None
    assert (tmp_path / row.path).read_bytes() == PlayerSite.body(1)
    assert result.issued[1] == 2  # the page was rendered again for a fresh address
    refused, served = [r for r in result.requests if r.path.startswith("/media/1.mp3")]
    assert refused.path != served.path and row.url is not None and row.url.endswith(served.path)
