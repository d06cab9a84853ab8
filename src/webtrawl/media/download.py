"""One download attempt of a media file into `name.part`, resumed from what earlier attempts kept.

A `.part` is resumed only with a validator: `Range: bytes=N-` goes out with `If-Range` (the strong ETag,
else Last-Modified, saved beside the part in `name.part.json` when the first bytes arrived), so a file that
changed on the server comes back whole (200) and restarts from zero instead of being spliced onto old
bytes. A server that ignores Range answers 200 as well: same restart. A part without a validator (the
server sent none) is never trusted and is downloaded again from zero.

`download` never raises for what the server or network does; it reports how far it got, and the caller
decides whether to go on (progress was made) or to retry later.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from yarl import URL

from ..fetch.failures import describe_error

CHUNK = 1024 * 1024
"""Bytes read and written at a time (written on a thread, so the event loop never waits for the disk)."""

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


@dataclass(slots=True, kw_only=True)
class Attempt:
    """How far one attempt got."""

    complete: bool = False
    size: int = 0
    """Bytes in the part file now."""
    total: int | None = None
    """The file's full size, when the server said it."""
    resumed: bool = False
    """The attempt went on from bytes already in the part file."""
    progressed: bool = False
    """It added bytes to the part file."""
    status: int | None = None
    content_type: str = ""
    error: str | None = None
    retryable: bool = True


class TooLarge(Exception):
    """The file is larger than the crawl accepts; its part file is removed."""


def sidecar(part: Path) -> Path:
    """Where the validator of a part file is kept."""
    return part.with_name(part.name + ".json")


async def download(
    session: aiohttp.ClientSession,
    url: str,
    part: Path,
    *,
    headers: dict[str, str] | None = None,
    max_size: int | None = None,
) -> Attempt:
    """GET `url` into `part`, going on from the bytes it holds when their validator allows it."""
    meta = read_meta(part)
    offset = part.stat().st_size if meta.get("validator") and part.exists() else 0
    request = dict(headers or {})
    if offset:
        request["Range"] = f"bytes={offset}-"
        request["If-Range"] = meta["validator"]
    attempt = Attempt(size=offset)
    try:
        async with session.get(URL(url, encoded=True), headers=request, allow_redirects=True) as resp:
            attempt.status = resp.status
            attempt.content_type = (resp.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            start = _start(resp, offset, attempt)
            if start is None:
                return attempt
            if max_size is not None and attempt.total is not None and attempt.total > max_size:
                raise TooLarge(f"too large ({attempt.total:,} bytes, over --media-max-size {max_size:,})")
            attempt.resumed = start > 0
            if start == 0:
                validator = _validator(resp)
                await asyncio.to_thread(_start_part, part, {"validator": validator, "total": attempt.total})
            attempt.size = start
            await _stream(resp, part, start, attempt, max_size)
    except TooLarge as exc:
        await asyncio.to_thread(discard, part)
        attempt.error, attempt.retryable = str(exc), False
        return attempt
    except (aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
        attempt.error, attempt.retryable = describe_error(exc)
        return attempt
    if attempt.total is not None and attempt.size != attempt.total:
        attempt.error = f"size {attempt.size:,} differs from the announced {attempt.total:,}"
        return attempt
    attempt.complete = True
    return attempt


def _start(resp: aiohttp.ClientResponse, offset: int, attempt: Attempt) -> int | None:
    """The offset the response body starts at in the file, or None when it brings no file bytes."""
    if resp.status == 206:
        match = _CONTENT_RANGE.fullmatch((resp.headers.get("Content-Range") or "").strip())
        if match is None or int(match[1]) != offset:
            attempt.error = f"bad Content-Range {resp.headers.get('Content-Range')!r} for a request from {offset}"
            attempt.retryable = True
            return None
        attempt.total = None if match[3] == "*" else int(match[3])
        return offset
    if resp.status == 200:
        attempt.total = resp.content_length
        return 0
    if resp.status == 416:  # the part already holds every byte (a run killed before it renamed the file)
        length = re.fullmatch(r"bytes \*/(\d+)", (resp.headers.get("Content-Range") or "").strip())
        if length is not None and int(length[1]) == offset:
            attempt.total = offset
            return offset
    attempt.error = f"HTTP {resp.status}"
    attempt.retryable = retryable_status(resp.status) or resp.status == 416  # a range that moved
    return None


async def _stream(resp: aiohttp.ClientResponse, part: Path, start: int, attempt: Attempt, max_size: int | None) -> None:
    if resp.status == 416:
        return
    with part.open("r+b" if start else "wb") as out:
        out.seek(start)
        out.truncate()
        try:
            async for chunk in resp.content.iter_chunked(CHUNK):
                if max_size is not None and attempt.size + len(chunk) > max_size:
                    raise TooLarge(f"too large (over --media-max-size {max_size:,} bytes)")
                await asyncio.to_thread(out.write, chunk)
                attempt.size += len(chunk)
                attempt.progressed = True
        finally:
            await asyncio.to_thread(out.flush)


async def read_at_most(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """The body, or its first `limit` bytes (`content.read(n)` alone returns what has arrived so far)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(CHUNK):
        chunks.append(chunk[: limit - size])
        size += len(chunks[-1])
        if size >= limit:
            break
    return b"".join(chunks)


def retryable_status(status: int) -> bool:
    """Whether asking again may get the bytes: signed addresses expire (403, 410 on some sites, and the next
    attempt resolves a fresh one), and servers are overloaded or down for a while."""
    return status in (403, 408, 410, 425, 429) or status >= 500


def _validator(resp: aiohttp.ClientResponse) -> str | None:
    """What If-Range may carry: a strong ETag (weak ones are not allowed there), else Last-Modified."""
    etag = resp.headers.get("ETag")
    if etag and not etag.startswith("W/"):
        return etag
    return resp.headers.get("Last-Modified")


def read_meta(part: Path) -> dict:
    """What was saved beside a part file (`{}` when nothing readable was)."""
    try:
        meta = json.loads(sidecar(part).read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _start_part(part: Path, meta: dict) -> None:
    part.parent.mkdir(parents=True, exist_ok=True)
    write_meta(part, meta)


def write_meta(part: Path, meta: dict) -> None:
    """Save `meta` beside a part file, whole or not at all (a kill mid-write leaves the previous one)."""
    target = sidecar(part)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(json.dumps(meta))
    os.replace(temporary, target)


def discard(part: Path) -> None:
    """Remove a part file and its validator."""
    part.unlink(missing_ok=True)
    sidecar(part).unlink(missing_ok=True)
    sidecar(part).with_suffix(".json.tmp").unlink(missing_ok=True)


def sha256_of(path: Path) -> str:
    """The file's SHA-256 (hex), read in chunks; run it on a thread."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()
