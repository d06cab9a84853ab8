"""Reading captures back for replay: which capture answers a URL at a time, and its response as archived.

A capture's response record is one gzip member at `warc_offset`, `warc_length` bytes long (see
`store.warc`), so one seek and one inflate give the status line, the headers and the body exactly as they
were received. Both inflations are bounded (the record by `RECORD_LIMIT`, the body's Content-Encoding by
`BODY_LIMIT`, through `parse.decode`), so neither a damaged file nor a decompression bomb that the crawl
archived faithfully can exhaust the dashboard's memory.

Only captures with a record count as archived: a fetch that got no response has none. A re-fetch that
brought nothing new (`unchanged`: a 304, or a 200 with the same payload digest) has a revisit record, which
holds no payload: its content is that of an earlier capture of the URL (`original_of`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..parse.decode import decompress
from ..urls import fingerprint

RECORD_LIMIT = 256 * 1024 * 1024
"""Bytes one inflated response record may have (headers and the body as received)."""
BODY_LIMIT = 64 * 1024 * 1024
"""Bytes of body served once its Content-Encoding is undone; a longer one is cut."""

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


def _archived(row: tuple[Any, ...] | None) -> ArchivedCapture | None:
    """The capture of a `_COLUMNS` row (SQLite keeps `unchanged`, the last but one, as 0 or 1)."""
    if not row:
        return None
    values = list(row)
    values[-2] = bool(values[-2])
    return ArchivedCapture(*values)


def is_archived(conn: sqlite3.Connection, crawl_id: int, url: str) -> bool:
    """Whether normalized `url` has at least one capture with a record."""
    row = conn.execute(
        "SELECT 1 FROM captures WHERE crawl_id = ? AND fp = ? AND url = ? AND warc_file IS NOT NULL LIMIT 1",
        (crawl_id, fingerprint(url), url),
    ).fetchone()
    return row is not None


def record_path(warc_dir: Path, name: str) -> Path | None:
    """The WARC file `name` in `warc_dir`, or None when it is not there.

    A name is a bare file name as the writer made it; anything else (a path, a hidden file) is refused, so
    a tampered row cannot make the dashboard read outside the archive.
    """
    if not name or name != Path(name).name or name.startswith("."):
        return None
    path = warc_dir / name
    return path if path.is_file() else None


def read_response(path: Path, offset: int, length: int, url: str) -> ArchivedResponse:
    """The response record of `url` at `offset` in WARC file `path`; StoreError says what is wrong if it is
    unreadable, damaged, or not that URL's response."""
    where = f"the record at byte {offset} of {path.name}"
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
    return _parse_record(data, url, where)


def _parse_record(data: bytes, url: str, where: str) -> ArchivedResponse:
    head, found, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("utf-8", "replace").split("\r\n")
    if not found or not lines[0].startswith("WARC/"):
        raise StoreError(f"{where} is damaged (no WARC header)")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    if fields.get("warc-type") != "response":
        raise StoreError(f"{where} is a {fields.get('warc-type', 'typeless')} record, not a response")
    if fields.get("warc-target-uri") != url:
        raise StoreError(f"{where} holds {fields.get('warc-target-uri')!r}, not {url!r}: the index does not match")
    size = fields.get("content-length", "")
    block = rest[: int(size)] if size.isdigit() else b""
    if not size.isdigit() or len(block) < int(size):
        raise StoreError(f"{where} is damaged (its block is shorter than its Content-Length)")
    http_head, found, body = block.partition(b"\r\n\r\n")
    http_lines = http_head.decode("latin-1").split("\r\n")
    status_line = http_lines[0].split(" ", 2)
    if not found or len(status_line) < 2 or not status_line[1].isdigit():
        raise StoreError(f"{where} is damaged (no HTTP status line)")
    headers = [(name.strip(), value.strip()) for name, _, value in (line.partition(":") for line in http_lines[1:])]
    encoding = next((value for name, value in headers if name.lower() == "content-encoding"), None)
    decoded, _cut = decompress(body, encoding, BODY_LIMIT)
    return ArchivedResponse(int(status_line[1]), headers, decoded)
