"""What `webtrawl show DIR URL` reads: every capture of one URL, and the archived HTTP response of one of
them, so that looking at what the crawl got needs no WARC tool.

The response comes from the same record the dashboard's archived copy comes from, but kept as received: the
status line and headers as archived, then the payload still in its Content-Encoding (`decoded` undoes it on
request). So the record's block is read with `replay.read_block`, short of `replay.read_response`, which
always undoes the encoding. The archive never holds chunk
framing: the client removes it before the body is archived, and the writer renames Transfer-Encoding (see
`store.warc._header_lines`), so undoing the Content-Encoding is all that decoding takes.

A revisit record (an unchanged re-fetch) holds no payload: such a capture is shown through the capture
whose content it repeats (`replay.original_of`), as the dashboard shows it. A crawl is read as its sources
(`store.shards.Source`: a distributed crawl's shards, each with its WARC files): a URL's captures, and the
one a revisit repeats, may be in any of them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import StoreError
from ..models import NOT_DOWNLOADED, State
from ..parse.decode import decompress
from ..urls import fingerprint
from .export import iso_time
from .replay import (
    BODY_LIMIT,
    WARC_DIR,
    ArchivedCapture,
    Found,
    captures_of_url,
    original_in,
    read_block,
    record_path,
)
from .shards import Source


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


def captures_of(sources: Sequence[Source], url: str) -> list[Found]:
    """Every capture of normalized `url` in any of `sources`, oldest first. With none, StoreError says so and
    what the crawl knows of the URL: its state in the frontier, or why it was dropped."""
    found = sorted(
        (
            Found(capture, source)
            for source in sources
            for capture in captures_of_url(source.conn, source.crawl_id, url)
        ),
        key=lambda f: (f.capture.fetched_at, f.source.number, f.capture.id),
    )
    if not found:
        known = next(
            (said for source in sources if (said := _known(source.conn, source.crawl_id, fingerprint(url), url))),
            "the crawl never found it",
        )
        raise StoreError(f"no capture of {url} in this crawl ({known})")
    return found


def _known(conn: sqlite3.Connection, crawl_id: int, fp: int, url: str) -> str | None:
    queued = conn.execute(
        "SELECT state, reason FROM urls WHERE crawl_id = ? AND fp = ? AND url = ?", (crawl_id, fp, url)
    ).fetchone()
    if queued is not None:
        state = State(queued[0]).name.lower()
        return f"the frontier has it as {state}" + (f": {queued[1]}" if queued[1] else "")
    dropped = conn.execute(
        "SELECT reason FROM dropped WHERE crawl_id = ? AND fp = ? AND url = ?", (crawl_id, fp, url)
    ).fetchone()
    return f"dropped: {dropped[0]}" if dropped is not None else None


def latest_archived(sources: Sequence[Source], found: list[Found]) -> tuple[Found, Found]:
    """The latest of `found` (oldest first) that has a record, and the capture whose response record holds
    its content: itself, or for an unchanged capture the one it repeats (in whichever source holds it)."""
    shown = next((f for f in reversed(found) if f.capture.warc_file is not None), None)
    if shown is None:
        last = found[-1].capture
        raise StoreError(
            f"no capture of {last.url} has an archived record: {len(found)} fetch(es), "
            f"the last at {iso_time(last.fetched_at)}: {_no_record(last)}"
        )
    if not shown.capture.unchanged:
        return shown, shown
    original = original_in(sources, shown)
    if original is None:
        raise StoreError(
            f"the latest capture of {shown.capture.url} ({iso_time(shown.capture.fetched_at)}) is a revisit "
            "record, and this crawl has no earlier full capture whose payload it repeats"
        )
    return shown, original


def read_message(found: Found) -> ArchivedMessage:
    """The response record of `found` (not a revisit), in its source's directory; StoreError says which file
    is missing, or what is wrong with the record."""
    capture, directory = found.capture, found.source.directory
    name = capture.warc_file or ""
    path = record_path(directory, name)
    if path is None:
        elsewhere = f" (node {capture.node} fetched it: the file is in that node's directory)" if capture.node else ""
        raise StoreError(f"the WARC file {name} is missing from {directory / WARC_DIR}{elsewhere}")
    block = read_block(path, capture.warc_offset or 0, capture.warc_length or 0, "response", capture.url)
    head, found_end, payload = block.partition(b"\r\n\r\n")
    if not found_end:
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
