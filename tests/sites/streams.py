"""A local site of HLS and DASH streams, and pages that show them: what a user collects with `--media video`.

`async with StreamSite() as site:` serves on 127.0.0.1; every request is kept in `site.requests` (path with its
query, and the request's headers) before it is answered. `site.expected(name)` is the file a stream must be
collected as (its chosen track's segments joined, decrypted), `site.segment_paths(name)` the paths of those
segments in order. Segment bytes are made up, recognizable per stream, track and index (MPEG-TS packets, ADTS
frames or fMP4 boxes in shape only); `tests/media/test_remux.py` makes real media with ffmpeg instead.

| stream (`/s/NAME/…`) | what it is                                                                              |
|----------------------|-----------------------------------------------------------------------------------------|
| clear                | master.m3u8: variants low (400 kb/s) and high (1.2 Mb/s), 6 MPEG-TS segments each       |
| aes                  | index.m3u8: 4 segments, AES-128 (two keys; the first with an IV, the second without)    |
| audio                | index.m3u8: 3 packed-audio segments (.aac)                                              |
| fmp4                 | index.m3u8: an EXT-X-MAP init segment, then 3 .m4s segments                             |
| byterange            | index.m3u8: 3 segments as byte ranges of one file                                       |
| cut                  | index.m3u8: 4 segments; the third is cut mid-body the first time it is asked for        |
| slow                 | index.m3u8: 8 segments; the fifth waits until `site.release` is set (or 60 s)           |
| live                 | index.m3u8: no ENDLIST; one more 1-second segment each time the playlist is read        |
| live-end             | index.m3u8: as `live`, then ENDLIST after its fifth segment                              |
| loop                 | master.m3u8: lists itself as its variant                                                 |
| variant404           | master.m3u8: its variant is 404                                                         |
| endless              | index.m3u8: its second segment sends a few bytes, then nothing (for 60 s)              |
| key403               | index.m3u8: its key is 403                                                              |
| huge                 | index.m3u8: 100,000 segments                                                            |
| html                 | index.m3u8: an HTML page served as text/html                                            |
| private-segment      | index.m3u8: its second segment is on 10.255.255.1                                       |
| private-key          | index.m3u8: its key is on 192.168.255.1                                                 |
| dash-number          | manifest.mpd: SegmentTemplate $Number$, video v1/v2 (500k, 1.5M), audio a1/a2 (64k, 128k) |
| dash-time            | manifest.mpd: SegmentTemplate $Time$ with a SegmentTimeline (video and audio)           |
| dash-list            | manifest.mpd: SegmentList with an initialization (video only)                           |
| dash-base            | manifest.mpd: SegmentBase, one file per representation (video only)                     |

Pages: `/page/NAME` shows stream NAME (at `manifest_path(NAME)`) in `<video><source type=...>`; `/` links to the
pages of the streams in `PAGES`, and to `/twice`, whose video is the `clear` stream again (one stream, two pages).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self

from aiohttp import web
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tests.sites.serving import serve

_HLS = "application/vnd.apple.mpegurl"
_KEYS = {"k1": bytes(range(16)), "k2": bytes(range(16, 32))}
_IV = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
_AES_SEQUENCE = 10
_DASH_VIDEO = {"v1": 500_000, "v2": 1_500_000}
_DASH_AUDIO = {"a1": 64_000, "a2": 128_000}


def segment_bytes(stream: str, track: str, index: int, kind: str = "ts", packets: int = 20) -> bytes:
    """Made-up bytes in the shape of the container, unique to (stream, track, index)."""
    tag = hashlib.sha256(f"{stream}/{track}/{index}".encode()).digest()
    if kind == "ts":
        return b"".join(b"\x47" + tag[:4] + bytes([n % 256]) + tag * 5 + b"\xff" * 22 for n in range(packets))
    if kind == "aac":
        return b"".join(b"\xff\xf1\x50\x80\x02\x1f\xfc" + tag * 4 for _ in range(packets))
    return (8 + 32 * packets).to_bytes(4, "big") + (b"ftyp" if kind == "init" else b"moof") + tag * packets


def _encrypt(body: bytes, key: bytes, iv: bytes) -> bytes:
    padder = padding.PKCS7(128).padder()
    padded = padder.update(body) + padder.finalize()
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return encryptor.update(padded) + encryptor.finalize()


@dataclass
class Request:
    path: str
    headers: dict[str, str]


@dataclass
class StreamSite:
    host: str = "127.0.0.1"
    requests: list[Request] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    live_reads: dict[str, int] = field(default_factory=dict)
    cut_done: set[str] = field(default_factory=set)
    url: str = ""

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_get("/", self._home)
        app.router.add_get("/page/{name}", self._page)
        app.router.add_get("/twice", self._twice)
        app.router.add_get("/s/{name}/{rest:.*}", self._stream)
        self._runner, self.url = await serve(app, self.host)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        await self._runner.cleanup()

    # What a collected stream must be.

    def expected(self, name: str) -> bytes:
        """The file stream `name` must be collected as (its best track; for DASH, the video)."""
        if name == "clear":
            return b"".join(segment_bytes("clear", "high", i) for i in range(6))
        if name == "clear-worst":
            return b"".join(segment_bytes("clear", "low", i) for i in range(6))
        if name in ("aes", "cut", "slow"):
            return b"".join(segment_bytes(name, "main", i) for i in range(_COUNTS[name]))
        if name == "audio":
            return b"".join(segment_bytes("audio", "main", i, "aac") for i in range(3))
        if name == "fmp4":
            return segment_bytes("fmp4", "main", 0, "init") + b"".join(
                segment_bytes("fmp4", "main", i, "m4s") for i in range(3)
            )
        if name == "byterange":
            return self._byterange_file()
        if name.startswith("dash-"):
            return self.dash_track(name, "v2")
        raise KeyError(name)

    def dash_track(self, name: str, rep: str) -> bytes:
        if name == "dash-base":
            return segment_bytes(name, rep, 0, "m4s", packets=200)
        count = 3 if name == "dash-list" else 4
        return segment_bytes(name, rep, 0, "init") + b"".join(segment_bytes(name, rep, i, "m4s") for i in range(count))

    def live_expected(self, name: str, segments: int) -> bytes:
        return b"".join(segment_bytes(name, "main", i) for i in range(segments))

    def asked(self, predicate: Callable[[str], bool]) -> list[str]:
        return [r.path for r in self.requests if predicate(r.path)]

    def _byterange_file(self) -> bytes:
        return b"".join(segment_bytes("byterange", "main", i) for i in range(3))

    # Pages.

    async def _home(self, request: web.Request) -> web.Response:
        self._log(request)
        links = "".join(f'<li><a href="/page/{name}">{name}</a></li>' for name in PAGES) + '<li><a href="/twice">2</a>'
        return web.Response(text=f"<!doctype html><title>Streams</title><ul>{links}</ul>", content_type="text/html")

    async def _page(self, request: web.Request) -> web.Response:
        self._log(request)
        return _video_page(request.match_info["name"])

    async def _twice(self, request: web.Request) -> web.Response:
        self._log(request)
        return _video_page("clear")

    # Streams.

    def _log(self, request: web.Request) -> None:
        self.requests.append(Request(request.path_qs, dict(request.headers)))

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        self._log(request)
        name, rest = request.match_info["name"], request.match_info["rest"]
        if name.startswith("dash-"):
            return await self._dash(name, rest, request)
        return await self._hls(name, rest, request)

    async def _hls(self, name: str, rest: str, request: web.Request) -> web.StreamResponse:
        if rest.endswith(".m3u8"):
            text = self._playlist(name, rest)
            if text is None:
                raise web.HTTPNotFound()
            if name == "html":
                return web.Response(text="<!doctype html><title>Not a playlist</title>", content_type="text/html")
            return web.Response(body=text.encode(), content_type=_HLS)
        if name == "key403" and rest == "key.bin":
            raise web.HTTPForbidden()
        if name == "aes" and rest.endswith(".key"):
            return web.Response(body=_KEYS[rest.removesuffix(".key")], content_type="application/octet-stream")
        if name == "byterange" and rest == "all.ts":
            return _ranged(request, self._byterange_file(), "video/mp2t")
        track, _, file = rest.rpartition("/")
        stem, _, ext = file.partition(".")
        if not stem.startswith("seg") or not stem[3:].isdigit():
            raise web.HTTPNotFound()
        index = int(stem[3:])
        kind = {"ts": "ts", "aac": "aac", "m4s": "m4s", "mp4": "init"}[ext]
        body = segment_bytes(name, track or "main", index, kind)
        if name == "aes":
            key, iv = ("k1", _IV) if index < 2 else ("k2", (_AES_SEQUENCE + index).to_bytes(16, "big"))
            body = _encrypt(body, _KEYS[key], iv)
        if name == "cut" and index == 2 and rest not in self.cut_done:
            self.cut_done.add(rest)
            return await _cut(request, body)
        if name == "slow" and index == 4:
            await self._held()
        if name == "endless" and index == 1:
            response = web.StreamResponse(headers={"Content-Type": "video/mp2t"})
            await response.prepare(request)
            await response.write(b"\x47" * 188)
            await self._held()
            return response
        return web.Response(body=body, content_type="audio/aac" if kind == "aac" else "video/mp2t")

    async def _held(self) -> None:
        """Until `release` is set (the site sets it when it closes), or 60 s."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.release.wait(), 60)

    def _playlist(self, name: str, rest: str) -> str | None:
        if name == "clear" and rest == "master.m3u8":
            return (
                "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=400000,RESOLUTION=320x180\nlow/index.m3u8\n"
                "#EXT-X-STREAM-INF:BANDWIDTH=1200000,RESOLUTION=1280x720\nhigh/index.m3u8\n"
            )
        if name == "loop" and rest == "master.m3u8":
            return "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=400000\nmaster.m3u8\n"
        if name == "variant404" and rest == "master.m3u8":
            return "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=400000\nmissing/index.m3u8\n"
        if name == "clear" and rest in ("low/index.m3u8", "high/index.m3u8"):
            return self._media_playlist(name)
        if rest != "index.m3u8" or name in ("clear", "loop", "variant404"):
            return None
        return self._media_playlist(name)

    def _media_playlist(self, name: str) -> str:
        lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2"]
        if name == "huge":
            lines.append("#EXT-X-PLAYLIST-TYPE:VOD")
            lines += [f"#EXTINF:2.0,\nseg{i}.ts" for i in range(100_000)]
        elif name in ("live", "live-end"):
            reads = self.live_reads[name] = self.live_reads.get(name, 0) + 1
            count = reads + 1 if name == "live" else min(reads + 1, 5)
            lines[2] = "#EXT-X-TARGETDURATION:1"
            lines += [f"#EXTINF:1.0,\nseg{i}.ts" for i in range(count)]
            if name == "live-end" and count == 5:
                lines.append("#EXT-X-ENDLIST")
            return "\n".join(lines) + "\n"
        elif name == "aes":
            lines.append(f"#EXT-X-MEDIA-SEQUENCE:{_AES_SEQUENCE}")
            lines.append(f'#EXT-X-KEY:METHOD=AES-128,URI="k1.key",IV=0x{_IV.hex()}')
            lines += ["#EXTINF:2.0,\nseg0.ts", "#EXTINF:2.0,\nseg1.ts", '#EXT-X-KEY:METHOD=AES-128,URI="k2.key"']
            lines += ["#EXTINF:2.0,\nseg2.ts", "#EXTINF:2.0,\nseg3.ts"]
        elif name == "audio":
            lines += [f"#EXTINF:2.0,\nseg{i}.aac" for i in range(3)]
        elif name == "fmp4":
            lines += ["#EXT-X-VERSION:7", '#EXT-X-MAP:URI="seg0.mp4"']
            lines += [f"#EXTINF:2.0,\nseg{i}.m4s" for i in range(3)]
        elif name == "byterange":
            size = len(segment_bytes("byterange", "main", 0))
            lines += [f"#EXTINF:2.0,\n#EXT-X-BYTERANGE:{size}@{i * size}\nall.ts" for i in range(3)]
        elif name == "key403":
            lines += ['#EXT-X-KEY:METHOD=AES-128,URI="key.bin"', "#EXTINF:2.0,\nseg0.ts"]
        elif name == "private-segment":
            lines += ["#EXTINF:2.0,\nseg0.ts", "#EXTINF:2.0,\nhttp://10.255.255.1/seg1.ts"]
        elif name == "private-key":
            lines += ['#EXT-X-KEY:METHOD=AES-128,URI="http://192.168.255.1/key.bin"', "#EXTINF:2.0,\nseg0.ts"]
        elif name in ("endless",):
            lines += [f"#EXTINF:2.0,\nseg{i}.ts" for i in range(3)]
        elif name in _COUNTS or name == "html":
            durations = [2.0] * _COUNTS.get(name, 1)
            lines += [f"#EXTINF:{d},\nseg{i}.ts" for i, d in enumerate(durations)]
        else:
            durations = [2.0, 2.0, 2.0, 2.0, 2.0, 1.5]
            lines += [f"#EXTINF:{d},\nseg{i}.ts" for i, d in enumerate(durations)]
        lines.append("#EXT-X-ENDLIST")
        return "\n".join(lines) + "\n"

    async def _dash(self, name: str, rest: str, request: web.Request) -> web.StreamResponse:
        if rest == "manifest.mpd":
            return web.Response(body=_MPDS[name].encode(), content_type="application/dash+xml")
        rep, _, file = rest.partition("/")
        if rep not in _DASH_VIDEO and rep not in _DASH_AUDIO:
            raise web.HTTPNotFound()
        if name == "dash-base" and file == "whole.mp4":
            return _ranged(request, segment_bytes(name, rep, 0, "m4s", packets=200), "video/mp4")
        if file == "init.mp4":
            return web.Response(body=segment_bytes(name, rep, 0, "init"), content_type="video/mp4")
        stem = file.removesuffix(".m4s")
        # dash-time's segments are named by their start (0, 2000, 4000, 6000), the others by number from 1.
        index = int(stem.removeprefix("t")) // 2000 if name == "dash-time" else int(stem.removeprefix("seg-")) - 1
        return web.Response(body=segment_bytes(name, rep, index, "m4s"), content_type="video/mp4")


