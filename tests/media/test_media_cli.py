"""`webtrawl crawl --media`, `status` and `export --media` as a user runs them."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from tests.sites.music import MusicSite
from tests.sites.streams import StreamSite
from tests.test_cli import one_line_error, webtrawl
from webtrawl.store.export import MEDIA_FIELDS


@pytest.mark.slow
async def test_a_crawl_with_media_reports_and_exports_its_files(tmp_path: Path) -> None:
    async with MusicSite() as site:
        code, out, err = await webtrawl(
            "crawl", site.url + "/", "--out", str(tmp_path), "--media", "audio", "--delay", "0"
        )
        expected = {url for urls in site.expected.values() for url in urls if not url.endswith((".webm", ".vtt"))}
        shas = {site.url + track.path: track.sha256 for track in site.tracks.values()}
    assert code == 0, err
    assert "media files" in out
    code, shown, err = await webtrawl("status", str(tmp_path))
    assert code == 0, err
    assert re.search(rf"^  media +{len(expected)}  \(", shown, re.MULTILINE), shown
    code, exported, err = await webtrawl("export", str(tmp_path), "--media", "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(exported)))
    assert tuple(rows[0]) == MEDIA_FIELDS
    assert {row["url"]: row["sha256"] for row in rows} == {url: shas[url] for url in expected}
    assert all((tmp_path / row["path"]).is_file() for row in rows)


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--media", "sound"], ["unknown media kind(s) sound", "audio, video"]),
        (["--media", "audio", "--resolver", "nosuch"], ["unknown resolver(s) nosuch", "generic"]),
        (["--media", "audio", "--media-concurrency", "0"], ["media-concurrency"]),
        (["--media", "video", "--media-quality", "high"], ["--media-quality 'high'", "best, worst", "800k"]),
        (["--media", "video", "--media-max-duration", "0"], ["media-max-duration"]),
    ],
)
async def test_bad_media_settings_get_one_line(tmp_path: Path, flags: list[str], fragments: list[str]) -> None:
    code, _out, err = await webtrawl("crawl", "http://127.0.0.1:9/", "--out", str(tmp_path), *flags)
    assert code == 2
    one_line_error(err, *fragments)


async def test_media_remux_without_ffmpeg_says_so_once_and_keeps_the_joined_stream(tmp_path: Path) -> None:
    async with StreamSite() as site:
        code, _out, err = await webtrawl(
            "crawl", site.url + "/", "--out", str(tmp_path), "--media", "video", "--media-remux", "--delay", "0",
            env={"PATH": str(tmp_path / "no-programs")},
        )  # fmt: skip
    assert code == 0, err
    assert err.count("ffmpeg is not installed") == 1, err
    assert "Traceback" not in err
    assert sorted(path.suffix for path in (tmp_path / "media").rglob("*") if path.is_file()) == sorted(
        [".ts", ".ts", ".aac", ".mp4", ".ts", ".mp4", ".m4a", ".mp4", ".m4a", ".mp4", ".mp4"]
    )
