"""A local music site: pages that expose audio and video in each way a media detector must handle, a player whose
stream URLs are signed per visitor, and a file server with Range, validators and per-file faults.

`async with MusicSite() as site:` serves on 127.0.0.1; `site.expected` is the ground truth for a generic detector.

| path                  | how the page exposes media                                                               |
|-----------------------|------------------------------------------------------------------------------------------|
| /direct               | `<a href>` to an .mp3 (root-relative) and a .wav (relative)                              |
| /player               | `<audio src>`; `<audio><source type>`; `<video><source><track src=.vtt>` (subtitles)    |
| /og                   | `<meta property="og:audio">`, absolute                                                   |
| /jsonld               | JSON-LD MusicRecording whose `audio` AudioObject has an absolute contentUrl              |
| /playlist             | links to /lists/mix.m3u (one absolute, one `../files/` entry) and /lists/radio.pls       |
| /scripted             | `"http:\\/\\/…"` in an inline script; a plain URL in `<script type="application/json">`  |
| /tracks → /track/ID   | only `data-track-id`; see the signed flow                                                |
| /, /about             | no media                                                                                 |

Signed flow: /track/ID sets a `sid` cookie; `GET /api/track/ID` with it answers
`{"url": "/stream/ID?exp=MS&n=N&sig=HEX"}` (403 without it), where exp is Unix time in milliseconds `sign_ttl` ahead,
n counts the URLs issued (so no two are alike), and sig is an HMAC of (ID, exp, n, the User-Agent that asked).
/stream/ID answers 403 to another User-Agent, a wrong sig, or after exp.

Every file (media, playlists, subtitles, and what `add_file`/`add_large_file` add) is served with single byte ranges
(206; 416 past the end), a strong ETag, Last-Modified and If-Range (a validator that does not match gets the whole
200); `set_fault` makes one path misbehave (see `Fault`). Every request is kept in `requests`.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import hashlib
import hmac
import io
import itertools
import math
import random
import secrets
import struct
import termios
import time
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from email.utils import formatdate
from typing import Self

from aiohttp import web
from multidict import CIMultiDictProxy
from mutagen.id3 import ID3, TIT2, TPE1
from mutagen.wave import WAVE

SIGN_TTL = 30.0
"""Seconds a signed stream URL stays valid, unless the site is told otherwise."""
CHUNK = 64 * 1024
"""Bytes per write when serving a body."""

_FIRST_MODIFIED = 1_735_689_600.0  # 2025-01-01T00:00:00Z
_WAV_RATE = 22_050
_MP3_HEADER = b"\xff\xfb\x94\xc4" + bytes(17)
"""MPEG-1 Layer III, 128 kbit/s, 48 kHz, mono, no CRC, then all-zero side information: a frame that codes no samples,
so decoders play 1152 samples of silence and skip the rest of its 384 bytes as ancillary data."""
_MP3_FRAME_BYTES = 384
_MP3_FRAME_SECONDS = 1152 / 48_000
_SIGNED_IDS = ("7f3a", "91c0", "e25b")
_LARGE_BLOCK = 1_000_003
"""A prime block length, so a large file's bytes never repeat at a round offset: a resume at the wrong byte shows."""


@dataclass(frozen=True, slots=True, eq=False)
class Track:
    """One version of one file the site serves; a changed file is a new Track."""

    name: str
    path: str
    """The URL path on the site, e.g. "/files/direct.mp3"."""
    body: bytes
    content_type: str
    title: str | None = None
    artist: str | None = None
    duration: float | None = None
    """Seconds of audio, as mutagen reads them; None for a file that is not audio."""
    modified: float = _FIRST_MODIFIED
    """Unix time sent as Last-Modified."""
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha256", hashlib.sha256(self.body).hexdigest())

    @property
    def etag(self) -> str:
        return f'"{self.sha256[:24]}"'

    @property
    def last_modified(self) -> str:
        return formatdate(self.modified, usegmt=True)


