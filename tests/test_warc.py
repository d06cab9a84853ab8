"""The WARC writer: records read back by warcio and FastWARC, rotation, and recovery after a crash."""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fastwarc.warc import ArchiveIterator as FastIterator
from fastwarc.warc import WarcRecordType
from warcio.archiveiterator import ArchiveIterator

from webtrawl.errors import StoreError
from webtrawl.models import FetchOutcome
from webtrawl.store.warc import WarcWriter

HTML = b"<!doctype html><title>caf\xc3\xa9</title><p>" + b"words " * 500
GZIPPED = gzip.compress(HTML)
REQUEST = [("Host", "example.com"), ("User-Agent", "webtrawl/test"), ("Accept-Encoding", "gzip, br")]


def outcome(url: str = "http://example.com/", **kw: object) -> FetchOutcome:
    fields: dict = {
        "started_at": 1_700_000_000.123456,
        "status": 200,
        "reason": "OK",
        "headers": [("Content-Type", "text/html; charset=utf-8")],
        "request_headers": REQUEST,
        "body": HTML,
        "ip": "127.0.0.1",
    }
    fields.update(kw)
    return FetchOutcome(url=url, **fields)


CASES = {
    "plain html": outcome(),
    "query kept in request line": outcome("http://example.com/a/b.html?x=1&y=%20", body=b"q"),
    "gzip-encoded body stays compressed": outcome(
        headers=[("Content-Type", "text/html"), ("Content-Encoding", "gzip")], body=GZIPPED
    ),
    "chunked header renamed": outcome(
        headers=[("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked")], body=b"not chunked"
    ),
    "truncated at the size limit": outcome(body=HTML[:100], truncated="length"),
    "404 without body or ip": outcome("http://example.com/missing", status=404, reason="Not Found", body=b"", ip=None),
    "redirect": outcome(status=301, reason="Moved Permanently", headers=[("Location", "/b")], body=b""),
    "empty reason phrase": outcome(status=204, reason="", headers=[], body=b""),
    "latin-1 header value": outcome(headers=[("X-Name", "Müller"), ("Content-Type", "text/html")]),
    "unicode request header": outcome(request_headers=[("Host", "example.com"), ("User-Agent", "bot ☃")]),
    "binary body with CRLFs": outcome(
        headers=[("Content-Type", "image/png")], body=bytes(range(256)) * 40 + b"\r\n\r\nWARC/1.1\r\n"
    ),
    "ipv6 address and port": outcome("http://[::1]:8080/x", ip="::1"),
    "http/1.0 response": outcome(http_version="1.0"),
    "a post a page's script sent, with its body": outcome(
        "http://example.com/api/graphql",
        method="POST",
        request_headers=[*REQUEST, ("Content-Type", "application/json")],
        request_body=b'{"query": "media", "id": 8}',
        headers=[("Content-Type", "application/json")],
        body=b'{"url": "/media/8.mp3"}',
    ),
}


def warc_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.warc.gz"))


def read_warcio(path: Path) -> list[dict]:
    """Every record as warcio sees it, digests checked (a mismatch raises)."""
    records = []
    with path.open("rb") as stream:
        for record in ArchiveIterator(stream, check_digests="raise"):
            records.append(
                {
                    "type": record.rec_type,
                    "warc": dict(record.rec_headers.headers),
                    "http": record.http_headers,
                    "raw": record.raw_stream.read(),
                }
            )
    return records


def read_fastwarc(path: Path) -> list[tuple[WarcRecordType, bytes]]:
    """Every record as FastWARC sees it, block and payload digests verified."""
    records = []
    with path.open("rb") as stream:
        for record in FastIterator(stream, parse_http=False):
            assert record.verify_block_digest(), record.record_id
            if record.record_type in (WarcRecordType.response, WarcRecordType.request):
                record.parse_http()
                assert record.verify_payload_digest(), record.record_id
            records.append((record.record_type, record.reader.read()))
    with path.open("rb") as stream:  # verify_digests drops records whose block digest fails
        assert len(list(FastIterator(stream, verify_digests=True))) == len(records)
    return records


def new_writer(directory: Path, committed: dict[str, int] | None = None, **kw: object) -> WarcWriter:
    options: dict = {"prefix": "crawl", "max_size": 1 << 30, "software": "webtrawl/test"}
    options.update(kw)
    return WarcWriter(directory, committed=committed or {}, **options)


