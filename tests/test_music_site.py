"""The music site behaves as its ground truth says: pages, playlists, tags, ranges, faults and signed streams."""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import AsyncIterator
from urllib.parse import urljoin, urlsplit

import aiohttp
import mutagen
import pytest
from multidict import CIMultiDictProxy

from tests.sites.music import MusicSite

MEDIA_PAGES = {"/direct", "/player", "/og", "/jsonld", "/playlist", "/scripted"}


@pytest.fixture
async def site() -> AsyncIterator[MusicSite]:
    async with MusicSite() as music:
        yield music


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    # unsafe: the default jar keeps no cookies from an IP-address host such as 127.0.0.1
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar, headers={"User-Agent": "agent-one"}) as client:
        yield client


async def fetch(
    session: aiohttp.ClientSession, url: str, **headers: str
) -> tuple[int, CIMultiDictProxy[str], bytes, bool]:
    """Status, headers, the body bytes that arrived, and whether the body arrived whole."""
    async with session.get(url, headers=headers) as response:
        body = bytearray()
        try:
            async for chunk in response.content.iter_any():
                body += chunk
        except aiohttp.ClientPayloadError:
            return response.status, response.headers, bytes(body), False
        return response.status, response.headers, bytes(body), True


async def test_every_page_is_linked_from_home_and_its_media_is_served(
    site: MusicSite, session: aiohttp.ClientSession
) -> None:
    assert {page for page, media in site.expected.items() if media} == MEDIA_PAGES
    _, _, home, _ = await fetch(session, site.url + "/")
    for page in site.expected:
        if not page.startswith("/track/"):
            assert f'href="{page}"' in home.decode()
    playlist_texts = {}
    for playlist in site.playlists:
        _, _, text, _ = await fetch(session, playlist)
        playlist_texts[playlist] = text.decode()
    for page, media in site.expected.items():
        status, headers, html, _ = await fetch(session, site.url + page)
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        for url in media:
            file_name = url.rsplit("/", 1)[1]
            assert file_name in html.decode() or any(file_name in text for text in playlist_texts.values())
            track = site.served(urlsplit(url).path)
            status, headers, body, whole = await fetch(session, url)
            assert (status, whole, headers["Content-Type"]) == (200, True, track.content_type)
            assert hashlib.sha256(body).hexdigest() == track.sha256
    players = {site.url + site.tracks[n].path for n in ("player-src", "player-source", "clip")}
    assert site.expected["/player"] == players | {site.url + "/files/clip.vtt"}


async def test_scripted_page_escapes_one_url_and_playlists_list_theirs(
    site: MusicSite, session: aiohttp.ClientSession
) -> None:
    _, _, html, _ = await fetch(session, site.url + "/scripted")
    escaped = (site.url + "/files/scripted.wav").replace("/", "\\/")
    assert escaped in html.decode() and site.url + "/files/scripted.wav" not in html.decode()
    assert site.url + "/files/blob.mp3" in html.decode()
    assert site.expected["/playlist"] == set().union(*site.playlists.values())
    for playlist, listed in site.playlists.items():
        status, headers, text, _ = await fetch(session, playlist)
        assert status == 200 and headers["Content-Type"] in ("audio/x-mpegurl", "audio/x-scpls")
        lines = [line.removeprefix("File1=") for line in text.decode().splitlines()]
        entries = {urljoin(playlist, line) for line in lines if line.startswith(("http", "../"))}
        assert entries == listed


async def test_mutagen_reads_title_artist_and_duration(site: MusicSite, session: aiohttp.ClientSession) -> None:
    for name in ("direct-mp3", "jsonld", "direct-wav"):
        track = site.tracks[name]
        _, _, body, _ = await fetch(session, site.url + track.path)
        audio = mutagen.File(io.BytesIO(body))
        assert audio is not None and audio.info.length == pytest.approx(track.duration, abs=0.01)
        if track.title is None:
            assert audio.tags is None
        else:
            assert (str(audio.tags["TIT2"]), str(audio.tags["TPE1"])) == (track.title, track.artist)
    for track in site.tracks.values():
        if track.duration is not None:
            audio = mutagen.File(io.BytesIO(track.body))
            assert audio.info.length == pytest.approx(track.duration, abs=0.01)
            assert (audio.tags is None) == (track.title is None)


