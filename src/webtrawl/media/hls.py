"""HLS: from a playlist (master or media) to the tracks of one stream task.

Parsing is the `m3u8` library's; what is decided here is which rendition to take and what a playlist may
not do. A master playlist gives its variant chosen by `--media-quality` (by BANDWIDTH), and the audio
rendition of that variant's group when it lives in a playlist of its own. A variant that is itself a master
playlist (one looping to itself, or nesting) is refused: HLS nests one level only.
"""

from __future__ import annotations

from typing import Literal

import m3u8

from ..config import Quality
from .segments import MAX_SEGMENTS, Key, Requests, Segment, Stream, StreamError, Track, choose

_AUDIO_CODECS = ("mp4a", "ac-3", "ec-3", "opus", "flac", "mp3")
_EXTENSIONS = {"ts": "ts", "aac": "aac", "mp3": "mp3", "ac3": "ac3", "ec3": "ec3", "m4s": "mp4", "mp4": "mp4",
               "m4a": "m4a", "m4v": "mp4", "cmfv": "mp4", "cmfa": "m4a", "webm": "webm"}  # fmt: skip


async def read_hls(requests: Requests, url: str, body: bytes, quality: Quality) -> Stream:
    """The stream an HLS playlist fetched from `url` names; `StreamError` when it names none."""
    playlist = _parse(body, url)
    if not playlist.is_variant:
        return Stream(protocol="hls", tracks=[await _track(requests, url, playlist, "main", audio_only=False)])
    if not playlist.playlists:
        raise StreamError(f"master playlist {url} lists no variant")
    variant = choose(list(playlist.playlists), lambda v: v.stream_info.bandwidth or 0, quality)
    codecs = (variant.stream_info.codecs or "").lower()
    audio_only = bool(codecs) and all(c.strip().startswith(_AUDIO_CODECS) for c in codecs.split(","))
    tracks = [await _track(requests, variant.absolute_uri, None, "main", audio_only=audio_only)]
    group = variant.stream_info.audio
    renditions = [m for m in playlist.media if m.type == "AUDIO" and m.group_id == group and m.uri]
    if group and renditions and not audio_only:
        rendition = next((m for m in renditions if m.default == "YES"), renditions[0])
        tracks.append(await _track(requests, rendition.absolute_uri, None, "audio", audio_only=True))
    return Stream(protocol="hls", tracks=tracks)


async def _track(
    requests: Requests, url: str, playlist: m3u8.M3U8 | None, role: Literal["main", "audio"], *, audio_only: bool
) -> Track:
    if playlist is None:
        body, _type, url = await requests.manifest(url)
        playlist = _parse(body, url)
        if playlist.is_variant:
            raise StreamError(f"variant playlist {url} is a master playlist again (a loop, or nested)")
    segments = _segments(playlist, url)
    if not segments:
        raise StreamError(f"playlist {url} lists no segment")
    first = playlist.segments[0]
    init = None
    if first.init_section is not None and first.init_section.uri:
        init = Segment(first.init_section.absolute_uri, byterange=_byterange(first.init_section.byterange, 0))
    live = not playlist.is_endlist and (playlist.playlist_type or "").upper() != "VOD"

    async def reload() -> tuple[list[Segment], bool]:
        body, _type, final = await requests.manifest(url)
        fresh = _parse(body, final)
        return _segments(fresh, final), bool(fresh.is_endlist)

    return Track(
        role=role,
        segments=segments,
        init=init,
        extension=_extension(segments[0].url, init is not None, audio_only or role == "audio"),
        live=live,
        target_duration=float(playlist.target_duration or 2),
        reload=reload if live else None,
    )


def _parse(body: bytes, url: str) -> m3u8.M3U8:
    text = body.decode("utf-8-sig", errors="replace")
    if not text.lstrip().startswith("#EXTM3U"):
        raise StreamError(f"{url} is not an HLS playlist")
    try:
        return m3u8.loads(text, uri=url)
    except Exception as exc:  # the library's errors are of many kinds (ValueError, its own, AttributeError)
        raise StreamError(f"playlist {url} cannot be read: {exc}"[:300]) from None


def _segments(playlist: m3u8.M3U8, url: str) -> list[Segment]:
    if len(playlist.segments) > MAX_SEGMENTS:
        raise StreamError(f"playlist {url} has {len(playlist.segments):,} segments, over the {MAX_SEGMENTS:,} allowed")
    segments: list[Segment] = []
    next_offset: dict[str, int] = {}
    for index, item in enumerate(playlist.segments):
        key = None
        if item.key is not None and (item.key.method or "NONE").upper() != "NONE":
            if item.key.method.upper() != "AES-128":
                raise StreamError(f"{item.key.method} encryption (DRM) cannot be collected ({url})")
            iv = bytes.fromhex(item.key.iv[2:].rjust(32, "0")) if item.key.iv else None
            key = Key(item.key.absolute_uri, iv)
        address = item.absolute_uri
        byterange = _byterange(item.byterange, next_offset.get(address, 0))
        if byterange is not None:
            next_offset[address] = byterange[0] + byterange[1]
        sequence = (playlist.media_sequence or 0) + index
        segments.append(Segment(address, float(item.duration or 0), sequence, byterange, key))
    return segments


def _byterange(value: str | None, follows: int) -> tuple[int, int] | None:
    """`length[@offset]`; without an offset the range follows the previous one of the same resource."""
    if not value:
        return None
    length, _, offset = value.partition("@")
    try:
        return (int(offset) if offset else follows, int(length))
    except ValueError:
        raise StreamError(f"bad byte range {value!r}") from None


def _extension(url: str, fragmented: bool, audio: bool) -> str:
    if fragmented:
        return "m4a" if audio else "mp4"
    name = url.partition("?")[0].rpartition("/")[2]
    return _EXTENSIONS.get(name.rpartition(".")[2].lower(), "ts") if "." in name else "ts"