@dataclass(kw_only=True, slots=True)
class Fault:
    """How one path misbehaves; `MusicSite.set_fault` installs it in place of the path's previous one.

    An attempt is a GET that is answered with a body (200 or 206); HEAD, 416 and `status` answers are not attempts.
    """

    drops: tuple[float, ...] = ()
    """Attempt k loses its connection once the byte at drops[k] of the whole file (not of the range asked for) is
    reached: an attempt whose range starts past that point gets its headers and nothing else. Later attempts
    complete."""
    change: bool = False
    """From the second attempt on, the path serves `MusicSite.changed[path]`: a new body, ETag and Last-Modified."""
    no_range: bool = False
    """Range and If-Range are ignored (always the whole 200) and no Accept-Ranges is sent."""
    status: int | None = None
    """Every request is answered with this status and a short text body."""
    stall: float | None = None
    """Every attempt sends the file up to this fraction, then nothing more until the site closes."""
    attempts: int = 0
    """Attempts made so far."""


async def _sent(transport: asyncio.Transport) -> None:
    """Wait (10 s at most) until the client's kernel has acknowledged every byte written so far.

    Closing earlier can lose what is still in flight, by an amount that depends on the machine's load, so the
    bytes a client keeps from a broken attempt would vary from run to run."""
    sock = transport.get_extra_info("socket")
    for _ in range(1000):
        if not transport.get_write_buffer_size() and (sock is None or not _unacked(sock.fileno())):
            return
        await asyncio.sleep(0.01)


def _unacked(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.TIOCOUTQ, b"\0\0\0\0"))[0]


@dataclass(slots=True)
class Hit:
    """One request as the site saw it."""

    time: float
    """`time.monotonic()` when it arrived."""
    method: str
    path: str
    """Decoded, without the query."""
    query: str
    headers: CIMultiDictProxy[str]
    """Case-insensitive: `hit.headers.get("range")`."""
    status: int | None = None
    """None until the status is chosen (a stalled answer has its status as soon as its headers are sent)."""


@dataclass(frozen=True, slots=True)
class _Audio:
    """How to make one audio track, in any version (a later version has another tone, length and title)."""

    name: str
    path: str
    kind: str  # "mp3" or "wav"
    seconds: float
    tone: int
    title: str | None = None
    artist: str | None = None

    def track(self, version: int = 0) -> Track:
        tone, seconds = self.tone + 7 * version, self.seconds + version
        body, duration = _mp3(seconds, tone) if self.kind == "mp3" else _wav(seconds, tone)
        title = f"{self.title} (version {version + 1})" if version and self.title else self.title
        if title is not None:
            body = _tagged(body, self.kind, title, self.artist or "")
        content_type = "audio/mpeg" if self.kind == "mp3" else "audio/wav"
        modified = _FIRST_MODIFIED + 3600 * version
        return Track(self.name, self.path, body, content_type, title, self.artist, duration, modified)


_AUDIO = (
    _Audio("direct-mp3", "/files/direct.mp3", "mp3", 8, 1, "Open Road", "The Direct Links"),
    _Audio("direct-wav", "/files/direct.wav", "wav", 4, 2),
    _Audio("player-src", "/files/player-src.wav", "wav", 5, 3, "Audio Element", "Tag Soup"),
    _Audio("player-source", "/files/player-source.mp3", "mp3", 10, 4, "Source Child", "Tag Soup"),
    _Audio("og", "/files/og.mp3", "mp3", 9, 5, "Shared Card", "Open Graph"),
    _Audio("jsonld", "/files/jsonld.wav", "wav", 4.5, 6, "Linked Data", "Schema Org"),
    _Audio("mix-a", "/files/mix-a.mp3", "mp3", 7, 7, "Side A", "Mixtape"),
    _Audio("mix-b", "/files/mix-b.wav", "wav", 3.5, 8, "Side B", "Mixtape"),
    _Audio("radio", "/files/radio.mp3", "mp3", 6, 9, "Station Break", "Radio Pls"),
    _Audio("scripted", "/files/scripted.wav", "wav", 4, 10, "Escaped Slashes", "Script Kiddies"),
    _Audio("blob", "/files/blob.mp3", "mp3", 8, 11, "Json Blob", "Script Kiddies"),
    _Audio("signed-7f3a", "/stream/7f3a", "mp3", 9, 12, "Signed Away", "Token Bearers"),
    _Audio("signed-91c0", "/stream/91c0", "wav", 5, 13, "Bound to an Agent", "Token Bearers"),
    _Audio("signed-e25b", "/stream/e25b", "mp3", 7, 14, "Expires Soon", "Token Bearers"),
)


