"""Reading captures back for replay: which capture answers a URL at a time, and its response as archived.

A capture's response record is one gzip member at `warc_offset`, `warc_length` bytes long (see
`store.warc`), so one seek and one inflate give the status line, the headers and the body exactly as they
were received. Both inflations are bounded (the record by `RECORD_LIMIT`, the body's Content-Encoding by
`BODY_LIMIT`, through `parse.decode`), so neither a damaged file nor a decompression bomb that the crawl
archived faithfully can exhaust the dashboard's memory.

Only captures with a record count as archived: a fetch that got no response has none. A re-fetch that
brought nothing new (`unchanged`: a 304, or a 200 with the same payload digest) has a revisit record, which
holds no payload: its content is that of an earlier capture of the URL (`original_of`).

A rendered page brings more: the responses to its own GET requests (in `resources`, found by URL and time
like captures, so its styles and images replay; a POST's answer is no copy of its URL, and pywb finds it by
its body, `store.replaykey`), and the document as rendered (`urn:dom:URL`), which replay
shows in place of the served HTML: the scripts that built it never run in the archive.

A crawl is read as its sources (`store.shards.Sources`: a distributed crawl's shards, or an embedded crawl's
one database): each per-connection function here has a counterpart over them (`capture_in`, `original_in`,
`nearest_capture_in`, `nearest_resource_in`, `archived_in`), because a page fetched by one node may have its
images in another node's shard, and a re-fetch by one node may repeat what another fetched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..parse.decode import decompress
from ..urls import fingerprint
from .schema import REQUESTS_SCHEMA
from .shards import Source, Sources

RECORD_LIMIT = 256 * 1024 * 1024
"""Bytes one inflated response record may have (headers and the body as received)."""
BODY_LIMIT = 64 * 1024 * 1024
"""Bytes of body served once its Content-Encoding is undone; a longer one is cut."""

WARC_DIR = "warc"
"""Where a crawl directory keeps its WARC files."""
_GZIP_MAGIC = b"\x1f\x8b"
_COLUMNS = (
    "id, url, fetched_at, status, content_type, size, truncated, title, location, error, "
    "warc_file, warc_offset, warc_length, node, unchanged, payload_digest"
)


@dataclass(frozen=True, slots=True)
class ArchivedCapture:
    """What replay needs from a capture row."""

    id: int
    url: str
    fetched_at: float
    status: int | None
    content_type: str
    size: int
    truncated: str | None
    title: str
    location: str | None
    """Where a redirect led (normalized), when it could be followed."""
    error: str | None
    warc_file: str | None
    warc_offset: int | None
    warc_length: int | None
    node: str | None
    """The node of a distributed crawl that fetched it: its WARC file is in that node's directory."""
    unchanged: bool
    """A re-fetch that brought nothing new: its record is a revisit record, without the payload."""
    payload_digest: str | None


@dataclass(frozen=True, slots=True)
class ArchivedResponse:
    """A response as archived, with its Content-Encoding undone (so `body` is what a browser would render)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    """At most `BODY_LIMIT` bytes; what decoded before the fault when the encoding is damaged."""

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)


def capture_by_id(conn: sqlite3.Connection, crawl_id: int, capture_id: int) -> ArchivedCapture | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM captures WHERE id = ? AND crawl_id = ?", (capture_id, crawl_id)
    ).fetchone()
    return _archived(row)


def gets_only(conn: sqlite3.Connection) -> str:
    """The condition that keeps a resource query to GET answers; none for a database older than schema 14 (a
    crawl of an earlier webtrawl read here read-only, so not migrated), whose requests were all GETs."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return " AND method = 'GET'" if version >= REQUESTS_SCHEMA else ""


def captures_of_url(conn: sqlite3.Connection, crawl_id: int, url: str) -> list[ArchivedCapture]:
    """Every capture of normalized `url`, oldest first, and every response to it archived outside the captures
    (a robots.txt or a sitemap the crawl read, a rendered page's request)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM captures WHERE crawl_id = ?1 AND fp = ?2 AND url = ?3 "
        f"UNION ALL SELECT {_RESOURCE_COLUMNS} FROM resources WHERE crawl_id = ?1 AND url = ?3 AND status IS NOT NULL"
        f"{gets_only(conn)} ORDER BY fetched_at, id",
        (crawl_id, fingerprint(url), url),
    )
    return [capture for row in rows if (capture := _archived(row)) is not None]


def original_of(conn: sqlite3.Connection, crawl_id: int, revisit: ArchivedCapture) -> ArchivedCapture | None:
    """The capture whose content unchanged capture `revisit` stands for, or None when the crawl has none.

    It is the latest earlier capture of the URL with a full response record (a 2xx, not itself a revisit):
    for a 304 (profile server-not-modified) the last one, whatever its digest, since the validators the
    request sent came from it; for a 200 (identical-payload-digest) the last one with the same digest.
    """
    same_digest = "" if revisit.status == 304 else " AND payload_digest = ?"
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM captures WHERE crawl_id = ? AND fp = ? AND url = ? AND unchanged = 0 "
        f"AND warc_file IS NOT NULL AND status BETWEEN 200 AND 299 AND (fetched_at, id) < (?, ?){same_digest} "
        "ORDER BY fetched_at DESC, id DESC LIMIT 1",
        (crawl_id, fingerprint(revisit.url), revisit.url, revisit.fetched_at, revisit.id)
        + (() if revisit.status == 304 else (revisit.payload_digest,)),
    ).fetchone()
    return _archived(row)


def nearest_capture(conn: sqlite3.Connection, crawl_id: int, url: str, when: float) -> ArchivedCapture | None:
    """The archived capture of normalized `url` fetched nearest to `when` (the later one of two as near)."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM captures WHERE crawl_id = ? AND fp = ? AND url = ? AND warc_file IS NOT NULL "
        "ORDER BY ABS(fetched_at - ?), fetched_at DESC LIMIT 1",
        (crawl_id, fingerprint(url), url, when),
    ).fetchone()
    return _archived(row)


