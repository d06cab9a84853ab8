"""What `webtrawl show DIR URL` reads: every capture of one URL, and the archived HTTP response of one of
them, so that looking at what the crawl got needs no WARC tool.

The response comes from the same record the dashboard's archived copy comes from, but kept as received: the
status line and headers as archived, then the payload still in its Content-Encoding (`decoded` undoes it on
request). So the record's block is read with `replay.read_block`, short of `replay.read_response`, which
always undoes the encoding. The archive never holds chunk
framing: the client removes it before the body is archived, and the writer renames Transfer-Encoding (see
`store.warc._header_lines`), so undoing the Content-Encoding is all that decoding takes.

A revisit record (an unchanged re-fetch) holds no payload: such a capture is shown through the capture
whose content it repeats (`replay.original_of`), as the dashboard shows it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..errors import StoreError
from ..models import NOT_DOWNLOADED, State
from ..parse.decode import decompress
from ..urls import fingerprint
from .export import iso_time
from .replay import (
    BODY_LIMIT,
    WARC_DIR,
    ArchivedCapture,
    captures_of_url,
    original_of,
    read_block,
    record_path,
)


@dataclass(frozen=True, slots=True)
class ArchivedMessage:
    """An HTTP response exactly as its record holds it."""

    head: bytes
    """The status line and the headers, each line ending in CRLF, then the empty line."""
    payload: bytes
    """The body as received: still compressed when the server sent a Content-Encoding."""

    def decoded(self) -> tuple[bytes, bool]:
        """The payload with its Content-Encoding undone (at most `BODY_LIMIT` bytes), and whether it is cut
        there or damaged (then what decoded before the fault). A coding that cannot be undone leaves it as is."""
        lines = self.head.decode("latin-1").split("\r\n")[1:]
        codings = [value for name, _, value in (line.partition(":") for line in lines)
                   if name.strip().lower() == "content-encoding"]  # fmt: skip
        return decompress(self.payload, ", ".join(codings) or None, BODY_LIMIT)


def captures_of(conn: sqlite3.Connection, crawl_id: int, url: str) -> list[ArchivedCapture]:
    """Every capture of normalized `url`, oldest first. With none, StoreError says so and what the crawl
    knows of the URL: its state in the frontier, or why it was dropped."""
    captures = captures_of_url(conn, crawl_id, url)
    if not captures:
        raise StoreError(f"no capture of {url} in this crawl ({_known(conn, crawl_id, fingerprint(url), url)})")
    return captures


def _known(conn: sqlite3.Connection, crawl_id: int, fp: int, url: str) -> str:
    queued = conn.execute(
        "SELECT state, reason FROM urls WHERE crawl_id = ? AND fp = ? AND url = ?", (crawl_id, fp, url)
    ).fetchone()
    if queued is not None:
        state = State(queued[0]).name.lower()
        return f"the frontier has it as {state}" + (f": {queued[1]}" if queued[1] else "")
    dropped = conn.execute(
        "SELECT reason FROM dropped WHERE crawl_id = ? AND fp = ? AND url = ?", (crawl_id, fp, url)
    ).fetchone()
    return f"dropped: {dropped[0]}" if dropped is not None else "the crawl never found it"


def latest_archived(
    conn: sqlite3.Connection, crawl_id: int, captures: list[ArchivedCapture]
) -> tuple[ArchivedCapture, ArchivedCapture]:
    """The latest of `captures` (oldest first) that has a record, and the capture whose response record holds
    its content: itself, or for an unchanged capture the one it repeats."""
    shown = next((capture for capture in reversed(captures) if capture.warc_file is not None), None)
    if shown is None:
        last = captures[-1]
        raise StoreError(
            f"no capture of {last.url} has an archived record: {len(captures)} fetch(es), "
            f"the last at {iso_time(last.fetched_at)}: {_no_record(last)}"
        )
    if not shown.unchanged:
        return shown, shown
    original = original_of(conn, crawl_id, shown)
    if original is None:
        raise StoreError(
            f"the latest capture of {shown.url} ({iso_time(shown.fetched_at)}) is a revisit record, and this crawl "
            "has no earlier full capture whose payload it repeats"
        )
    return shown, original


def read_message(directory: Path, capture: ArchivedCapture) -> ArchivedMessage:
    """The response record of `capture` (not a revisit) in crawl directory `directory`; StoreError says which
    file is missing, or what is wrong with the record."""
    name = capture.warc_file or ""
    path = record_path(directory, name)
    if path is None:
        elsewhere = f" (node {capture.node} fetched it: the file is in that node's directory)" if capture.node else ""
        raise StoreError(f"the WARC file {name} is missing from {directory / WARC_DIR}{elsewhere}")
    block = read_block(path, capture.warc_offset or 0, capture.warc_length or 0, "response", capture.url)
    head, found, payload = block.partition(b"\r\n\r\n")
    if not found:
        raise StoreError(f"the record of {capture.url} in {name} is damaged (no end to its HTTP header)")
    return ArchivedMessage(head + b"\r\n\r\n", payload)


def _record_type(capture: ArchivedCapture) -> str:
    """What the archive holds for `capture`: its record's type, or why it has none."""
    if capture.warc_file is None:
        return f"no record: {_no_record(capture)}"
    return "revisit" if capture.unchanged else "response"


def _no_record(capture: ArchivedCapture) -> str:
    """Why a capture has no record to show."""
    if capture.truncated == NOT_DOWNLOADED:
        return "body not downloaded (not an HTML page; --fetch-non-html downloads every type)"
    return capture.error or "no response"


def capture_lines(captures: list[ArchivedCapture]) -> list[str]:
    """One line per capture, columns aligned: time (UTC), status, content type, size, WARC file:offset,
    record type (or the error of a fetch that got no response)."""
    rows = [
        (
            iso_time(capture.fetched_at),
            "-" if capture.status is None else str(capture.status),
            capture.content_type or "-",
            f"{capture.size:,}",
            "-" if capture.warc_file is None else f"{capture.warc_file}:{capture.warc_offset}",
            _record_type(capture),
        )
        for capture in captures
    ]
    w = [max(len(row[column]) for row in rows) for column in range(5)]
    return [
        f"{at:{w[0]}}  {status:>{w[1]}}  {mime:{w[2]}}  {size:>{w[3]}}  {where:{w[4]}}  {kind}"
        for at, status, mime, size, where, kind in rows
    ]