async def test_ranges_validators_and_if_range(site: MusicSite, session: aiohttp.ClientSession) -> None:
    track = site.tracks["direct-mp3"]
    url, size = site.url + track.path, len(track.body)
    status, headers, body, _ = await fetch(session, url, Range="bytes=10-19")
    assert (status, headers["Content-Range"], body) == (206, f"bytes 10-19/{size}", track.body[10:20])
    assert (headers["ETag"], headers["Last-Modified"], headers["Accept-Ranges"]) == (
        track.etag,
        track.last_modified,
        "bytes",
    )
    status, _, body, _ = await fetch(session, url, Range="bytes=-100")
    assert (status, body) == (206, track.body[-100:])
    status, headers, body, _ = await fetch(session, url, Range=f"bytes={size - 5}-{size + 50}")
    assert (status, headers["Content-Range"], body) == (206, f"bytes {size - 5}-{size - 1}/{size}", track.body[-5:])
    status, headers, _, _ = await fetch(session, url, Range=f"bytes={size}-")
    assert (status, headers["Content-Range"]) == (416, f"bytes */{size}")
    for validator in (track.etag, track.last_modified):
        status, _, body, _ = await fetch(session, url, Range="bytes=100-", **{"If-Range": validator})
        assert (status, body) == (206, track.body[100:])
    status, _, body, _ = await fetch(session, url, Range="bytes=100-", **{"If-Range": '"stale"'})
    assert (status, body) == (200, track.body)
    async with session.head(url) as response:
        assert (response.status, response.content_length, await response.read()) == (200, size, b"")
    hit = site.requests[-2]
    assert (hit.method, hit.path, hit.status, hit.headers["range"], hit.headers["if-range"]) == (
        "GET",
        track.path,
        200,
        "bytes=100-",
        '"stale"',
    )


async def test_drops_cut_successive_attempts_at_fractions_of_the_file(
    site: MusicSite, session: aiohttp.ClientSession
) -> None:
    track = site.tracks["og"]
    url, size = site.url + track.path, len(track.body)
    fault = site.set_fault(track.path, drops=[0.3, 0.7])
    status, _, first, whole = await fetch(session, url)
    assert (status, len(first), whole) == (200, int(0.3 * size), False)
    status, _, second, whole = await fetch(session, url, Range=f"bytes={len(first)}-", **{"If-Range": track.etag})
    assert (status, len(first) + len(second), whole) == (206, int(0.7 * size), False)
    got = first + second
    status, _, third, whole = await fetch(session, url, Range=f"bytes={len(got)}-", **{"If-Range": track.etag})
    assert (status, whole, hashlib.sha256(got + third).hexdigest()) == (206, True, track.sha256)
    assert fault.attempts == 3
    ranges = [hit.headers.get("Range") for hit in site.requests if hit.path == track.path]
    assert ranges == [None, f"bytes={len(first)}-", f"bytes={len(got)}-"]


