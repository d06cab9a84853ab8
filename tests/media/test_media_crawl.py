"""Crawls of the local music site with media collection on: what lands in DIR/media and in the index."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from tests.crawls import fast_config
from tests.sites import music_resolver
from tests.sites.music import MusicSite
from webtrawl import Crawler
from webtrawl.config import CrawlConfig, MediaConfig
from webtrawl.models import MediaFile
from webtrawl.store.export import export_media
from webtrawl.store.shards import source_of


def media_config(site: MusicSite, out: Path, **media: object) -> CrawlConfig:
    return replace(fast_config(site.url + "/", out), media=MediaConfig(kinds=("audio", "video"), **media))


def recorded(out: Path) -> list[MediaFile]:
    conn = sqlite3.connect(out / "crawl.db")
    try:
        conn.row_factory = sqlite3.Row
        with (out / "export.jsonl").open("w") as stream:
            export_media([source_of(conn, "default")], "jsonl", stream)
    finally:
        conn.close()
    lines = (out / "export.jsonl").read_text().splitlines()
    return [MediaFile(**json.loads(line) | {"fetched_at": 0.0}) for line in lines]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def resolver_installed(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(music_resolver.install(tmp_path_factory.mktemp("plugins"))))


async def test_every_track_of_the_music_site_is_found_downloaded_and_indexed(
    tmp_path: Path, resolver_installed: None
) -> None:
    async with MusicSite() as site:
        report = await Crawler(media_config(site, tmp_path)).run()
        expected = {url for urls in site.expected.values() for url in urls}
        tracks = {site.url + track.path: track for track in site.tracks.values()}
        tracks[site.url + "/files/clip.vtt"] = site.served("/files/clip.vtt")
        signed = {f"musicsite:{track_id}": track for track_id, track in site.signed_tracks.items()}
    assert report.outcome == "finished"
    rows = recorded(tmp_path)
    assert [row.error for row in rows if row.error] == []
    by_url = {row.url: row for row in rows if row.task.startswith("generic:")}
    assert set(by_url) == expected
    for url in expected:
        row, track = by_url[url], tracks[url]
        assert row.sha256 == track.sha256
        assert row.path is not None and sha256(tmp_path / row.path) == track.sha256
        assert row.size == len(track.body)
        if track.title:
            assert (row.title, row.artist) == (track.title, track.artist)
            assert row.duration == pytest.approx(track.duration, abs=0.1)
    by_task = {row.task: row for row in rows}
    assert set(signed) <= set(by_task)
    for key, track in signed.items():
        row = by_task[key]
        assert row.sha256 == track.sha256 and row.page_url.startswith(site.url + "/track/")
        assert row.path is not None and sha256(tmp_path / row.path) == track.sha256
    assert not list((tmp_path / "media").rglob("*.part"))