def _wav(seconds: float, tone: int) -> tuple[bytes, float]:
    """16-bit mono PCM: one sine cycle of 20 + 3·tone samples, repeated (cheap, and every tone's bytes differ)."""
    period = 20 + 3 * tone
    cycle = struct.pack(f"<{period}h", *(round(12_000 * math.sin(2 * math.pi * i / period)) for i in range(period)))
    cycles = round(seconds * _WAV_RATE / period)
    out = io.BytesIO()
    with wave.open(out, "wb") as pcm:
        pcm.setnchannels(1)
        pcm.setsampwidth(2)
        pcm.setframerate(_WAV_RATE)
        pcm.writeframes(cycle * cycles)
    return out.getvalue(), cycles * period / _WAV_RATE


def _mp3(seconds: float, tone: int) -> tuple[bytes, float]:
    """Silent MP3 frames whose ancillary bytes follow the tone (all below 0x80, so none looks like a frame sync)."""
    frames = round(seconds / _MP3_FRAME_SECONDS)
    ancillary = bytes(tone * i % 128 for i in range(_MP3_FRAME_BYTES - len(_MP3_HEADER)))
    return (_MP3_HEADER + ancillary) * frames, frames * _MP3_FRAME_SECONDS


def _tagged(body: bytes, kind: str, title: str, artist: str) -> bytes:
    """The file with ID3 title and artist: at its start for MP3, in an "id3 " chunk for WAV."""
    out = io.BytesIO(body)
    frames = (TIT2(encoding=3, text=title), TPE1(encoding=3, text=artist))
    if kind == "mp3":
        tags = ID3()
        for frame in frames:
            tags.add(frame)
        tags.save(out)
    else:
        audio = WAVE(out)
        audio.add_tags()
        assert audio.tags is not None
        for frame in frames:
            audio.tags.add(frame)
        audio.save(out)
    return out.getvalue()


def _video(version: int = 0) -> Track:
    """A WebM EBML signature and noise: looks like video to anything that reads types, plays in nothing."""
    body = b"\x1a\x45\xdf\xa3" + random.Random(f"clip-{version}").randbytes(300_000)
    return Track("clip", "/files/clip.webm", body, "video/webm", modified=_FIRST_MODIFIED + 3600 * version)


def _noise(name: str, path: str, size: int, content_type: str, version: int = 0) -> Track:
    block = random.Random(f"{path}-{version}").randbytes(min(size, _LARGE_BLOCK))
    whole, rest = divmod(size, len(block)) if block else (0, 0)
    body = b"".join([block] * whole + [block[:rest]])
    return Track(name, path, body, content_type, modified=_FIRST_MODIFIED + 3600 * version)


@functools.cache
def _catalogue() -> tuple[Track, ...]:
    """The first versions of the site's media, made once per process (they do not depend on the port)."""
    return (*(audio.track() for audio in _AUDIO), _video())


