"""The archive: fetch outcomes appended to rotating `.warc.gz` files (WARC/1.1, one gzip member per record).

Records are built here rather than through warcio's WARCWriter, which needs about twice the CPU for the
same 20 KB page at the same compression level; the format is small (a header block, the HTTP message, two
CRLFs), and the tests read every file back with both warcio and FastWARC, digests checked.

Crash safety follows the commit order: `write` appends, `flush` pushes the bytes to the OS and reports
each file's end, the caller records those ends in the same SQLite transaction as the capture rows, and
a writer opened on the directory again cuts every file back to its committed end first. So a record
exists in the archive exactly when its row exists in the database. Bytes are not fsynced: a machine
(not process) crash can lose the tail the OS had not written; the writer then logs which file is short.

Runs on the archive thread: every method blocks.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from isal import isal_zlib
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from .. import faults
from ..errors import StoreError
from ..models import FetchOutcome, Previous, WarcLocation

log = logging.getLogger(__name__)

COMPRESS_LEVEL = 1
"""Deflate level per record. Compression is most of what `write` costs, so speed wins: ISA-L's level 1
(python-isal, output readable by any gzip reader) compresses a 20 KB page in ~80 µs against ~275 µs for
zlib's level 1, into a slightly smaller member; zlib's level 6 would be ~11% smaller at ~1.8x zlib-1's CPU."""