_RESOURCE_COLUMNS = (
    "-id, target, fetched_at, status, content_type, 0, NULL, '', NULL, NULL, warc_file, warc_offset, "
    "warc_length, node, 0, payload_digest"
)
"""A `resources` row as a capture: its id negated, so it is never taken for a capture's; its URL as archived."""


def nearest_resource(conn: sqlite3.Connection, crawl_id: int, url: str, when: float) -> ArchivedCapture | None:
    """The response to a rendered page's request for normalized `url` nearest to `when` (see `nearest_capture`)."""
    row = conn.execute(
        f"SELECT {_RESOURCE_COLUMNS} FROM resources WHERE crawl_id = ? AND url = ? AND status IS NOT NULL "
        f"{gets_only(conn)} ORDER BY ABS(fetched_at - ?), fetched_at DESC LIMIT 1",
        (crawl_id, url, when),
    ).fetchone()
    return _archived(row)


def made_for(
    conn: sqlite3.Connection, crawl_id: int, capture: ArchivedCapture, kind: str
) -> tuple[str, int, int] | None:
    """Where the record webtrawl made for rendered `capture` is (its `dom` or `thumbnail`): file, offset, length."""
    row = conn.execute(
        "SELECT warc_file, warc_offset, warc_length FROM resources WHERE crawl_id = ? AND url = ? AND fetched_at = ? "
        "AND page_fp = ? LIMIT 1",
        (crawl_id, f"urn:{kind}:{capture.url}", capture.fetched_at, fingerprint(capture.url)),
    ).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def _archived(row: tuple[Any, ...] | None) -> ArchivedCapture | None:
    """The capture of a `_COLUMNS` row (SQLite keeps `unchanged`, the last but one, as 0 or 1)."""
    if not row:
        return None
    values = list(row)
    values[-2] = bool(values[-2])
    return ArchivedCapture(*values)


def is_archived(conn: sqlite3.Connection, crawl_id: int, url: str) -> bool:
    """Whether normalized `url` has at least one capture with a record."""
    row = (
        conn.execute(
            "SELECT 1 FROM captures WHERE crawl_id = ? AND fp = ? AND url = ? AND warc_file IS NOT NULL LIMIT 1",
            (crawl_id, fingerprint(url), url),
        ).fetchone()
        or conn.execute(
            f"SELECT 1 FROM resources WHERE crawl_id = ? AND url = ? AND status IS NOT NULL{gets_only(conn)} LIMIT 1",
            (crawl_id, url),
        ).fetchone()
    )
    return row is not None


@dataclass(frozen=True, slots=True)
class Found:
    """A capture and the source that holds it: its row, its WARC file (in `source.directory`) and the records
    made for it (a rendered page's are written by the node that rendered it, into its own shard)."""

    capture: ArchivedCapture
    source: Source


def capture_in(sources: Sources, capture_id: int) -> Found | None:
    """The capture a reader names `capture_id` (`Sources.capture_id`), or None when no readable source has it."""
    located = sources.locate(capture_id)
    if located is None:
        return None
    source, local = located
    capture = capture_by_id(source.conn, source.crawl_id, local)
    return None if capture is None else Found(capture, source)


def original_in(sources: Sequence[Source], revisit: Found) -> Found | None:
    """The capture unchanged capture `revisit` repeats (`original_of`), in whichever source holds it: a node
    may re-fetch a URL another node fetched first. Across sources the latest one is it."""
    originals = [
        Found(original, source)
        for source in sources
        if (original := original_of(source.conn, source.crawl_id, revisit.capture)) is not None
    ]
    return max(originals, key=lambda found: found.capture.fetched_at, default=None)


def nearest_capture_in(sources: Sequence[Source], url: str, when: float) -> Found | None:
    """The archived capture of normalized `url` nearest to `when` in any source (see `nearest_capture`)."""
    return _nearest(sources, nearest_capture, url, when)


