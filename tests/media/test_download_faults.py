"""Media downloads against a misbehaving file server: broken connections, changed files, no Range support,
a killed crawl, and the failures that are recorded with their reasons."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from aiohttp import web

from tests.crawls import fast_config
from tests.media.test_media_crawl import recorded, sha256
from tests.sites.music import MusicSite, Track
from webtrawl import Crawler
from webtrawl.config import FetchConfig, MediaConfig, PolitenessConfig
from webtrawl.models import MediaFile
from webtrawl.stats import CrawlReport

SIZE = 3 * 1024 * 1024
FILE = "/files/long.mp3"


def album(site: MusicSite, size: int = SIZE) -> Track:
    """A page linking one large audio file; returns the file."""
    site.add_file("/album.html", f'<!doctype html><title>Album</title><a href="{FILE}">long</a>'.encode(), "text/html")
    return site.add_large_file(FILE, size, "audio/mpeg")


async def crawl(site: MusicSite, out: Path, **media: object) -> tuple[CrawlReport, MediaFile]:
    fetch = FetchConfig(backoff=0.05, read_timeout=media.pop("read_timeout", 5), max_attempts=3)  # type: ignore[arg-type]
    config = replace(
        fast_config(site.url + "/album.html", out, fetch=fetch), media=MediaConfig(kinds=("audio",), **media)
    )
    report = await Crawler(config).run()
    (row,) = recorded(out)
    return report, row


def attempts(site: MusicSite) -> list[tuple[str | None, str | None, int | None]]:
    """(Range, If-Range, status) of each GET of the file."""
    return [
        (hit.headers.get("Range"), hit.headers.get("If-Range"), hit.status)
        for hit in site.requests
        if hit.path == FILE and hit.method == "GET"
    ]


async def test_a_download_broken_twice_resumes_twice_and_is_whole(tmp_path: Path) -> None:
    async with MusicSite() as site:
        track = album(site)
        site.set_fault(FILE, drops=[0.3, 0.7])
        _report, row = await crawl(site, tmp_path)
        sent = attempts(site)
    assert row.error is None and row.resumes == 2
    assert row.sha256 == track.sha256 == sha256(tmp_path / row.path)
    assert [status for *_, status in sent] == [200, 206, 206]
    (_, first_validator, _), *resumed = sent
    assert first_validator is None
    # Each resume asks for the rest after the bytes it kept: up to the cut (what was in flight there is lost).
    starts = [int(range_header.removeprefix("bytes=").removesuffix("-")) for range_header, _, _ in resumed]
    assert 0 < starts[0] <= int(SIZE * 0.3) < starts[1] <= int(SIZE * 0.7)
    assert [if_range for _, if_range, _ in resumed] == [track.etag, track.etag]


async def test_a_file_that_changed_between_attempts_is_downloaded_again_from_zero(tmp_path: Path) -> None:
    async with MusicSite() as site:
        album(site)
        site.set_fault(FILE, drops=[0.5], change=True)
        _report, row = await crawl(site, tmp_path)
        new = site.changed[FILE]
        sent = attempts(site)
    assert [status for *_, status in sent] == [200, 200]
    range_header, if_range, _status = sent[1]  # it asked to resume; the validator no longer matched
    assert 0 < int(range_header.removeprefix("bytes=").removesuffix("-")) <= SIZE // 2 and if_range is not None
    assert row.sha256 == new.sha256 == sha256(tmp_path / row.path)
    assert row.resumes == 0


async def test_a_server_without_range_support_gets_a_full_download(tmp_path: Path) -> None:
    async with MusicSite() as site:
        track = album(site)
        site.set_fault(FILE, drops=[0.4], no_range=True)
        _report, row = await crawl(site, tmp_path)
        sent = attempts(site)
    assert [status for *_, status in sent] == [200, 200]
    assert row.sha256 == track.sha256 == sha256(tmp_path / row.path) and row.resumes == 0


async def test_missing_slow_and_oversized_files_are_recorded_with_their_reasons(tmp_path: Path) -> None:
    async with MusicSite() as site:
        album(site)
        site.set_fault(FILE, status=404)
        report, missing = await crawl(site, tmp_path / "missing")
        site.set_fault(FILE, stall=0.2)
        _report, slow = await crawl(site, tmp_path / "slow", read_timeout=0.3)
        site.set_fault(FILE)
        _report, big = await crawl(site, tmp_path / "big", max_size=SIZE // 2)
    assert report.failures == {"HTTP 404": 1}
    assert missing.error == "HTTP 404" and missing.path is None and missing.page_url.endswith("/album.html")
    assert slow.error == "read timeout (after 3 attempts)" and slow.path is None
    assert big.error is not None and big.error.startswith("too large") and big.path is None
    for name in ("missing", "slow", "big"):
        assert not list((tmp_path / name / "media").rglob("*.part*"))


async def test_the_same_file_under_two_addresses_is_stored_once(tmp_path: Path) -> None:
    async with MusicSite() as site:
        body = os.urandom(200_000)
        site.add_file("/files/a.ogg", body, "audio/ogg")
        site.add_file("/files/b.ogg", body, "audio/ogg")
        links = '<a href="/files/a.ogg">a</a> <a href="/files/b.ogg">b</a>'
        site.add_file("/album.html", f"<!doctype html><title>Album</title>{links}".encode(), "text/html")
        config = replace(
            fast_config(site.url + "/album.html", tmp_path), media=MediaConfig(kinds=("audio",), concurrency=1)
        )
        await Crawler(config).run()
    first, second = recorded(tmp_path)
    assert first.path is not None and second.path is None and second.duplicate_of == first.task
    assert first.sha256 == second.sha256
    assert len([path for path in (tmp_path / "media").rglob("*") if path.is_file()]) == 1


@pytest.mark.slow
async def test_a_crawl_killed_mid_download_resumes_from_the_part_file(tmp_path: Path) -> None:
    async with MusicSite() as site:
        track = album(site, size=8 * 1024 * 1024)
        site.set_fault(FILE, stall=0.6)
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "webtrawl", "crawl", site.url + "/album.html", "--out", str(tmp_path),
            "--media", "audio", "--delay", "0", "-q", "--allow-private", "127.0.0.0/8",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        part = tmp_path / "media" / "127.0.0.1+{}".format(site.url.rsplit(":", 1)[1]) / "files" / "long.mp3.part"
        for _ in range(200):  # until the download stalls at 60%
            if part.exists() and part.stat().st_size >= int(0.6 * len(track.body)):
                break
            await asyncio.sleep(0.05)
        kept = part.stat().st_size
        process.send_signal(signal.SIGKILL)
        await process.wait()
        site.set_fault(FILE)
        _report, row = await crawl(site, tmp_path)
        sent = attempts(site)
    assert kept == int(0.6 * len(track.body))
    assert sent[-1][:2] == (f"bytes={kept}-", track.etag) and sent[-1][2] == 206
    assert row.resumes == 1 and row.sha256 == track.sha256 == sha256(tmp_path / row.path)


async def test_a_long_download_does_not_hold_up_the_pages_of_its_host(tmp_path: Path) -> None:
    async with MusicSite() as site:
        album(site)
        pages = "".join(f'<a href="/page{i}.html">{i}</a>' for i in range(12))
        site.add_file("/album.html", f'<!doctype html><a href="{FILE}">long</a>{pages}'.encode(), "text/html")
        for i in range(12):
            site.add_file(f"/page{i}.html", b"<!doctype html><title>page</title>", "text/html")
        site.set_fault(FILE, stall=0.1)  # the download hangs until its read timeout
        config = replace(
            fast_config(site.url + "/album.html", tmp_path, fetch=FetchConfig(read_timeout=1, max_attempts=1)),
            politeness=PolitenessConfig(per_host=1, delay=0),
            media=MediaConfig(kinds=("audio",)),
        )
        await Crawler(config).run()
        hits = list(site.requests)
    started = next(hit.time for hit in hits if hit.path == FILE)
    pages_done = max(hit.time for hit in hits if hit.path.startswith("/page"))
    assert len({hit.path for hit in hits if hit.path.startswith("/page")}) == 12
    assert pages_done - started < 1.0  # one slot per host, yet every page came while the file hung


async def test_media_on_private_addresses_are_refused_even_through_a_redirect(tmp_path: Path) -> None:
    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/album.html":
            links = '<a href="/go.mp3">redirected</a> <a href="http://10.255.255.1/direct.mp3">direct</a>'
            return web.Response(text=f"<!doctype html>{links}", content_type="text/html")
        if request.path == "/go.mp3":
            raise web.HTTPFound("http://169.254.169.254/latest/meta.mp3")
        raise web.HTTPNotFound()

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        seed = f"http://127.0.0.1:{runner.addresses[0][1]}/album.html"
        config = replace(
            fast_config(seed, tmp_path, fetch=FetchConfig(max_attempts=1)), media=MediaConfig(kinds=("audio",))
        )
        await Crawler(config).run()
    finally:
        await runner.cleanup()
    errors = {row.task.rsplit("/", 1)[1]: row.error for row in recorded(tmp_path)}
    assert set(errors) == {"go.mp3", "direct.mp3"}
    assert all(error is not None and error.startswith("blocked") for error in errors.values()), errors