_PAGES: dict[str, tuple[str, str, str]] = {
    "/": ("Music", "", "<p>Listen in every way a site can offer it.</p>"),
    "/about": ("About", "", '<p>No music here. Back <a href="/">home</a>.</p>'),
    "/direct": (
        "Direct links",
        "",
        '<p><a href="/files/direct.mp3">Download the MP3</a> or <a href="files/direct.wav">the WAV</a>.</p>',
    ),
    "/player": (
        "Players",
        "",
        '<audio controls src="/files/player-src.wav"></audio>'
        '<audio controls><source src="/files/player-source.mp3" type="audio/mpeg"></audio>'
        '<video controls width="320"><source src="/files/clip.webm" type="video/webm">'
        '<track kind="subtitles" src="/files/clip.vtt" srclang="en" label="English"></video>',
    ),
    "/og": (
        "Shared card",
        '<meta property="og:title" content="Shared Card"><meta property="og:type" content="music.song">'
        '<meta property="og:audio" content="{o}/files/og.mp3"><meta property="og:audio:type" content="audio/mpeg">',
        "<p>A card for social sites.</p>",
    ),
    "/jsonld": (
        "Linked data",
        '<script type="application/ld+json">{"@context": "https://schema.org", "@type": "MusicRecording", '
        '"name": "Linked Data", "byArtist": {"@type": "MusicGroup", "name": "Schema Org"}, "audio": '
        '{"@type": "AudioObject", "contentUrl": "{o}/files/jsonld.wav", "encodingFormat": "audio/wav"}}</script>',
        "<p>Structured data only.</p>",
    ),
    "/playlist": (
        "Playlists",
        "",
        '<p><a href="/lists/mix.m3u">The mixtape (M3U)</a> and <a href="/lists/radio.pls">the radio</a>.</p>',
    ),
    "/scripted": (
        "Scripted",
        "",
        '<div id="player"></div><script>var player = {"title": "Escaped Slashes", '
        '"src": "{o/}\\/files\\/scripted.wav"};</script>'
        '<script type="application/json" id="data">{"tracks": [{"file": "{o}/files/blob.mp3"}]}</script>',
    ),
    "/tracks": (
        "Tracks",
        "",
        "<ul>" + "".join(f'<li><a href="/track/{tid}">Track {tid}</a></li>' for tid in _SIGNED_IDS) + "</ul>",
    ),
    **{f"/track/{tid}": (f"Track {tid}", "", f'<div id="player" data-track-id="{tid}"></div>') for tid in _SIGNED_IDS},
}
"""Path → (title, head, body), where "{o}" stands for the origin and "{o/}" for it with every "/" escaped as "\\/"."""
_PLAYLISTS = {
    "/lists/mix.m3u": (
        "audio/x-mpegurl",
        "#EXTM3U\n#EXTINF:7,Mixtape - Side A\n{o}/files/mix-a.mp3\n#EXTINF:3,Mixtape - Side B\n../files/mix-b.wav\n",
        ("mix-a", "mix-b"),
    ),
    "/lists/radio.pls": (
        "audio/x-scpls",
        "[playlist]\nFile1={o}/files/radio.mp3\nTitle1=Radio Pls - Station Break\nLength1=-1\n"
        "NumberOfEntries=1\nVersion=2\n",
        ("radio",),
    ),
}
"""Path → (content type, text, names of the tracks listed)."""
_MEDIA = {
    "/direct": ("direct-mp3", "direct-wav"),
    "/player": ("player-src", "player-source", "clip"),
    "/og": ("og",),
    "/jsonld": ("jsonld",),
    "/playlist": ("mix-a", "mix-b", "radio"),
    "/scripted": ("scripted", "blob"),
}
"""Page path → names of the tracks a generic detector finds there (through its playlists, for /playlist)."""
_SUBTITLES = "WEBVTT\n\n00:00.000 --> 00:01.000\nA clip with no sound\n"


def _html(origin: str, title: str, head: str, body: str) -> str:
    nav = " | ".join(f'<a href="{path}">{_PAGES[path][0]}</a>' for path in _PAGES if not path.startswith("/track/"))
    page = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>{head}</head>'
        f"<body><nav>{nav}</nav><h1>{title}</h1>{body}</body></html>"
    )
    return _with_origin(page, origin)


def _with_origin(text: str, origin: str) -> str:
    return text.replace("{o}", origin).replace("{o/}", origin.replace("/", "\\/"))


def _byte_range(value: str, size: int) -> tuple[int, int] | None:
    """The [start, stop) a single `bytes=` range asks for; None for none, a malformed one or several (the whole
    body is sent, as RFC 9110 allows); start == size when nothing of the file is in it (416)."""
    unit, _, spec = value.partition("=")
    first, dash, last = spec.strip().partition("-")
    if unit.strip().lower() != "bytes" or "," in spec or not dash:
        return None
    try:
        if not first:
            suffix = int(last)
            return (max(size - suffix, 0), size) if suffix > 0 else (size, size)
        start, stop = int(first), int(last) + 1 if last else size
    except ValueError:
        return None
    if last and stop <= start:
        return None
    return (start, min(stop, size)) if start < size else (size, size)