_BUFFER = 1 << 18
_SUFFIX = ".warc.gz"
_EMPTY_DIGEST = "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"
_TE_RENAMED = "X-Webtrawl-Original-Transfer-Encoding"
_B32_PAIRS = [a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"]
_B32_SHIFTS = tuple(range(150, -1, -10))


def sha1_digest(*parts: bytes) -> str:
    """SHA-1 in base32, the form warcio writes and every WARC reader checks.

    A SHA-1 is 160 bits, exactly 32 base32 digits: read 10 bits (two digits) at a time from one integer,
    twice as fast as `base64.b32encode`, and this runs three times a page.
    """
    h = hashlib.sha1()
    for part in parts:
        h.update(part)
    n = int.from_bytes(h.digest())
    return "sha1:" + "".join([_B32_PAIRS[(n >> shift) & 1023] for shift in _B32_SHIFTS])


def _warc_date(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def _encode_head(lines: list[str]) -> bytes:
    """An HTTP header block in latin-1, as the values were decoded; a line latin-1 cannot hold goes as UTF-8.

    (A request header set by the user, such as a User-Agent with a non-latin-1 character, is sent as UTF-8.)
    """
    try:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError:
        codecs = ["utf-8" if max(line, default="") > "\xff" else "latin-1" for line in lines]
        encoded = [line.encode(codec, "surrogateescape") for line, codec in zip(lines, codecs, strict=True)]
        return b"\r\n".join(encoded) + b"\r\n\r\n"


def _header_lines(headers: list[tuple[str, str]]) -> list[str]:
    """Header lines as received, except Transfer-Encoding, renamed because the body was already de-chunked.

    The HTTP client removes the chunk framing before the body reaches us, so keeping
    `Transfer-Encoding: chunked` would make readers try to de-chunk bytes that are not chunked. Under its
    new name the header still says how the body travelled. Content-Encoding is kept: the body is stored
    compressed, exactly as the server sent it.
    """
    return [f"{_TE_RENAMED if name.lower() == 'transfer-encoding' else name}: {value}" for name, value in headers]


def _request_target(url: str) -> str:
    """The origin-form target of a request line: path and query, without the fragment."""
    start = url.find("//")
    start = start + 2 if start >= 0 else 0
    cut = len(url)
    for mark in "/?#":
        found = url.find(mark, start)
        if 0 <= found < cut:
            cut = found
    target = url[cut:].partition("#")[0]
    if not target.startswith("/"):
        target = "/" + target
    return target


def _record(warc_lines: list[str], block: tuple[bytes, ...]) -> bytes:
    """One WARC record compressed into its own gzip member."""
    length = sum(len(part) for part in block)
    head = ("WARC/1.1\r\n" + "\r\n".join(warc_lines) + f"\r\nContent-Length: {length}\r\n\r\n").encode()
    gz = isal_zlib.compressobj(COMPRESS_LEVEL, isal_zlib.DEFLATED, 31)
    out = [gz.compress(head)]
    out.extend(gz.compress(part) for part in block)
    out.append(gz.compress(b"\r\n\r\n"))
    out.append(gz.flush())
    return b"".join(out)


NOT_DOWNLOADED_FIELD = "body-not-downloaded: not an HTML page (--fetch-non-html downloads every type)"
"""The first field of the metadata record of a response whose body was not downloaded."""


def kept_as_metadata(outcome: FetchOutcome) -> bool:
    """Whether `outcome` is archived as a metadata record, with no copy to replay: a successful response
    whose body was not downloaded (a skipped redirect's or error page's body leaves a response record, cut,
    whose status and headers still replay)."""
    return outcome.body_skipped and outcome.status is not None and 200 <= outcome.status < 300


def _response(outcome: FetchOutcome, revisit: Previous | None, lines: list[str], head: bytes) -> tuple[bytes, str]:
    """The response record of `outcome` (its status line and headers in `head`), or with `revisit` its
    revisit record, and the payload digest."""
    body = outcome.body
    if revisit is None:
        payload_digest = sha1_digest(body)
        lines = ["WARC-Type: response", *lines]
        if outcome.truncated or outcome.body_skipped:
            # A skipped body of a redirect or an error page: its status and headers still replay.
            lines.append(f"WARC-Truncated: {outcome.truncated or 'unspecified'}")
    else:
        payload_digest, body = revisit.digest or sha1_digest(body), b""
        profile = "server-not-modified" if outcome.status == 304 else "identical-payload-digest"
        lines = ["WARC-Type: revisit", *lines]
        lines += [
            f"WARC-Profile: http://netpreserve.org/warc/1.1/revisit/{profile}",
            f"WARC-Refers-To-Target-URI: {outcome.url}",
            f"WARC-Refers-To-Date: {_warc_date(revisit.fetched_at)}",
        ]
    lines += [f"WARC-Payload-Digest: {payload_digest}", f"WARC-Block-Digest: {sha1_digest(head, body)}"]
    return _record([*lines, "Content-Type: application/http; msgtype=response"], (head, body)), payload_digest


def _not_downloaded(outcome: FetchOutcome, lines: list[str], status_line: str) -> tuple[bytes, str]:
    """The record of a successful response whose body was not downloaded, and its block digest.

    Not a response record: a replay tool would serve its empty body as the file, and an index would list
    it as a capture. A metadata record (WARC 1.1 §6.8) of `application/warc-fields` says what was received
    instead (the status line and headers, one `http-header` field each) and that the body was skipped;
    indexers (pywb's, cdxj-indexer) leave such records out, so replay says the URL was not archived.
    """
    fields = [NOT_DOWNLOADED_FIELD, f"http-status-line: {status_line}"]
    fields += [f"http-header: {line}" for line in _header_lines(outcome.headers)]
    block = ("\r\n".join(fields) + "\r\n").encode("utf-8", "replace")
    digest = sha1_digest(block)
    lines = ["WARC-Type: metadata", *lines, f"WARC-Block-Digest: {digest}", "Content-Type: application/warc-fields"]
    return _record(lines, (block,)), digest


class WarcWriter:
    """Appends response and request records for fetch outcomes to `{prefix}-{UTC time}-{serial}.warc.gz`.

    Files belong to this writer when their whole name matches that pattern for its prefix, so crawls
    whose names share a beginning (`a`, `a-b`) never touch each other's files. A new file is opened on
    the first `write` after the current one reached `max_size` (or when there is none), never earlier:
    a resumed crawl that writes nothing creates nothing.
    """

    def __init__(
        self,
        directory: Path,
        *,
        prefix: str,
        max_size: int,
        software: str,
        committed: Mapping[str, int],
        family: str | None = None,
    ) -> None:
        """`family`: a regex of the prefixes of earlier writers in this directory whose files are recovered
        too (the nodes of one distributed crawl: a node restarted in its directory gets a new id)."""
        self._dir = Path(directory)
        self._prefix = prefix
        self._max_size = max_size
        self._software = software
        self._pattern = re.compile(re.escape(prefix) + r"-\d{14}-(\d{5,})" + re.escape(_SUFFIX))
        self._family = re.compile((family or re.escape(prefix)) + r"-\d{14}-(\d{5,})" + re.escape(_SUFFIX))
        self._file: BinaryIO | None = None
        self._name = ""
        self._size = 0
        self._serial = 0
        self._warcinfo_id = ""
        self._written: dict[str, int] = {}
        self._ends: list[int] = []
        """The end of every record appended to the current file since its last flush, and that flush's end
        first: where a write that failed may cut the file back to (`_keep_whole_records`)."""
        self._failed: str | None = None
        self.last_record_id = ""
        """The WARC-Record-ID of the last response (or revisit) record written: what records of its page name."""
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            self._recover(committed)
        except OSError as exc:
            raise StoreError(f"cannot prepare the archive in {self._dir}: {exc}") from exc

    def _recover(self, committed: Mapping[str, int]) -> None:
        """Cut every file of ours back to its committed end; delete the ones nothing was committed to."""
        family = {name: end for name, end in committed.items() if self._family.fullmatch(name)}
        for path in sorted(self._dir.iterdir()):
            if not self._family.fullmatch(path.name):
                continue
            size = path.stat().st_size
            end = family.get(path.name)
            if end is None:
                path.unlink()
                log.warning("deleted %s (%d bytes): no record in it was committed", path.name, size)
            elif size > end:
                os.truncate(path, end)
                log.warning("cut %s from %d to %d bytes: its tail was never committed", path.name, size, end)
            elif size < end:
                log.error(
                    "%s is %d bytes but %d were committed: records past byte %d are lost (machine crash?)",
                    path.name, size, end, size,
                )  # fmt: skip
        ours = {name: end for name, end in family.items() if self._pattern.fullmatch(name)}
        if not ours:
            return
        newest = max(ours, key=lambda name: int(self._pattern.fullmatch(name)[1]))  # type: ignore[index]
        self._serial = int(self._pattern.fullmatch(newest)[1])  # type: ignore[index]
        path = self._dir / newest
        if path.exists() and path.stat().st_size == ours[newest] < self._max_size:
            self._file = open(path, "ab", buffering=_BUFFER)  # noqa: SIM115 - lives as long as the writer
            self._name, self._size, self._ends = newest, ours[newest], [ours[newest]]
            self._warcinfo_id = _first_record_id(path)

    def write(self, outcome: FetchOutcome, revisit: Previous | None = None, page_id: str = "") -> WarcLocation:
        """Append the response record and its request record; return where the response record is (for a
        successful response whose body was not downloaded, a metadata record: see `_not_downloaded`).

        The response block is the status line, the headers as received (see `_header_lines`) and the
        body as received; WARC-Truncated says why when it was cut. The request line is rebuilt from the
        URL (the client does not expose the bytes it sent) followed by the request headers it sent.

        With `revisit` (a re-fetch that brought nothing new) the response is a revisit record instead:
        status line and headers only, referring to the earlier capture — profile "server-not-modified" for
        a 304, "identical-payload-digest" for a body equal to the one archived before.

        `page_id`: the response record of the rendered page that made this request (`WARC-Page-ID`).
        """
        if outcome.status is None:
            raise ValueError(f"no response to archive for {outcome.url}")
        if self._failed is not None:
            raise StoreError(self._failed)
        try:
            if self._file is None or self._size >= self._max_size:
                self._rotate()
            return self._append(outcome, revisit, page_id)
        except OSError as exc:
            raise self._failure(exc) from exc

    def _failure(self, exc: OSError) -> StoreError:
        """The error a failed write ends this writer with, once the current file is left holding whole records."""
        self._failed = self._write_error(exc)
        self._keep_whole_records()
        return StoreError(self._failed)

    def _keep_whole_records(self) -> None:
        """Cut the current file back to the end of its last record that reached the file whole, and drop the
        bytes still buffered for it.

        A full disk stops a write mid-record; the file must stay valid for every reader (gzip, warcio, an
        indexer) even if no crawl ever runs again in this directory to cut it back to its committed end, as a
        node on a machine that is not coming back never does. Records that were only buffered are lost, but
        none of them was committed: their URLs are fetched again.
        """
        file, self._file = self._file, None
        if file is None:
            return
        path = self._dir / self._name
        try:
            if not file.closed:  # the buffered bytes left go to /dev/null when the file object closes
                null = os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(null, file.fileno())
                finally:
                    os.close(null)
                file.close()
            size = path.stat().st_size
            whole = max((end for end in self._ends if end <= size), default=size)
            if whole:
                os.truncate(path, whole)
            else:  # not even its warcinfo record: nothing in it was committed
                path.unlink()
            self._written.pop(self._name, None)
            if whole < size:
                log.warning("cut %s from %d to %d bytes: the write that failed left a record unfinished",
                            self._name, size, whole)  # fmt: skip
        except OSError as exc:
            log.error("could not cut %s back to its last whole record: %s", self._name, exc)

    def _write_error(self, exc: OSError) -> str:
        if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            return (
                f"the disk holding {self._dir} is full ({exc.strerror}); "
                "free some space and run the same command again to resume"
            )
        return f"cannot write the archive file {self._name}: {exc}"

    def write_resource(self, uri: str, content_type: str, body: bytes, page_id: str, when: float) -> WarcLocation:
        """Append a resource record made by webtrawl for a rendered page (its DOM, its thumbnail)."""
        if self._failed is not None:
            raise StoreError(self._failed)
        try:
            if self._file is None or self._size >= self._max_size:
                self._rotate()
            digest = sha1_digest(body)
            lines = ["WARC-Type: resource", f"WARC-Record-ID: {_record_id()}", f"WARC-Date: {_warc_date(when)}"]
            lines += [f"WARC-Target-URI: {uri}", f"WARC-Concurrent-To: {page_id}"]
            if self._warcinfo_id:
                lines.append(f"WARC-Warcinfo-ID: {self._warcinfo_id}")
            lines += [f"WARC-Payload-Digest: {digest}", f"WARC-Block-Digest: {digest}", f"Content-Type: {content_type}"]
            record = _record(lines, (body,))
            offset = self._size
            assert self._file is not None
            self._file.write(record)
            self._size += len(record)
            self._written[self._name] = self._size
            self._ends.append(self._size)
            return WarcLocation(file=self._name, offset=offset, length=len(record), payload_digest=digest)
        except OSError as exc:
            raise self._failure(exc) from exc

    def _append(self, outcome: FetchOutcome, revisit: Previous | None, page_id: str) -> WarcLocation:
        assert self._file is not None
        shared = [
            f"WARC-Date: {_warc_date(outcome.started_at)}",
            f"WARC-Target-URI: {outcome.url}",
        ]
        if self._warcinfo_id:
            shared.append(f"WARC-Warcinfo-ID: {self._warcinfo_id}")
        if outcome.ip:
            shared.append(f"WARC-IP-Address: {outcome.ip}")
        if page_id:
            shared.append(f"WARC-Page-ID: {page_id}")
        response_id = _record_id()
        status_line = f"HTTP/{outcome.http_version} {outcome.status} {outcome.reason}"
        head = _encode_head([status_line, *_header_lines(outcome.headers)])
        record = [f"WARC-Record-ID: {response_id}", *shared]
        if kept_as_metadata(outcome):
            response, payload_digest = _not_downloaded(outcome, record, status_line)
        else:
            response, payload_digest = _response(outcome, revisit, record, head)

        request_line = f"{outcome.method} {_request_target(outcome.url)} HTTP/1.1"
        head = _encode_head([request_line, *_header_lines(outcome.request_headers)])
        sent = outcome.request_body  # a POST's body: what replays (pywb) match the request by
        lines = ["WARC-Type: request", f"WARC-Record-ID: {_record_id()}", *shared]
        payload = sha1_digest(sent) if sent else _EMPTY_DIGEST
        lines += [f"WARC-Concurrent-To: {response_id}", f"WARC-Payload-Digest: {payload}"]
        lines += [f"WARC-Block-Digest: {sha1_digest(head + sent)}", "Content-Type: application/http; msgtype=request"]
        request = _record(lines, (head, sent) if sent else (head,))

        offset = self._size
        if faults.armed("warc-mid-record"):  # leave half a record behind, as a kill mid-write would
            self._file.write(response[: len(response) // 2])
            self._file.flush()
            faults.crash_point("warc-mid-record")
            self._file.write(response[len(response) // 2 :])
        else:
            self._file.write(response)
        self._file.write(request)
        self._size += len(response) + len(request)
        self._written[self._name] = self._size
        self._ends.append(self._size)
        length = len(response)
        self.last_record_id = response_id
        return WarcLocation(file=self._name, offset=offset, length=length, payload_digest=payload_digest)

    def _rotate(self) -> None:
        """Close the current file and start the next one with its warcinfo record (flushed at once)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._serial += 1
        name = f"{self._prefix}-{datetime.now(UTC):%Y%m%d%H%M%S}-{self._serial:05d}{_SUFFIX}"
        self._name, self._size, self._ends = name, 0, [0]
        self._file = open(self._dir / name, "xb", buffering=_BUFFER)  # noqa: SIM115 - lives as long as the writer
        self._warcinfo_id = _record_id()
        info = (
            f"software: {self._software}\r\n"
            "format: WARC File Format 1.1\r\n"
            f"hostname: {socket.gethostname()}\r\n"
            f"isPartOf: {self._prefix}\r\n"
        ).encode()
        lines = [
            "WARC-Type: warcinfo",
            f"WARC-Record-ID: {self._warcinfo_id}",
            f"WARC-Date: {_warc_date(time.time())}",
            f"WARC-Filename: {name}",
            f"WARC-Block-Digest: {sha1_digest(info)}",
            "Content-Type: application/warc-fields",
        ]
        record = _record(lines, (info,))
        self._file.write(record)
        self._file.flush()
        self._size = len(record)
        self._written[name] = self._size
        self._ends = [self._size]
        log.info("writing %s", name)
        faults.crash_point("warc-rotation")

    def flush(self) -> dict[str, int]:
        """Hand the bytes to the OS (no fsync); return the end of every file written since the last flush."""
        if self._failed is not None:
            raise StoreError(self._failed)
        if self._file is not None:
            try:
                self._file.flush()
            except OSError as exc:
                raise self._failure(exc) from exc
            self._ends = [self._size]
        written, self._written = self._written, {}
        return written

    def close(self) -> None:
        """Close the current file; bytes written after the last `flush` count as uncommitted."""
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as exc:
                log.warning("closing %s: %s", self._name, exc)


def _first_record_id(path: Path) -> str:
    """The record id of a file's first record, its warcinfo: records appended to the file later refer to it."""
    try:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream):
                return record.rec_headers.get_header("WARC-Record-ID") or ""
    except ArchiveLoadFailed as exc:
        log.warning("%s does not start with a readable record (%s): records appended to it name no warcinfo",
                    path.name, exc)  # fmt: skip
    return ""