async def test_change_serves_a_new_version_after_the_first_attempt(
    site: MusicSite, session: aiohttp.ClientSession
) -> None:
    old = site.tracks["player-source"]
    site.set_fault(old.path, drops=[0.5], change=True)
    new = site.changed[old.path]
    assert (new.etag != old.etag, new.last_modified != old.last_modified, new.sha256 != old.sha256) == (True,) * 3
    _, headers, first, whole = await fetch(session, site.url + old.path)
    assert (headers["ETag"], len(first), whole) == (old.etag, len(old.body) // 2, False)
    status, headers, body, whole = await fetch(
        session, site.url + old.path, Range=f"bytes={len(first)}-", **{"If-Range": old.etag}
    )
    assert (status, headers["ETag"], whole, hashlib.sha256(body).hexdigest()) == (200, new.etag, True, new.sha256)
    assert site.served(old.path) is new
    audio = mutagen.File(io.BytesIO(body))
    assert str(audio.tags["TIT2"]) == new.title != old.title
    assert audio.info.length == pytest.approx(new.duration, abs=0.01)


async def test_no_range_and_status_faults(site: MusicSite, session: aiohttp.ClientSession) -> None:
    track = site.tracks["mix-b"]
    site.set_fault(track.path, no_range=True)
    status, headers, body, _ = await fetch(session, site.url + track.path, Range="bytes=0-9")
    assert (status, body, "Accept-Ranges" in headers) == (200, track.body, False)
    for code in (404, 500):
        site.set_fault(track.path, status=code)
        status, _, _, _ = await fetch(session, site.url + track.path)
        assert status == code
    site.set_fault(track.path)
    status, _, body, _ = await fetch(session, site.url + track.path, Range="bytes=0-9")
    assert (status, body) == (206, track.body[:10])


async def test_large_and_added_files_are_served_like_media(session: aiohttp.ClientSession) -> None:
    async with MusicSite() as site:
        large = site.add_large_file("/big/file.bin", 3_000_017)
        small = site.add_file("/notes.txt", b"hello", "text/plain")
        assert len(large.body) == 3_000_017 and large.body[:64] != large.body[1_000_000:1_000_064]
        _, _, tail, _ = await fetch(session, site.url + large.path, Range="bytes=-1000")
        assert tail == large.body[-1000:]
        _, _, body, _ = await fetch(session, site.url + large.path)
        assert hashlib.sha256(body).hexdigest() == large.sha256
        _, headers, body, _ = await fetch(session, site.url + small.path)
        assert (body, headers["Content-Type"], headers["ETag"]) == (b"hello", "text/plain", small.etag)


async def test_a_stall_holds_until_the_site_closes(session: aiohttp.ClientSession) -> None:
    site = await MusicSite().start()
    track = site.tracks["radio"]
    site.set_fault(track.path, stall=0.25)
    received = bytearray()
    async with session.get(site.url + track.path, timeout=aiohttp.ClientTimeout(sock_read=0.2)) as response:
        with pytest.raises(asyncio.TimeoutError):
            async for chunk in response.content.iter_any():
                received += chunk
    assert (response.status, len(received)) == (200, int(0.25 * len(track.body)))
    await site.aclose()


async def test_signed_urls_need_the_cookie_the_same_agent_and_time(
    site: MusicSite, session: aiohttp.ClientSession
) -> None:
    track_id, track = next(iter(site.signed_tracks.items()))
    api = f"{site.url}/api/track/{track_id}"
    status, _, _, _ = await fetch(session, api)
    assert status == 403
    _, _, html, _ = await fetch(session, f"{site.url}/track/{track_id}")
    assert f'data-track-id="{track_id}"' in html.decode() and "/stream/" not in html.decode()
    assert site.expected[f"/track/{track_id}"] == set()
    signed = []
    for _ in range(2):
        async with session.get(api) as response:
            signed.append(site.url + (await response.json())["url"])
    assert signed[0] != signed[1] and all(url.startswith(f"{site.url}/stream/{track_id}?exp=") for url in signed)
    assert "sid=" in site.requests[-1].headers["Cookie"]
    for url in signed:
        status, _, body, _ = await fetch(session, url)
        assert (status, hashlib.sha256(body).hexdigest()) == (200, track.sha256)
    status, _, body, _ = await fetch(session, signed[0], Range="bytes=0-99")
    assert (status, body) == (206, track.body[:100])
    assert (await fetch(session, signed[0], **{"User-Agent": "agent-two"}))[0] == 403
    assert (await fetch(session, signed[0][:-1] + ("0" if signed[0][-1] != "0" else "1")))[0] == 403
    assert site.requests[-1].headers["User-Agent"] == "agent-one"
    site.sign_ttl = 0.05
    async with session.get(api) as response:
        short_lived = site.url + (await response.json())["url"]
    await asyncio.sleep(0.1)
    assert (await fetch(session, short_lived))[0] == 403
