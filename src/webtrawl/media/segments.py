"""A stream's tracks, and each one downloaded segment by segment into one file.

A track (an HLS variant or rendition, a DASH representation, read by `media.hls` and `media.dash`) has its
segments fetched in order and appended to the track's `.part` file, decrypted first when they are AES-128 encrypted,
with the track's initialization segment (fMP4) at its head. So the file is what a player would have been
fed: an MPEG-TS, packed audio or fMP4 stream, whole.

Resume: after each segment the part's length and the number of segments it holds are written beside it
(`name.part.json`), so a run killed mid-stream truncates the part back to its last whole segment and goes on
from the next one. Segment addresses are often signed per load; a part is resumed when the track is the same
(its segment names without their queries, in order), not the same addresses.

Every request is made with the task's session and headers (the private-network guard, the crawl's
User-Agent, the Referer and cookies the page's player used). A segment gets `SEGMENT_TRIES` tries before the
attempt ends; how far it got is reported as for a single file (`download.Attempt`), and the handler decides
whether to go on.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal, NamedTuple, TypeVar

import aiohttp
from yarl import URL

from ..config import Quality
from ..fetch.failures import describe_error
from .download import CHUNK, Attempt, TooLarge, discard, read_at_most, read_meta, retryable_status, sidecar, write_meta

MAX_MANIFEST = 4 * 1024 * 1024
"""Bytes of a playlist or MPD that are read; a larger one is refused (cut, it would read as a live stream)."""
MAX_SEGMENTS = 20_000
"""Segments one track may have (11 hours of 2-second segments); a longer stream is refused, not cut."""
SEGMENT_TRIES = 3
SEGMENT_PAUSE = 0.5
"""Seconds before a segment's second try (doubled before the third)."""
LIVE_STALLS = 6
"""Reloads of a live playlist that bring nothing new before its recording ends with what it has."""


class StreamError(Exception):
    """A manifest that cannot be collected now (`retryable`) or ever."""

    def __init__(self, reason: str, *, retryable: bool = False) -> None:
        super().__init__(reason)
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class Segment:
    url: str
    duration: float = 0.0
    sequence: int = 0
    """The HLS media sequence number (the IV of an AES-128 segment without an explicit one)."""
    byterange: tuple[int, int] | None = None
    """(offset, length) within `url`."""
    key: Key | None = None


@dataclass(frozen=True, slots=True)
class Key:
    """An AES-128 key: where it is, and the IV when the playlist gives one."""

    url: str
    iv: bytes | None = None


@dataclass(slots=True, kw_only=True)
class Track:
    """One file of a stream task: a rendition's segments, in order."""

    role: Literal["main", "audio"]
    """`main`: the stream's file (video, or audio alone); `audio`: a separate audio rendition beside it."""
    segments: list[Segment]
    init: Segment | None = None
    extension: str = "ts"
    """Of the joined file: its container (`ts`, `aac`, `mp3`, `mp4`, `m4a`, …)."""
    live: bool = False
    target_duration: float = 0.0
    reload: Callable[[], Awaitable[tuple[list[Segment], bool]]] | None = None
    """Reads a live playlist again: its segments now, and whether it has ended (ENDLIST)."""

    @property
    def content_type(self) -> str:
        return _CONTENT_TYPES.get(self.extension, "application/octet-stream")

    @property
    def identity(self) -> str:
        """What a resumed part must match: the segments' names without their queries (signed per load)."""
        digest = hashlib.sha256()
        for segment in (self.init, *self.segments) if self.init else self.segments:
            digest.update(segment.url.partition("?")[0].encode() + repr(segment.byterange).encode() + b"\n")
        return digest.hexdigest()[:32]


@dataclass(slots=True, kw_only=True)
class Stream:
    protocol: Literal["hls", "dash"]
    tracks: list[Track]


_CONTENT_TYPES = {"ts": "video/mp2t", "aac": "audio/aac", "mp3": "audio/mpeg", "ac3": "audio/ac3", "ec3": "audio/eac3",
                  "mp4": "video/mp4", "m4a": "audio/mp4", "webm": "video/webm"}  # fmt: skip
T = TypeVar("T")


def choose(options: list[T], bandwidth: Callable[[T], int], quality: Quality) -> T:
    """The option `quality` asks for; under a cap none meets, the lowest."""
    ranked = sorted(options, key=bandwidth)
    if quality == "worst":
        return ranked[0]
    if quality == "best":
        return ranked[-1]
    fitting = [option for option in ranked if bandwidth(option) <= quality]
    return fitting[-1] if fitting else ranked[0]