def test_round_trip_through_warcio_and_fastwarc(tmp_path: Path) -> None:
    writer = new_writer(tmp_path)
    locations = [writer.write(case) for case in CASES.values()]
    ends = writer.flush()
    writer.close()

    [path] = warc_files(tmp_path)
    assert ends == {path.name: path.stat().st_size}
    records = read_warcio(path)
    assert [r["type"] for r in records] == ["warcinfo"] + ["response", "request"] * len(CASES)
    fast = read_fastwarc(path)
    assert len(fast) == len(records)

    for index, (name, case) in enumerate(CASES.items()):
        response, request = records[1 + 2 * index], records[2 + 2 * index]
        assert response["raw"] == case.body, name
        assert fast[1 + 2 * index] == (WarcRecordType.response, case.body), name
        assert response["http"].get_statuscode() == str(case.status), name
        assert response["http"].protocol == f"HTTP/{case.http_version}", name
        assert response["warc"]["WARC-Target-URI"] == case.url, name
        assert response["warc"]["WARC-Date"] == "2023-11-14T22:13:20.123456Z", name
        assert response["warc"].get("WARC-IP-Address") == case.ip, name
        assert response["warc"].get("WARC-Truncated") == case.truncated, name
        assert response["warc"]["WARC-Payload-Digest"] == locations[index].payload_digest, name
        assert request["warc"]["WARC-Concurrent-To"] == response["warc"]["WARC-Record-ID"], name
        target = re.sub(r"^https?://[^/]+", "", case.url) or "/"
        assert request["http"].protocol == case.method, name
        assert request["http"].statusline == f"{target} HTTP/1.1", name
        assert request["http"].headers == case.request_headers, name
        assert request["raw"] == case.request_body, name