_COUNTS = {"aes": 4, "cut": 4, "slow": 8}
PAGES = ("clear", "aes", "audio", "fmp4", "byterange", "dash-number", "dash-time", "dash-list", "dash-base")


def manifest_path(name: str) -> str:
    if name.startswith("dash-"):
        return f"/s/{name}/manifest.mpd"
    return f"/s/{name}/{'master' if name in ('clear', 'loop', 'variant404') else 'index'}.m3u8"


def _video_page(name: str) -> web.Response:
    kind = "application/dash+xml" if name.startswith("dash-") else "application/x-mpegURL"
    source = f'<source src="{manifest_path(name)}" type="{kind}">'
    html = f"<!doctype html><title>Video {name}</title><h1>{name}</h1><video controls>{source}</video>"
    return web.Response(text=html, content_type="text/html")


def _ranged(request: web.Request, body: bytes, content_type: str) -> web.Response:
    if request.http_range.start is None:
        return web.Response(body=body, content_type=content_type)
    part = body[request.http_range]
    start = request.http_range.start
    headers = {"Content-Range": f"bytes {start}-{start + len(part) - 1}/{len(body)}"}
    return web.Response(status=206, body=part, content_type=content_type, headers=headers)


async def _cut(request: web.Request, body: bytes) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "video/mp2t", "Content-Length": str(len(body))})
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    request.transport.close() if request.transport else None
    return response


