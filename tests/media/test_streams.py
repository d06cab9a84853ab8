"""HLS and DASH streams found on pages, collected as one file per stream (tests/sites/streams.py)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from tests.crawls import fast_config
from tests.media.test_media_crawl import recorded
from tests.sites.streams import PAGES, StreamSite, manifest_path
from webtrawl import Crawler
from webtrawl.config import CrawlConfig, FetchConfig, MediaConfig
from webtrawl.models import MediaFile


def stream_config(site: StreamSite, out: Path, seed: str = "/", **media: object) -> CrawlConfig:
    config = fast_config(site.url + seed, out, max_depth=1)
    return replace(config, media=MediaConfig(kinds=("audio", "video"), **media))  # type: ignore[arg-type]


def by_task(out: Path) -> dict[str, MediaFile]:
    return {row.task.removeprefix("playlist:"): row for row in recorded(out)}


def stored(out: Path, row: MediaFile) -> bytes:
    assert row.path is not None, row
    return (out / row.path).read_bytes()


async def test_every_stream_of_the_site_becomes_one_file_of_its_best_track(tmp_path: Path) -> None:
    async with StreamSite() as site:
        report = await Crawler(stream_config(site, tmp_path)).run()
        rows = by_task(tmp_path)
        manifests = {name: site.url + manifest_path(name) for name in PAGES}
        requested = [request.path for request in site.requests]
    assert report.outcome == "finished"
    assert set(rows) == set(manifests.values())
    for name, url in manifests.items():
        row = rows[url]
        assert row.error is None, (name, row.error)
        body = stored(tmp_path, row)
        assert body == site.expected(name), name
        audio = (tmp_path / row.audio_path).read_bytes() if row.audio_path else b""
        assert row.sha256 == hashlib.sha256(body).hexdigest() and row.size == len(body) + len(audio)
        assert row.stream == ("dash" if name.startswith("dash-") else "hls")
    clear = rows[manifests["clear"]]
    assert (clear.segments, clear.duration, clear.path) == (6, 11.5, clear.path)
    assert clear.path is not None and clear.path.endswith("master.ts")
    assert rows[manifests["audio"]].path.endswith(".aac") and rows[manifests["audio"]].kind == "audio"
    assert rows[manifests["fmp4"]].path.endswith(".mp4")
    # No segment or variant is a task of its own, and the low variant was never fetched.
    assert not any("/low/" in path for path in requested)
    assert all(row.stream for row in rows.values())
    # DASH: the best audio is a second file of the same task.
    for name in ("dash-number", "dash-time"):
        row = rows[manifests[name]]
        assert row.audio_path is not None and (tmp_path / row.audio_path).read_bytes() == site.dash_track(name, "a2")
    assert not list((tmp_path / "media").rglob("*.part*"))


async def test_the_same_stream_on_two_pages_is_stored_once(tmp_path: Path) -> None:
    async with StreamSite() as site:
        await Crawler(stream_config(site, tmp_path)).run()
        masters = site.asked(lambda path: path == "/s/clear/master.m3u8")
        segments = site.asked(lambda path: path.startswith("/s/clear/high/seg"))
    assert len(segments) == 6
    files = list((tmp_path / "media").rglob("master*"))
    assert [f.name for f in files] == ["master.ts"]
    assert len(masters) <= 2  # read as a playlist, then as the stream


@pytest.mark.parametrize(("quality", "variant"), [("worst", "low"), ("500k", "low"), ("2M", "high"), ("100k", "low")])
async def test_media_quality_chooses_the_variant(tmp_path: Path, quality: str, variant: str) -> None:
    async with StreamSite() as site:
        await Crawler(stream_config(site, tmp_path, "/page/clear", quality=quality)).run()
        asked = {path.split("/")[3] for path in site.asked(lambda path: "/seg" in path)}
        row = by_task(tmp_path)[f"{site.url}/s/clear/master.m3u8"]
        assert stored(tmp_path, row) == site.expected("clear" if variant == "high" else "clear-worst")
    assert asked == {variant}


async def test_a_segment_cut_mid_body_is_fetched_again(tmp_path: Path) -> None:
    async with StreamSite() as site:
        await Crawler(stream_config(site, tmp_path, "/page/cut")).run()
        row = by_task(tmp_path)[f"{site.url}/s/cut/index.m3u8"]
        third = site.asked(lambda path: path == "/s/cut/seg2.ts")
        assert stored(tmp_path, row) == site.expected("cut")
    assert len(third) == 2 and row.segments == 4


async def test_a_live_playlist_is_recorded_for_at_most_the_max_duration(tmp_path: Path) -> None:
    async with StreamSite() as site:
        await Crawler(stream_config(site, tmp_path, "/page/live", max_duration=3)).run()
        row = by_task(tmp_path)[f"{site.url}/s/live/index.m3u8"]
        assert stored(tmp_path, row) == site.live_expected("live", 3)
    assert (row.duration, row.segments) == (3.0, 3)


async def test_a_live_playlist_that_ends_is_recorded_whole(tmp_path: Path) -> None:
    async with StreamSite() as site:
        await Crawler(stream_config(site, tmp_path, "/page/live-end")).run()
        row = by_task(tmp_path)[f"{site.url}/s/live-end/index.m3u8"]
        assert stored(tmp_path, row) == site.live_expected("live-end", 5)
    assert row.segments == 5


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("loop", "is a master playlist again"),
        ("variant404", "HTTP 404"),
        ("endless", "timeout"),
        ("key403", "HTTP 403"),
        ("huge", "100,000 segments"),
        ("html", "not a playlist but a page (text/html)"),
    ],
)
async def test_a_bad_stream_fails_with_its_reason(tmp_path: Path, name: str, reason: str) -> None:
    async with StreamSite() as site:
        config = stream_config(site, tmp_path, f"/page/{name}")
        config = replace(config, fetch=FetchConfig(backoff=0.05, read_timeout=1, total_timeout=5, max_attempts=2))
        report = await Crawler(config).run()
        rows = by_task(tmp_path)
    assert report.outcome == "finished"
    [row] = rows.values()
    assert row.path is None and row.error is not None and reason.lower() in row.error.lower(), row.error
    assert not list((tmp_path / "media").rglob("*.part*"))