class Requests:
    """The requests of one stream attempt: manifests, keys and segments, with the task's headers."""

    def __init__(self, session: aiohttp.ClientSession, headers: dict[str, str]) -> None:
        self.session = session
        self.headers = headers
        self._keys: dict[str, bytes] = {}

    async def manifest(self, url: str) -> tuple[bytes, str, str]:
        """A manifest's body, Content-Type and final address (after redirects); `StreamError` when there is
        none to read."""
        try:
            async with self.session.get(URL(url, encoded=True), headers=self.headers) as resp:
                body = await read_at_most(resp, MAX_MANIFEST + 1)
                if resp.status != 200:
                    raise StreamError(f"HTTP {resp.status} for {url}", retryable=retryable_status(resp.status))
                content_type = (resp.headers.get("Content-Type") or "").partition(";")[0].strip().lower()
                final = str(resp.url)
        except (aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
            reason, retryable = describe_error(exc)
            raise StreamError(f"{reason} ({url})", retryable=retryable) from None
        if len(body) > MAX_MANIFEST:
            raise StreamError(f"manifest {url} is over {MAX_MANIFEST // 1024**2} MB")
        return body, content_type, final

    async def key(self, key: Key) -> bytes:
        if (known := self._keys.get(key.url)) is not None:
            return known
        got = await self._get(key.url, None, 64)
        if got.error is not None:
            raise StreamError(f"key {key.url}: {got.error}", retryable=got.retryable)
        if len(got.body) != 16:
            raise StreamError(f"key {key.url} is {len(got.body)} bytes, not the 16 of an AES-128 key")
        self._keys[key.url] = got.body
        return got.body

    async def segment(self, segment: Segment, limit: int) -> bytes:
        """A segment's bytes as served (at most `limit`, else `TooLarge`), tried `SEGMENT_TRIES` times."""
        for attempt in range(SEGMENT_TRIES):
            if attempt:
                await asyncio.sleep(SEGMENT_PAUSE * 2 ** (attempt - 1))
            got = await self._get(segment.url, segment.byterange, limit)
            if got.error is None:
                if segment.byterange is not None and got.status == 200:  # the server ignored Range
                    offset, length = segment.byterange
                    return got.body[offset : offset + length]
                return got.body
            if not got.retryable:
                break
        raise StreamError(f"{got.error} ({segment.url})", retryable=got.retryable)

    async def _get(self, url: str, byterange: tuple[int, int] | None, limit: int) -> _Got:
        headers = dict(self.headers)
        if byterange is not None:
            headers["Range"] = f"bytes={byterange[0]}-{byterange[0] + byterange[1] - 1}"
        chunks: list[bytes] = []
        size = 0
        try:
            async with self.session.get(URL(url, encoded=True), headers=headers) as resp:
                if resp.status not in (200, 206):
                    # A 404 is tried again too: a CDN's edge may not have the segment yet.
                    return _Got(
                        b"", resp.status, f"HTTP {resp.status}", retryable_status(resp.status) or resp.status == 404
                    )
                if resp.content_length is not None and resp.content_length > limit and byterange is None:
                    raise TooLarge(f"too large (a segment of {resp.content_length:,} bytes)")
                async for chunk in resp.content.iter_chunked(CHUNK):
                    size += len(chunk)
                    if size > limit and (byterange is None or size > byterange[0] + byterange[1]):
                        raise TooLarge("too large")
                    chunks.append(chunk)
                return _Got(b"".join(chunks), resp.status)
        except (aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
            reason, retryable = describe_error(exc)
            return _Got(b"", None, reason, retryable)


class _Got(NamedTuple):
    """A response's body, or why there is none (`error`) and whether asking again may help."""

    body: bytes
    status: int | None
    error: str | None = None
    retryable: bool = True


@dataclass(slots=True)
class Budget:
    """What the stream's tracks together may still take: bytes (`--media-max-size`), seconds of a live one."""

    max_size: int | None
    max_duration: float
    size: int = 0
    duration: float = 0.0
    segments: int = 0
    stops: list[str] = field(default_factory=list)


async def download_track(track: Track, part: Path, requests: Requests, budget: Budget) -> Attempt:
    """Append `track`'s segments to `part` from where an earlier attempt (or run) left it."""
    attempt = Attempt(content_type=track.content_type)
    meta = read_meta(part)
    identity = track.identity  # once: it reads every segment's name
    done = 0
    if not track.live and meta.get("identity") == identity and part.exists():
        done, attempt.size = int(meta.get("segments", 0)), int(meta.get("size", 0))
        attempt.resumed = done > 0
    elif part.exists() or sidecar(part).exists():
        await asyncio.to_thread(discard, part)
    budget.size += attempt.size
    budget.duration += sum(s.duration for s in track.segments[:done])
    budget.segments += done
    try:
        with await asyncio.to_thread(_open_part, part, attempt.size) as out:
            if attempt.size == 0 and track.init is not None:
                await _append(out, await requests.segment(track.init, _room(budget)), attempt, budget)
                await _mark(part, identity, 0, attempt.size)
            pending = track.segments[done:]
            last = track.segments[done - 1].sequence if done else -1
            stalls = 0
            while True:
                for segment in pending:
                    body = await requests.segment(segment, _room(budget))
                    if segment.key is not None:
                        body = _decrypt(body, await requests.key(segment.key), segment)
                    await _append(out, body, attempt, budget)
                    budget.duration += segment.duration
                    budget.segments += 1
                    done, last = done + 1, segment.sequence
                    await _mark(part, identity, done, attempt.size)
                    if track.live and budget.duration >= budget.max_duration:
                        budget.stops.append("--media-max-duration")
                        break
                if not track.live or track.reload is None or budget.stops:
                    break
                # A live playlist: wait a target duration (half after a reload that brought nothing), read it
                # again, go on with the segments it added; it ends with ENDLIST or when it stops growing.
                await asyncio.sleep(max(0.5, track.target_duration / (2 if stalls else 1)))
                fresh, ended = await track.reload()
                pending = [segment for segment in fresh if segment.sequence > last]
                track.live = not ended
                stalls = 0 if pending else stalls + 1
                if stalls >= LIVE_STALLS:
                    budget.stops.append("the live playlist stopped growing")
                    break
    except TooLarge as exc:
        await asyncio.to_thread(discard, part)
        attempt.error, attempt.retryable = _too_large(exc, budget), False
        return attempt
    except StreamError as exc:
        attempt.error, attempt.retryable = str(exc), exc.retryable
        return attempt
    attempt.complete = True
    return attempt


def _room(budget: Budget) -> int:
    return (budget.max_size - budget.size) if budget.max_size is not None else 1 << 62


def _too_large(exc: TooLarge, budget: Budget) -> str:
    if budget.max_size is None:
        return str(exc)
    return f"too large (the stream is over --media-max-size {budget.max_size:,} bytes)"


async def _append(out: BinaryIO, body: bytes, attempt: Attempt, budget: Budget) -> None:
    if budget.max_size is not None and budget.size + len(body) > budget.max_size:
        raise TooLarge("too large")
    await asyncio.to_thread(_write, out, body)
    attempt.size += len(body)
    attempt.progressed = True
    budget.size += len(body)


def _write(out: BinaryIO, body: bytes) -> None:
    out.write(body)
    out.flush()


async def _mark(part: Path, identity: str, segments: int, size: int) -> None:
    """Record the part's last whole segment (after its bytes were written: a kill between the two leaves a
    part longer than recorded, cut back on resume)."""
    meta = {"identity": identity, "segments": segments, "size": size, "at": time.time()}
    await asyncio.to_thread(write_meta, part, meta)


def _open_part(part: Path, size: int) -> BinaryIO:
    part.parent.mkdir(parents=True, exist_ok=True)
    out = part.open("r+b" if size and part.exists() else "wb")
    out.seek(size)
    out.truncate()
    return out


def _decrypt(body: bytes, key: bytes, segment: Segment) -> bytes:
    """AES-128-CBC with PKCS#7 padding; the IV is the playlist's, else the segment's media sequence number."""
    iv = (
        segment.key.iv
        if segment.key is not None and segment.key.iv is not None
        else segment.sequence.to_bytes(16, "big")
    )
    if len(body) % 16:
        raise StreamError(f"segment {segment.url} is not whole AES blocks ({len(body)} bytes)", retryable=True)
    # Imported here: its bindings add 6 MB to every crawl's memory, and few streams are encrypted.
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    plain = decryptor.update(body) + decryptor.finalize()
    pad = plain[-1] if plain else 0
    if not 1 <= pad <= 16 or plain[-pad:] != bytes([pad]) * pad:
        raise StreamError(f"segment {segment.url} does not decrypt with its key")
    return plain[:-pad]