def _mpd(body: str, duration: str = "PT7S") -> str:
    return (
        '<?xml version="1.0"?>\n<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" '
        f'mediaPresentationDuration="{duration}" minBufferTime="PT2S"><Period>{body}</Period></MPD>'
    )


def _reps(reps: dict[str, int], inner: str = "") -> str:
    return "".join(f'<Representation id="{rep}" bandwidth="{bw}">{inner.replace("REP", rep)}</Representation>'
                   for rep, bw in reps.items())  # fmt: skip


_NUMBER = '<SegmentTemplate media="$RepresentationID$/seg-$Number$.m4s" initialization="$RepresentationID$/init.mp4" duration="2" startNumber="1"/>'  # noqa: E501
_TIME = (
    '<SegmentTemplate timescale="1000" media="$RepresentationID$/t$Time$.m4s" '
    'initialization="$RepresentationID$/init.mp4"><SegmentTimeline><S t="0" d="2000" r="2"/><S d="1000"/>'
    "</SegmentTimeline></SegmentTemplate>"
)
_LIST = (
    '<SegmentList timescale="1" duration="2"><Initialization sourceURL="REP/init.mp4"/>'
    + "".join(f'<SegmentURL media="REP/seg-{n}.m4s"/>' for n in (1, 2, 3))
    + "</SegmentList>"
)
_MPDS = {
    "dash-number": _mpd(
        f'<AdaptationSet mimeType="video/mp4">{_NUMBER}{_reps(_DASH_VIDEO)}</AdaptationSet>'
        f'<AdaptationSet mimeType="audio/mp4">{_NUMBER}{_reps(_DASH_AUDIO)}</AdaptationSet>'
    ),
    "dash-time": _mpd(
        f'<AdaptationSet contentType="video" mimeType="video/mp4">{_TIME}{_reps(_DASH_VIDEO)}</AdaptationSet>'
        f'<AdaptationSet contentType="audio" mimeType="audio/mp4">{_TIME}{_reps(_DASH_AUDIO)}</AdaptationSet>'
    ),
    "dash-list": _mpd(f'<AdaptationSet mimeType="video/mp4">{_reps(_DASH_VIDEO, _LIST)}</AdaptationSet>', "PT6S"),
    "dash-base": _mpd(
        '<AdaptationSet mimeType="video/mp4">'
        + _reps(_DASH_VIDEO, '<BaseURL>REP/whole.mp4</BaseURL><SegmentBase indexRange="0-99"/>')
        + "</AdaptationSet>"
    ),
}