@pytest.mark.parametrize("name", list(CASES))
def test_response_headers_as_received_except_transfer_encoding(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    writer = new_writer(tmp_path)
    writer.write(case)
    writer.close()
    response = read_warcio(warc_files(tmp_path)[0])[1]
    expected = [
        ("X-Webtrawl-Original-Transfer-Encoding" if key == "Transfer-Encoding" else key, value)
        for key, value in case.headers
    ]
    assert response["http"].headers == expected


def test_location_points_at_a_standalone_response_member(tmp_path: Path) -> None:
    writer = new_writer(tmp_path)
    writer.write(outcome("http://example.com/first"))
    location = writer.write(outcome("http://example.com/second", body=b"second body"))
    writer.close()

    data = (tmp_path / location.file).read_bytes()[location.offset : location.offset + location.length]
    text = gzip.decompress(data)  # exactly one gzip member: a reader can seek straight to it
    assert text.startswith(b"WARC/1.1\r\nWARC-Type: response\r\n")
    assert b"WARC-Target-URI: http://example.com/second\r\n" in text
    assert text.endswith(b"second body\r\n\r\n")


def test_gzip_encoded_body_is_stored_compressed_and_decodes_to_the_page(tmp_path: Path) -> None:
    writer = new_writer(tmp_path)
    writer.write(CASES["gzip-encoded body stays compressed"])
    writer.close()
    with warc_files(tmp_path)[0].open("rb") as stream:
        decoded = [r.content_stream().read() for r in ArchiveIterator(stream) if r.rec_type == "response"]
    assert decoded == [HTML]


def test_a_response_needs_a_status(tmp_path: Path) -> None:
    writer = new_writer(tmp_path)
    with pytest.raises(ValueError, match="no response"):
        writer.write(outcome(status=None, error="connection refused"))
    writer.close()
    assert warc_files(tmp_path) == []


def test_rotation_starts_each_file_with_warcinfo(tmp_path: Path) -> None:
    writer = new_writer(tmp_path, max_size=3000)
    locations = [writer.write(outcome(f"http://example.com/{n}", body=os.urandom(1500))) for n in range(5)]
    ends = writer.flush()
    writer.close()

    paths = warc_files(tmp_path)
    assert len(paths) >= 3
    assert [p.name for p in paths] == sorted({loc.file for loc in locations})
    assert ends == {p.name: p.stat().st_size for p in paths}, "closed files report their final end"
    serials = [int(p.name.removesuffix(".warc.gz").rsplit("-", 1)[1]) for p in paths]
    assert serials == list(range(1, len(paths) + 1))
    for path in paths:
        assert re.fullmatch(r"crawl-\d{14}-\d{5}\.warc\.gz", path.name)
        records = read_warcio(path)
        assert records[0]["type"] == "warcinfo"
        assert records[0]["warc"]["WARC-Filename"] == path.name
        assert b"software: webtrawl/test\r\n" in records[0]["raw"]
        assert b"isPartOf: crawl\r\n" in records[0]["raw"]
        read_fastwarc(path)


def test_flush_reports_only_files_written_since_the_last_flush(tmp_path: Path) -> None:
    writer = new_writer(tmp_path)
    assert writer.flush() == {}
    location = writer.write(outcome())
    first = writer.flush()
    assert first == {location.file: (tmp_path / location.file).stat().st_size}
    assert writer.flush() == {}
    writer.close()


def test_recovery_cuts_uncommitted_bytes_and_keeps_others_files(tmp_path: Path, caplog) -> None:
    writer = new_writer(tmp_path, max_size=5000)
    writer.write(outcome("http://example.com/kept", body=os.urandom(3000)))
    committed = writer.flush()
    writer.write(outcome("http://example.com/lost-tail", body=os.urandom(3000)))  # flushed, never committed
    writer.write(outcome("http://example.com/lost-file"))  # the first file is full: a new one
    writer.flush()
    writer.close()
    [kept, lost] = warc_files(tmp_path)
    others = {
        "crawl-b-20240101000000-00001.warc.gz": b"another crawl whose name starts the same",
        "other-20240101000000-00001.warc.gz": b"another prefix",
        "crawl-notes.txt": b"not an archive",
    }
    for name, data in others.items():
        (tmp_path / name).write_bytes(data)

    with caplog.at_level(logging.WARNING, logger="webtrawl.store.warc"):
        writer = new_writer(tmp_path, committed, max_size=5000)
    assert f"cut {kept.name}" in caplog.text and f"deleted {lost.name}" in caplog.text
    assert not lost.exists()
    assert kept.stat().st_size == committed[kept.name]
    for name, data in others.items():
        assert (tmp_path / name).read_bytes() == data

    location = writer.write(outcome("http://example.com/after"))
    ends = writer.flush()
    writer.close()
    assert location.file == kept.name and location.offset == committed[kept.name]
    assert ends == {kept.name: kept.stat().st_size}
    uris = [r["warc"].get("WARC-Target-URI") for r in read_warcio(kept) if r["type"] == "response"]
    assert uris == ["http://example.com/kept", "http://example.com/after"]
    read_fastwarc(kept)


def test_records_appended_after_recovery_name_the_files_warcinfo(tmp_path: Path) -> None:
    writer = new_writer(tmp_path)
    writer.write(outcome("http://example.com/before"))
    committed = writer.flush()
    writer.close()

    writer = new_writer(tmp_path, committed)
    writer.write(outcome("http://example.com/after"))
    writer.close()
    [path] = warc_files(tmp_path)
    [info, *records] = read_warcio(path)
    assert info["type"] == "warcinfo"
    assert [r["warc"].get("WARC-Target-URI") for r in records if r["type"] == "response"] == [
        "http://example.com/before",
        "http://example.com/after",
    ]
    assert {r["warc"]["WARC-Warcinfo-ID"] for r in records} == {info["warc"]["WARC-Record-ID"]}


def test_recovery_opens_a_new_file_when_the_newest_is_full(tmp_path: Path) -> None:
    writer = new_writer(tmp_path, max_size=100)
    first = writer.write(outcome())
    committed = writer.flush()
    writer.close()

    writer = new_writer(tmp_path, committed, max_size=100)
    second = writer.write(outcome())
    writer.close()
    assert second.file != first.file and second.file.endswith("-00002.warc.gz")
    assert (tmp_path / first.file).stat().st_size == committed[first.file]


def test_recovery_never_appends_to_a_file_shorter_than_committed(tmp_path: Path, caplog) -> None:
    writer = new_writer(tmp_path)
    first = writer.write(outcome())
    committed = writer.flush()
    writer.close()
    committed = {first.file: committed[first.file] + 100}  # as if the OS lost the tail in a power cut

    with caplog.at_level(logging.ERROR, logger="webtrawl.store.warc"):
        writer = new_writer(tmp_path, committed)
    assert "were committed" in caplog.text
    second = writer.write(outcome())
    writer.close()
    assert second.file != first.file
    for path in warc_files(tmp_path):
        read_fastwarc(path)


def test_an_unwritable_directory_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(StoreError, match="cannot prepare the archive"):
        new_writer(tmp_path / "file" / "warc")


CRASH_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from webtrawl.models import FetchOutcome
    from webtrawl.store.warc import WarcWriter

    directory, ledger = Path(sys.argv[1]), Path(sys.argv[2])
    writer = WarcWriter(directory, prefix="crawl", max_size=int(sys.argv[3]), software="t", committed={})
    committed = {}
    for n in range(6):
        page = FetchOutcome(url=f"http://example.com/{n}", started_at=0.0, status=200, body=b"x" * 3000)
        writer.write(page)
        committed.update(writer.flush())
        ledger.write_text(json.dumps(committed))  # stands in for the SQLite commit
    """
)


@pytest.mark.parametrize(
    ("crash_at", "max_size", "pages_kept"),
    [("warc-mid-record:3", 1 << 30, 2), ("warc-mid-record", 1 << 30, 0), ("warc-rotation:3", 1, 2)],
)
def test_a_killed_writer_leaves_nothing_uncommitted_after_recovery(
    tmp_path: Path, crash_at: str, max_size: int, pages_kept: int
) -> None:
    ledger = tmp_path / "committed.json"
    ledger.write_text("{}")
    run = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(tmp_path / "warc"), str(ledger), str(max_size)],
        env={**os.environ, "WEBTRAWL_CRASH_AT": crash_at},
        capture_output=True,
    )
    assert run.returncode == -signal.SIGKILL, run.stderr.decode()

    writer = new_writer(tmp_path / "warc", json.loads(ledger.read_text()), max_size=max_size)
    writer.write(outcome("http://example.com/after"))
    writer.close()
    uris = [
        record["warc"]["WARC-Target-URI"]
        for path in warc_files(tmp_path / "warc")
        for record in read_warcio(path)
        if record["type"] == "response"
    ]
    assert uris == [f"http://example.com/{n}" for n in range(pages_kept)] + ["http://example.com/after"]
    for path in warc_files(tmp_path / "warc"):
        read_fastwarc(path)
