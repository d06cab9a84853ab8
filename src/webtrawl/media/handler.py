"""What happens to one media task handed out by the frontier: resolve, download, check, file, record.

The frontier hands a task out at its host's pace like a page; the handler gives the host's page slot back
at once and waits for a media slot instead (`--media-concurrency` in all, `per_host` per host), so a long
download never holds a slot the host's pages need. Within one hand-out a download that makes progress
goes on from where it broke, re-resolving the address each time (signed addresses expire); one that makes
none goes back to the frontier to retry later with backoff, its `.part` kept for the next attempt, or run.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import shutil
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import Literal, TypedDict

import mutagen

from ..config import CrawlConfig
from ..fetch.fetcher import Fetcher
from ..fetch.page import PageFetcher, Sniffed
from ..models import Completion, Entry, MediaFile
from ..parse.decode import decompress
from ..parse.media import media_kind
from ..politeness import Politeness
from ..results import PageResult, retry_or_fail
from ..stats import Stats
from ..store.db import Database
from ..store.media import stored_with_digest, url_of
from ..store.mirror import mirror_path, safe_name
from .download import Attempt, discard, download, sha256_of
from .playlists import read_playlist
from .resolvers import PLAYLIST, MediaClient, MediaTask, Registry, ResolveError, Resolver
from .resolvers import Page as MediaPage
from .sniffed import SNIFFED, SniffedResolver, Sniffs
from .streams import StreamFiles, collect_stream, discard_parts, is_manifest, manifest_protocol, remux

log = logging.getLogger(__name__)

MEDIA_DIR = "media"
RESUMES_PER_HAND_OUT = 8
"""Times a download that keeps making progress goes on within one hand-out before it waits its turn."""
RESUME_PAUSE = 0.2
"""Seconds between two of those attempts (the server just broke the connection)."""
MAX_PLAYLIST = 1024 * 1024


class MediaHandler:
    """Turns a media task's `Entry` into a result for the committer (never raises for a task)."""

    def __init__(
        self,
        config: CrawlConfig,
        fetcher: Fetcher,
        politeness: Politeness,
        db: Database,
        crawl_id: int,
        registry: Registry,
        out: Path,
        stats: Stats,
        *,
        sniffs: Sniffs,
        pages: PageFetcher,
    ) -> None:
        """`sniffs`: the addresses rendered pages' players revealed; `pages`: how a sniffed task's page is
        rendered again for a fresh address (when the crawl renders)."""
        self._config = config
        self._sniffs = sniffs
        self._pages = pages
        self._parts: dict[Path, tuple[asyncio.Lock, list[int]]] = {}
        """A lock per part file being written: two tasks may name the same file (a page's address, and the same
        address a player asked for elsewhere)."""
        self._fetcher = fetcher
        self._politeness = politeness
        self._db = db
        self._crawl_id = crawl_id
        self._registry = registry
        self._root = out / MEDIA_DIR
        self._out = out
        self._stats = stats
        self._slots = asyncio.Semaphore(config.media.concurrency)
        self._host_active: Counter[str] = Counter()
        self._host_freed = asyncio.Condition()
        self._remux = bool(shutil.which("ffmpeg"))
        if config.media.remux and not self._remux:
            log.warning("--media-remux: ffmpeg is not installed, so streams are kept as joined (.ts, .aac, …)")
        self._stored: dict[str, str] = {}
        """sha256 → task of the files this run stored (their rows may not be committed yet)."""

    async def handle(self, entry: Entry) -> PageResult:
        task = MediaTask.from_entry_url(entry.url)
        try:
            rules = self._politeness.rules(entry.host)
            if rules is not None and not rules.allowed(task.url):
                self._politeness.cancel(entry.host)
                return await self._failed(entry, task, rules.refusal)
            if task.resolver == PLAYLIST:
                return await self._playlist(entry, task)
            # The request starts now, at the host's pace; from here on the download holds a media slot.
            self._politeness.release(entry.host)
            resolver = await self._sniffed(entry) if task.resolver == SNIFFED else self._registry.get(task.resolver)
            if resolver is None:
                return await self._failed(entry, task, f"resolver {task.resolver!r} is not installed")
            async with self._slot(entry.host):
                return await self._collect(entry, task, resolver)
        except Exception as exc:  # one task's bug must not stop the crawl
            log.exception("error while collecting %s", task.key)
            return await self._failed(entry, task, f"internal error: {exc!r}"[:300])

    @asynccontextmanager
    async def _slot(self, host: str) -> AsyncIterator[None]:
        async with self._host_freed:
            await self._host_freed.wait_for(lambda: self._host_active[host] < self._config.media.per_host)
            self._host_active[host] += 1
        try:
            async with self._slots:
                yield
        finally:
            async with self._host_freed:
                self._host_active[host] -= 1
                if not self._host_active[host]:
                    del self._host_active[host]
                self._host_freed.notify_all()

    async def _playlist(self, entry: Entry, task: MediaTask) -> PageResult:
        """A playlist is read: an HLS playlist or a DASH manifest is a stream, collected as this one task; any
        other playlist lists media that become tasks of their own."""
        outcome = None
        try:
            outcome = await self._fetcher.fetch(task.url, any_type=True, max_size=MAX_PLAYLIST)
        finally:
            self._politeness.release(entry.host, ip=outcome.ip if outcome else None)
        kinds = {*self._config.media.kinds, "playlist"}
        if outcome.status != 200:
            reason = outcome.error or f"HTTP {outcome.status}"
            if outcome.retryable or outcome.status is None or outcome.status >= 500:
                return PageResult(retry_or_fail(self._config.fetch, entry, reason, outcome.retry_after))
            return PageResult(Completion(entry=entry, verdict="failed", reason=reason))
        body, _cut = decompress(outcome.body, outcome.header("Content-Encoding"), MAX_PLAYLIST)
        if manifest_protocol(body):
            async with self._slot(entry.host):
                return await self._collect(entry, task, self._registry.generic, stream=True)
        if outcome.content_type in ("text/html", "application/xhtml+xml") or body[:512].lstrip().startswith(b"<!"):
            reason = f"not a playlist but a page ({outcome.content_type or 'no type'})"
            return await self._failed(entry, task, reason)
        page = MediaPage(
            task.url, "", [ref for ref in read_playlist(body, task.url, outcome.content_type) if ref.kind in kinds]
        )
        completion = Completion(entry=entry, verdict="done")
        completion.children = [listed.new_url(entry.depth, entry.fp) for listed in self._registry.generic.find(page)]
        return PageResult(completion)

    async def _collect(self, entry: Entry, task: MediaTask, resolver: Resolver, *, stream: bool = False) -> PageResult:
        part = self._part(task)
        async with self._writing(part):
            return await self._collect_into(part, entry, task, resolver, stream)

    @asynccontextmanager
    async def _writing(self, part: Path) -> AsyncIterator[None]:
        """The part file to this task alone; a lock is forgotten when no task holds or awaits it."""
        lock, users = self._parts.setdefault(part, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._parts[part]

    async def _collect_into(
        self, part: Path, entry: Entry, task: MediaTask, resolver: Resolver, stream: bool
    ) -> PageResult:
        session = self._fetcher.media_session()
        client = MediaClient(session)
        config = self._config.media
        resumes, attempt, url, files = 0, Attempt(), None, None
        for _ in range(RESUMES_PER_HAND_OUT):
            try:
                resolved = await resolver.resolve(task, client)
            except ResolveError as exc:
                return await self._again_or_fail(entry, task, str(exc), exc.retryable, url)
            url = resolved.url
            if stream or is_manifest(url, resolved.content_type):
                files = await collect_stream(
                    session,
                    url,
                    part,
                    headers=resolved.headers,
                    quality=config.stream_quality,
                    max_size=config.max_size,
                    max_duration=config.max_duration,
                )
                attempt = files.attempt
            else:
                attempt = await download(session, url, part, headers=resolved.headers, max_size=config.max_size)
            resumes += attempt.resumed
            if attempt.complete or not attempt.progressed or not attempt.retryable:
                break
            await asyncio.sleep(RESUME_PAUSE)
        if not attempt.complete:
            return await self._again_or_fail(entry, task, attempt.error or "incomplete", attempt.retryable, url)
        if files is not None:
            media = await self._stream_file(entry, task, part, files, url or task.url)
        else:
            media = await self._file(entry, task, part, attempt, url or task.url)
        media.resumes = resumes
        self._stats.record(200, media.size, None)
        return PageResult(Completion(entry=entry, verdict="done", media=media))

    async def _again_or_fail(
        self, entry: Entry, task: MediaTask, reason: str, retryable: bool, url: str | None
    ) -> PageResult:
        completion = (
            retry_or_fail(self._config.fetch, entry, reason)
            if retryable
            else Completion(entry=entry, verdict="failed", reason=reason)
        )
        if completion.verdict == "retry":  # its .part waits for the next attempt
            return PageResult(completion)
        await asyncio.to_thread(discard_parts, self._part(task))
        result = await self._failed(entry, task, completion.reason or reason)
        if result.completion.media is not None:
            result.completion.media.url = url
        return result

    async def _failed(self, entry: Entry, task: MediaTask, reason: str) -> PageResult:
        media = MediaFile(task=task.key, page_url=await self._page_url(entry), error=reason, fetched_at=time.time())
        return PageResult(Completion(entry=entry, verdict="failed", reason=reason, media=media))

    async def _file(self, entry: Entry, task: MediaTask, part: Path, attempt: Attempt, url: str) -> MediaFile:
        """Check, tag and move the finished part into place (or drop it as a duplicate)."""
        media = MediaFile(
            task=task.key,
            page_url=await self._page_url(entry),
            url=url,
            kind=_kind(attempt.content_type, url),
            content_type=attempt.content_type,
            size=attempt.size,
            fetched_at=time.time(),
        )
        await self._store(task, part, _final_name(part, attempt.content_type), media)
        return media

    async def _stream_file(self, entry: Entry, task: MediaTask, part: Path, files: StreamFiles, url: str) -> MediaFile:
        """A stream's joined tracks: remuxed into one MP4 when asked (and ffmpeg is there), then stored like a
        file; a separate audio track that was not muxed in is kept beside the main one."""
        media = MediaFile(
            task=task.key,
            page_url=await self._page_url(entry),
            url=url,
            kind=files.kind,
            content_type=files.attempt.content_type,
            size=files.attempt.size,
            fetched_at=time.time(),
            stream=files.protocol,
            segments=files.segments,
            duration=files.duration or None,
        )
        if files.stops:
            log.info("%s: live recording ended: %s", task.key, "; ".join(files.stops))
        base = part.with_name(part.name.removesuffix(".part"))
        main = part
        extension = files.extension
        if self._config.media.remux and self._remux:
            extension = "m4a" if files.kind == "audio" else "mp4"
            remuxed = base.with_name(base.name + ".remux.part")
            if (reason := await remux(files, remuxed)) is None:
                await asyncio.to_thread(discard_parts, part)
                main, files.parts = remuxed, files.parts[:1]
                media.content_type = "audio/mp4" if extension == "m4a" else "video/mp4"
                media.size = (await asyncio.to_thread(remuxed.stat)).st_size
            else:
                log.warning("%s: kept as joined (%s)", task.key, reason)
                extension = files.extension
        if len(files.parts) > 1 and main is part:
            audio_track, audio = files.parts[1]
            final_audio = base.with_suffix(f".audio.{audio_track.extension}")
            await asyncio.to_thread(_move, audio, final_audio)
            media.audio_path = final_audio.relative_to(self._out).as_posix()
        await self._store(task, main, base.with_suffix(f".{extension}"), media)
        return media

    async def _store(self, task: MediaTask, part: Path, final: Path, media: MediaFile) -> None:
        """Hash and tag `part`, then move it to `final`, or drop it when a file of the same content is stored."""
        digest = await asyncio.to_thread(sha256_of, part)
        tags = await asyncio.to_thread(_tags, part)
        media.sha256 = digest
        for name, value in tags.items():
            if getattr(media, name) is None:
                setattr(media, name, value)
        earlier = self._stored.get(digest)
        if earlier is None:
            self._stored[digest] = task.key  # before any await: a twin finishing meanwhile sees this one
            earlier = await self._db.run(stored_with_digest, self._crawl_id, digest)
            if earlier is not None:
                self._stored[digest] = earlier
        if earlier is not None and earlier != task.key:
            await asyncio.to_thread(discard, part)
            media.duplicate_of = earlier
            return
        await asyncio.to_thread(_move, part, final)
        media.path = final.relative_to(self._out).as_posix()

    async def _sniffed(self, entry: Entry) -> SniffedResolver:
        """The resolver of a task a player revealed: its page is rendered again when a fresh address is needed
        (that rendering is not archived: the page was, when it was crawled)."""
        page_url = await self._page_url(entry)

        async def render_again() -> list[Sniffed]:
            fetched = await self._pages.fetch_page(page_url)
            return fetched.rendering.media if fetched.rendering is not None else []

        return SniffedResolver(self._sniffs, render_again if self._config.render.enabled and page_url else None)

    def _part(self, task: MediaTask) -> Path:
        """`media/<host>/<path of the address>.part` for direct and sniffed addresses,
        `media/<host>/<resolver>/<id>.part` for the others."""
        if task.id == task.url or task.resolver == SNIFFED:  # named by its address (a sniffed one unsigned)
            relative = mirror_path(task.id, "")
        else:
            host = mirror_path(task.url, "").parts[0]
            relative = PurePosixPath(host, safe_name(task.resolver), safe_name(task.id))
        path = self._root.joinpath(*relative.parts)
        return path.with_name(path.name + ".part")

    async def _page_url(self, entry: Entry) -> str:
        if entry.referrer_fp is None:
            return ""
        return await self._db.run(url_of, self._crawl_id, entry.referrer_fp) or ""


def _final_name(part: Path, content_type: str) -> Path:
    final = part.with_name(part.name.removesuffix(".part"))
    if not final.suffix and (extension := mimetypes.guess_extension(content_type or "")):
        final = final.with_name(final.name + extension)
    return final


def _move(part: Path, final: Path) -> None:
    part.replace(final)
    discard(part)  # its validator


def _kind(content_type: str, url: str) -> str:
    major = content_type.partition("/")[0]
    if major in ("audio", "video"):
        return major
    return media_kind(url) or ""


_ID3_FRAMES: dict[Literal["title", "artist", "album"], str] = {"title": "TIT2", "artist": "TPE1", "album": "TALB"}


class _Tags(TypedDict, total=False):
    """The `MediaFile` fields a file's tags fill in, those it has."""

    duration: float
    title: str
    artist: str
    album: str


def _tags(path: Path) -> _Tags:
    """Duration, title, artist and album from the file's tags, where mutagen can read them.

    mutagen's "easy" interface names tags alike across formats, but not ID3 tags inside WAV or AIFF
    files: those are read by their frame ids.
    """
    try:
        file = mutagen.File(path, easy=True)
    except Exception:  # a file mutagen cannot read is still a file collected
        return {}
    if file is None:
        return {}
    found: _Tags = {}
    length = getattr(file.info, "length", None)
    if length:
        found["duration"] = round(float(length), 3)
    tags = file.tags
    for name, frame in _ID3_FRAMES.items():
        values = None
        if tags is not None:
            values = tags.get(name) or tags.get(frame)
        if values:
            value = values.text if hasattr(values, "text") else values
            found[name] = str(value[0]) if isinstance(value, list) and value else str(value)
    return found