class MusicSite:
    """The music site and its file server; `url` and `expected` exist once started."""

    def __init__(self, *, sign_ttl: float = SIGN_TTL) -> None:
        self.sign_ttl = sign_ttl
        """Seconds a signed URL stays valid; may be changed while serving."""
        self.tracks: dict[str, Track] = {track.name: track for track in _catalogue()}
        """Name → the first version of every audio and video file (signed ones included)."""
        self.signed_tracks: dict[str, Track] = {tid: self.tracks[f"signed-{tid}"] for tid in _SIGNED_IDS}
        """Track id (the page /track/ID) → what its signed /stream/ID URL serves."""
        self.expected: dict[str, set[str]] = {}
        """Page path → absolute URLs of the audio and video a generic detector finds there, playlist entries
        included (playlists themselves are in `playlists`); empty for pages without media and for /track/ID."""
        self.playlists: dict[str, set[str]] = {}
        """Absolute playlist URL → absolute URLs of the media it lists."""
        self.changed: dict[str, Track] = {}
        """Path → the version a `change` fault switches it to."""
        self.requests: list[Hit] = []
        self._files: dict[str, Track] = {track.path: track for track in self.tracks.values()}
        self._variants: dict[str, Callable[[], Track]] = {a.path: functools.partial(a.track, 1) for a in _AUDIO}
        self._variants["/files/clip.webm"] = functools.partial(_video, 1)
        self._faults: dict[str, Fault] = {}
        self._pages: dict[str, str] = {}
        self._sessions: set[str] = set()
        self._secret = secrets.token_bytes(16)
        self._issued = itertools.count(1)
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._origin = ""

    @property
    def url(self) -> str:
        """The origin, "http://127.0.0.1:PORT" with no trailing slash: `site.url + track.path` is a track's URL."""
        if not self._origin:
            raise RuntimeError("the site is not started")
        return self._origin

    def served(self, path: str) -> Track:
        """The version of the file at `path` served now (it differs from the first once a `change` happened)."""
        return self._files[path]

    def add_file(self, path: str, body: bytes, content_type: str = "application/octet-stream") -> Track:
        """Serve `body` at `path` like every media file (a `change` fault serves it reversed)."""
        track = self._files[path] = Track(path.rsplit("/", 1)[-1], path, body, content_type)
        self._variants[path] = lambda: replace(track, body=track.body[::-1], modified=track.modified + 3600)
        return track

    def add_large_file(self, path: str, size: int, content_type: str = "application/octet-stream") -> Track:
        """Serve `size` bytes of seeded noise at `path`, held once in memory and sent in `CHUNK` slices of it."""
        name = path.rsplit("/", 1)[-1]
        track = self._files[path] = _noise(name, path, size, content_type)
        self._variants[path] = functools.partial(_noise, name, path, size, content_type, 1)
        return track

    def set_fault(
        self,
        path: str,
        *,
        drops: Sequence[float] = (),
        change: bool = False,
        no_range: bool = False,
        status: int | None = None,
        stall: float | None = None,
    ) -> Fault:
        """Make `path` misbehave from now on (with no options: behave again); the returned `Fault` counts attempts."""
        if path not in self._files:
            raise KeyError(path)
        if change:
            self.changed[path] = self._variants[path]()
        fault = self._faults[path] = Fault(
            drops=tuple(drops), change=change, no_range=no_range, status=status, stall=stall
        )
        return fault

    async def start(self) -> Self:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._origin = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        self._build_pages()
        return self

    async def aclose(self) -> None:
        self._closing.set()  # stalled answers end
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _build_pages(self) -> None:
        """The pages, playlists and ground truth, which all hold the origin."""
        origin = self._origin
        self._pages = {path: _html(origin, *page) for path, page in _PAGES.items()}
        self.expected = {path: {origin + self.tracks[name].path for name in _MEDIA.get(path, ())} for path in _PAGES}
        for path, (content_type, text, names) in _PLAYLISTS.items():
            self.add_file(path, _with_origin(text, origin).encode(), content_type)
            self.playlists[origin + path] = {origin + self.tracks[name].path for name in names}
        self.add_file("/files/clip.vtt", _SUBTITLES.encode(), "text/vtt")
        self.expected["/player"].add(origin + "/files/clip.vtt")  # a video's subtitles are collected with it

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        hit = Hit(time.monotonic(), request.method, request.path, request.query_string, request.headers)
        self.requests.append(hit)
        if request.method not in ("GET", "HEAD"):
            response = web.Response(status=405, headers={"Allow": "GET, HEAD"})
        else:
            response = await self._route(request, hit)
        if hit.status is None:
            hit.status = response.status
        return response

    async def _route(self, request: web.Request, hit: Hit) -> web.StreamResponse:
        path = request.path
        if path in self._pages:
            response = web.Response(text=self._pages[path], content_type="text/html")
            if path.startswith("/track/") and request.cookies.get("sid") not in self._sessions:
                sid = secrets.token_hex(8)
                self._sessions.add(sid)
                response.set_cookie("sid", sid, path="/", httponly=True)
            return response
        if path.startswith("/api/track/"):
            return self._sign(request, path.removeprefix("/api/track/"))
        if path.startswith("/stream/") and not self._signed(request, path.removeprefix("/stream/")):
            return web.Response(status=403, text="forbidden")
        if path in self._files:
            return await self._serve(request, hit, path)
        return web.Response(status=404, text="not found")

    def _signature(self, track_id: str, exp: str, n: str, user_agent: str) -> str:
        message = f"{track_id}\n{exp}\n{n}\n{user_agent}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()[:32]

    def _sign(self, request: web.Request, track_id: str) -> web.Response:
        if track_id not in self.signed_tracks:
            return web.json_response({"error": "no such track"}, status=404)
        if request.cookies.get("sid") not in self._sessions:
            return web.json_response({"error": "no session"}, status=403)
        exp, n = str(int((time.time() + self.sign_ttl) * 1000)), str(next(self._issued))
        sig = self._signature(track_id, exp, n, request.headers.get("User-Agent", ""))
        return web.json_response({"url": f"/stream/{track_id}?exp={exp}&n={n}&sig={sig}"})

    def _signed(self, request: web.Request, track_id: str) -> bool:
        exp, n, sig = (request.query.get(name, "") for name in ("exp", "n", "sig"))
        if not exp.isdigit() or int(exp) <= time.time() * 1000:
            return False
        return hmac.compare_digest(sig, self._signature(track_id, exp, n, request.headers.get("User-Agent", "")))

    async def _serve(self, request: web.Request, hit: Hit, path: str) -> web.StreamResponse:
        fault = self._faults.get(path) or Fault()
        if fault.status is not None:
            return web.Response(status=fault.status, text=f"status {fault.status}")
        track = self._files[path]
        size = len(track.body)
        headers = {"Content-Type": track.content_type, "ETag": track.etag, "Last-Modified": track.last_modified}
        span = None
        if not fault.no_range:
            headers["Accept-Ranges"] = "bytes"
            if_range = request.headers.get("If-Range")
            if "Range" in request.headers and if_range in (None, track.etag, track.last_modified):
                span = _byte_range(request.headers["Range"], size)
        if span is not None and span[0] == size:
            return web.Response(status=416, headers={"Content-Range": f"bytes */{size}"})
        start, stop = span or (0, size)
        if span is not None:
            headers["Content-Range"] = f"bytes {start}-{stop - 1}/{size}"
        response = web.StreamResponse(status=206 if span else 200, headers=headers)
        response.content_length = stop - start
        hit.status = response.status
        if request.method == "HEAD":
            await response.prepare(request)
            return response
        attempt = fault.attempts
        fault.attempts += 1
        if fault.change and attempt == 0:
            self._files[path] = self.changed[path]
        cut, then = stop, "end"
        if attempt < len(fault.drops) and (at := max(start, int(fault.drops[attempt] * size))) < cut:
            cut, then = at, "drop"
        if fault.stall is not None and (at := max(start, int(fault.stall * size))) < cut:
            cut, then = at, "stall"
        body = memoryview(track.body)
        try:
            await response.prepare(request)
            for pos in range(start, cut, CHUNK):
                await response.write(body[pos : min(pos + CHUNK, cut)])
            if then == "end":
                await response.write_eof()
                return response
            if then == "stall":
                await self._closing.wait()
            if request.transport is not None:
                await _sent(request.transport)
                request.transport.close()  # after what was written: the client sees a short body
        except ConnectionError:
            pass  # the client went away
        return response
