"""HLS and DASH streams found on pages, collected as one file per stream (tests/sites/streams.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.crawls import fast_config
from tests.media.test_media_crawl import recorded
from tests.sites.streams import PAGES, StreamSite, manifest_path
from webtrawl import Crawler
from webtrawl.config import CrawlConfig, FetchConfig, MediaConfig
from webtrawl.models import MediaFile


def stream_config(
    site: StreamSite, out: Path, seed: str = "/", max_depth: int | None = 1, **media: object
) -> CrawlConfig:
    config = fast_config(site.url + seed, out, max_depth=max_depth)
    return replace(config, media=MediaConfig(**{"kinds": ("audio", "video"), **media}))  # type: ignore[arg-type]


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
    assert (clear.segments, clear.duration) == (6, 11.5)
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
        ("private-segment", "blocked"),
        ("private-key", "blocked"),
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


@pytest.mark.slow
async def test_a_crawl_killed_mid_stream_resumes_after_its_last_whole_segment(tmp_path: Path) -> None:
    async with StreamSite() as site:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "webtrawl", "crawl", site.url + "/page/slow", "--out", str(tmp_path),
            "--media", "video", "--delay", "0", "-q", "--allow-private", "127.0.0.0/8",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(600):  # until the fifth segment is asked for (the site holds it)
            if site.asked(lambda path: path == "/s/slow/seg4.ts"):
                break
            await asyncio.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        await process.wait()
        parts = list((tmp_path / "media").rglob("index.m3u8.part"))
        kept = parts[0].stat().st_size if parts else 0
        site.release.set()
        config = stream_config(site, tmp_path, "/page/slow", max_depth=None, kinds=("video",))
        await Crawler(replace(config, fetch=FetchConfig())).run()
        row = by_task(tmp_path)[f"{site.url}/s/slow/index.m3u8"]
        asked = Counter(site.asked(lambda path: "/seg" in path))
        assert stored(tmp_path, row) == site.expected("slow")
    assert kept == len(site.expected("slow")) // 8 * 4  # four whole segments
    assert [asked[f"/s/slow/seg{i}.ts"] for i in range(8)] == [1, 1, 1, 1, 2, 1, 1, 1]
    assert row.resumes == 1 and row.segments == 8


needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg (.ci/run installs it)")


@needs_ffmpeg
@pytest.mark.parametrize("protocol", ["hls", "dash"])
async def test_media_remux_rewrites_a_real_stream_into_one_mp4(tmp_path: Path, protocol: str) -> None:
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    manifest = "index.m3u8" if protocol == "hls" else "manifest.mpd"
    make = ["-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod"] if protocol == "hls" else ["-f", "dash"]
    subprocess.run(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=duration=4:size=64x64:rate=10",
         "-f", "lavfi", "-i", "sine=duration=4", "-c:v", "libx264", "-c:a", "aac", *make, str(site_dir / manifest)],
        check=True,
    )  # fmt: skip
    kind = "application/x-mpegURL" if protocol == "hls" else "application/dash+xml"
    (site_dir / "index.html").write_text(f'<video><source src="{manifest}" type="{kind}"></video>')
    app = web.Application()
    app.router.add_static("/", site_dir)
    async with TestServer(app, host="127.0.0.1") as server:
        config = fast_config(str(server.make_url("/index.html")), tmp_path / "out", max_depth=1)
        await Crawler(replace(config, media=MediaConfig(kinds=("video",), remux=True))).run()
    [row] = recorded(tmp_path / "out")
    assert row.error is None and row.path is not None and row.path.endswith(".mp4") and row.audio_path is None
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "stream=codec_type:format=duration", "-of", "json",
         str(tmp_path / "out" / row.path)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    found = json.loads(probe.stdout)
    assert sorted(stream["codec_type"] for stream in found["streams"]) == ["audio", "video"]
    assert float(found["format"]["duration"]) == pytest.approx(4, abs=0.5)
    assert row.content_type == "video/mp4" and row.stream == protocol
    assert [path.name for path in (tmp_path / "out" / "media").rglob("*") if path.is_file()] == [Path(row.path).name]


async def test_media_max_size_counts_the_whole_stream(tmp_path: Path) -> None:
    async with StreamSite() as site:
        limit = len(site.expected("clear")) - 1  # every segment fits; the stream does not
        await Crawler(stream_config(site, tmp_path, "/page/clear", max_size=limit)).run()
        [row] = by_task(tmp_path).values()
    assert row.path is None and row.error == f"too large (the stream is over --media-max-size {limit:,} bytes)"
    assert not list((tmp_path / "media").rglob("*.part*"))