def nearest_resource_in(sources: Sequence[Source], url: str, when: float) -> Found | None:
    """The response to a rendered page's request for `url` nearest to `when` in any source (`nearest_resource`)."""
    return _nearest(sources, nearest_resource, url, when)


def _nearest(
    sources: Sequence[Source],
    nearest: Callable[[sqlite3.Connection, int, str, float], ArchivedCapture | None],
    url: str,
    when: float,
) -> Found | None:
    """The nearest of each source's nearest, ranked as one database ranks them: the later one of two as near."""
    found = [
        Found(capture, source)
        for source in sources
        if (capture := nearest(source.conn, source.crawl_id, url, when)) is not None
    ]
    return min(found, key=lambda f: (abs(f.capture.fetched_at - when), -f.capture.fetched_at), default=None)


def archived_in(sources: Sequence[Source], url: str) -> bool:
    """Whether normalized `url` has a record in any source (`is_archived`)."""
    return any(is_archived(source.conn, source.crawl_id, url) for source in sources)


def record_path(directory: Path, name: str) -> Path | None:
    """The WARC file `name` of crawl directory `directory` (in its `WARC_DIR`), or None when it is not there.

    A name is a bare file name as the writer made it; anything else (a path, a hidden file) is refused, so
    a tampered row cannot make the dashboard read outside the archive.
    """
    if not name or name != Path(name).name or name.startswith("."):
        return None
    path = directory / WARC_DIR / name
    return path if path.is_file() else None


def read_response(path: Path, offset: int, length: int, url: str) -> ArchivedResponse:
    """The response record of `url` at `offset` in WARC file `path`, its payload decoded; StoreError says
    what is wrong if it is unreadable, damaged, or not that URL's response."""
    http_head, found, body = read_block(path, offset, length, "response", url).partition(b"\r\n\r\n")
    http_lines = http_head.decode("latin-1").split("\r\n")
    status_line = http_lines[0].split(" ", 2)
    if not found or len(status_line) < 2 or not status_line[1].isdigit():
        raise StoreError(f"{_where(path, offset)} is damaged (no HTTP status line)")
    headers = [(name.strip(), value.strip()) for name, _, value in (line.partition(":") for line in http_lines[1:])]
    encoding = next((value for name, value in headers if name.lower() == "content-encoding"), None)
    decoded, _cut = decompress(body, encoding, BODY_LIMIT)
    return ArchivedResponse(int(status_line[1]), headers, decoded)


def read_made(path: Path, offset: int, length: int, uri: str) -> bytes:
    """The block of the resource record webtrawl made for a rendered page (`urn:dom:…`, `urn:thumbnail:…`)."""
    return read_block(path, offset, length, "resource", uri)


def read_block(path: Path, offset: int, length: int, kind: str, uri: str) -> bytes:
    """The block of the `kind` record ("response", "resource") of `uri` at `offset` in WARC file `path`, as
    written (a response's is the HTTP message as received); StoreError says what is wrong if it is
    unreadable, damaged, or another record."""
    data, where = _read_member(path, offset, length)
    fields, rest = _warc_fields(data, where)
    if fields.get("warc-type") != kind:
        raise StoreError(f"{where} is a {fields.get('warc-type', 'typeless')} record, not a {kind}")
    if fields.get("warc-target-uri") != uri:
        raise StoreError(f"{where} holds {fields.get('warc-target-uri')!r}, not {uri!r}: the index does not match")
    return _block(fields, rest, where)


def _where(path: Path, offset: int) -> str:
    return f"the record at byte {offset} of {path.name}"


def _read_member(path: Path, offset: int, length: int) -> tuple[bytes, str]:
    """The inflated gzip member (one record) at `offset`, and how to name it in an error."""
    where = _where(path, offset)
    if offset < 0 or not 0 < length <= RECORD_LIMIT:
        raise StoreError(f"{where} has an impossible length ({length} bytes): the index is damaged")
    try:
        with path.open("rb") as stream:
            stream.seek(offset)
            member = stream.read(length)
    except OSError as exc:
        raise StoreError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    if len(member) < length:
        raise StoreError(f"{path.name} ends before {where} does: the file is shorter than the index says")
    data, cut = decompress(member, "gzip", RECORD_LIMIT)
    if cut or not member.startswith(_GZIP_MAGIC):
        raise StoreError(f"{where} is damaged (not one whole gzip member)")
    return data, where


def _warc_fields(data: bytes, where: str) -> tuple[dict[str, str], bytes]:
    head, found, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("utf-8", "replace").split("\r\n")
    if not found or not lines[0].startswith("WARC/"):
        raise StoreError(f"{where} is damaged (no WARC header)")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return fields, rest


def _block(fields: dict[str, str], rest: bytes, where: str) -> bytes:
    size = fields.get("content-length", "")
    block = rest[: int(size)] if size.isdigit() else b""
    if not size.isdigit() or len(block) < int(size):
        raise StoreError(f"{where} is damaged (its block is shorter than its Content-Length)")
    return block
