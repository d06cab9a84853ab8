"""Streams (HLS, DASH) as media tasks: one manifest, one task, its chosen tracks joined into whole files.

A stream is one media task whatever its number of segments: its manifest is read again at each attempt (its
addresses may be signed per load), its variant or representations chosen by `--media-quality`, and each
chosen track downloaded into its own part (`media.segments`): the main one (video, or audio alone) in the
task's part, a separate audio track beside it (`name.audio.part`). Segments and variant playlists are never
tasks of their own. With `--media-remux` and ffmpeg installed, the joined tracks are rewritten into one MP4
(`.mp4`, or `.m4a` for audio alone).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import aiohttp

from ..config import Quality
from .dash import read_mpd
from .download import Attempt, discard
from .hls import read_hls
from .segments import MAX_MANIFEST, Budget, Requests, Stream, StreamError, Track, download_track

log = logging.getLogger(__name__)

MANIFEST_TYPES = frozenset({"application/vnd.apple.mpegurl", "application/x-mpegurl", "application/dash+xml"})
"""Types only streams are served as (`audio/x-mpegurl` is as often a plain list of files)."""
AUDIO_EXTENSIONS = frozenset({"aac", "mp3", "ac3", "ec3", "m4a"})


@dataclass(slots=True, kw_only=True)
class StreamFiles:
    """What one attempt at a stream got: how far (`attempt`, all tracks together) and the parts it filled."""

    attempt: Attempt
    protocol: Literal["hls", "dash"] | None = None
    parts: list[tuple[Track, Path]] = field(default_factory=list)
    duration: float = 0.0
    segments: int = 0
    stops: list[str] = field(default_factory=list)
    """Why a live recording ended before its stream did (`--media-max-duration`, a playlist that stopped)."""

    @property
    def extension(self) -> str:
        return self.parts[0][0].extension if self.parts else "ts"

    @property
    def kind(self) -> str:
        return "audio" if self.extension in AUDIO_EXTENSIONS and len(self.parts) == 1 else "video"


def is_manifest(url: str, content_type: str | None = None) -> bool:
    """Whether an address names an HLS playlist or a DASH MPD (by its type, else its extension)."""
    mime = (content_type or "").partition(";")[0].strip().lower()
    if mime in MANIFEST_TYPES:
        return True
    path = url.partition("#")[0].partition("?")[0].lower()
    return path.endswith((".m3u8", ".mpd"))


def manifest_protocol(body: bytes) -> Literal["hls", "dash"] | None:
    """What a manifest's first bytes say it is (an M3U of files without HLS tags is no stream)."""
    head = body[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"#EXTM3U") and b"#EXT-X-" in body[:MAX_MANIFEST]:
        return "hls"
    if head.startswith(b"<") and b"<MPD" in head:
        return "dash"
    return None


def audio_part(part: Path) -> Path:
    return part.with_name(part.name.removesuffix(".part") + ".audio.part")


async def collect_stream(
    session: aiohttp.ClientSession,
    url: str,
    part: Path,
    *,
    headers: dict[str, str],
    quality: Quality,
    max_size: int | None,
    max_duration: float,
) -> StreamFiles:
    """Read the manifest at `url` and download its chosen tracks into `part` (and `audio_part(part)`)."""
    requests = Requests(session, headers)
    try:
        body, content_type, final = await requests.manifest(url)
        stream = await _read(requests, body, content_type, final, quality)
    except StreamError as exc:
        return StreamFiles(attempt=Attempt(error=str(exc), retryable=exc.retryable))
    budget = Budget(max_size, max_duration)
    files = StreamFiles(attempt=Attempt(complete=True), protocol=stream.protocol)
    total = files.attempt
    for track in stream.tracks:
        track_part = part if track.role == "main" else audio_part(part)
        files.parts.append((track, track_part))
        attempt = await download_track(track, track_part, requests, budget)
        total.size += attempt.size
        total.resumed |= attempt.resumed
        total.progressed |= attempt.progressed
        if not attempt.complete:
            total.complete, total.error, total.retryable = False, attempt.error, attempt.retryable
            break
    total.content_type = files.parts[0][0].content_type if files.parts else ""
    files.duration, files.segments, files.stops = round(budget.duration, 3), budget.segments, budget.stops
    return files


async def _read(requests: Requests, body: bytes, content_type: str, url: str, quality: Quality) -> Stream:
    protocol = manifest_protocol(body)
    if protocol == "hls":
        return await read_hls(requests, url, body, quality)
    if protocol == "dash":
        return read_mpd(body, url, quality)
    raise StreamError(f"{url} is not an HLS playlist or a DASH manifest ({content_type or 'no type'})")


def discard_parts(part: Path) -> None:
    """Remove a stream's parts (and their records of the segments they hold)."""
    discard(part)
    discard(audio_part(part))


async def remux(files: StreamFiles, out: Path) -> str | None:
    """Rewrite the joined tracks into one MP4 file at `out` with ffmpeg (streams copied, not re-encoded);
    the reason when it could not be done (the joined files are then kept as they are)."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        return "ffmpeg is not installed"
    inputs = [arg for _track, path in files.parts for arg in ("-i", str(path))]
    maps = [arg for index in range(len(files.parts)) for arg in ("-map", str(index))]
    process = await asyncio.create_subprocess_exec(
        ffmpeg, "-nostdin", "-y", "-loglevel", "error", *inputs, *maps, "-c", "copy", "-f", "mp4", str(out),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _out, err = await process.communicate()
    if process.returncode != 0:
        await asyncio.to_thread(out.unlink, missing_ok=True)
        return f"ffmpeg failed: {err.decode(errors='replace').strip()[:200]}"
    return None
