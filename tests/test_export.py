"""`webtrawl export`: JSONL, CSV and CDXJ from a crawl database filled with SQL."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest

from webtrawl.errors import StoreError
from webtrawl.store.db import connect
from webtrawl.store.export import FIELDS, export
from webtrawl.store.shards import source_of
from webtrawl.urls import fingerprint, surt

T0 = 1_714_564_800.0  # 2024-05-01T12:00:00Z
E = "http://example.com"

# (url, seconds after T0, columns); every capture of the crawl "site", in capture-id order.
CAPTURES: list[tuple[str, float, dict]] = [
    (f"{E}/", 0, {"title": 'Home, "quoted"\nsecond line', "size": 1200}),
    (f"{E}/old", 1, {"status": 301, "location": f"{E}/new"}),
    (f"{E}/new", 2, {"status": 302, "location": f"{E}/final"}),
    (f"{E}/final", 3, {"redirects": json.dumps([f"{E}/old", f"{E}/new"]), "title": "Ünïcode ☃"}),
    (f"{E}/loop-a", 4, {"status": 301, "location": f"{E}/loop-b"}),
    (f"{E}/loop-b", 5, {"status": 301, "location": f"{E}/loop-a"}),
    (f"{E}/away", 6, {"status": 302, "location": "http://other.org/x"}),
    (f"{E}/down", 7, {"status": None, "error": "connection refused", "warc_file": None}),
    (f"{E}/cut", 8, {"truncated": "length", "size": 10_485_760, "content_type": "video/mp4"}),
    ("http://www.example.com/b?z=1&a=2", 9, {}),
    (f"{E}/", 3600, {"title": "Home again"}),
    (f"{E}/moved", 10, {"status": 301, "location": f"{E}/was-moved"}),
    (f"{E}/was-moved", 11, {"status": 301, "location": f"{E}/elsewhere"}),
    (f"{E}/was-moved", 12, {}),  # its latest capture is no longer a redirect
    *[(f"{E}/hop{n}", 20 + n, {"status": 307, "location": f"{E}/hop{n + 1}"}) for n in range(15)],
]
DEPTHS = {f"{E}/": 0, f"{E}/old": 1, f"{E}/final": 2, "http://www.example.com/b?z=1&a=2": 3}


def insert_capture(conn: sqlite3.Connection, crawl_id: int, url: str, fetched_at: float, **columns) -> None:
    row = {
        "crawl_id": crawl_id, "fp": fingerprint(url), "url": url, "fetched_at": fetched_at, "status": 200,
        "content_type": "text/html", "size": 100, "warc_file": "site-20240501120000-00001.warc.gz",
        "payload_digest": "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ",
    }  # fmt: skip
    row.update(columns)
    if row["warc_file"] is not None:
        row.setdefault("warc_offset", int(fetched_at - T0) * 10)
        row.setdefault("warc_length", 500)
    names = ", ".join(row)
    conn.execute(f"INSERT INTO captures({names}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    conn = connect(tmp_path / "crawl.db")
    for crawl_id, name in ((1, "site"), (2, "other")):
        conn.execute("INSERT INTO crawls(id, name, identity, created_at) VALUES (?, ?, '{}', ?)", (crawl_id, name, T0))
        conn.execute("INSERT INTO hosts(id, crawl_id, host) VALUES (?, ?, 'example.com')", (crawl_id, crawl_id))
    for url, depth in DEPTHS.items():
        conn.execute(
            "INSERT INTO urls(crawl_id, fp, url, host_id, depth, kind, state, added_seq, discovered_at, "
            "updated_at) VALUES (1, ?, ?, 1, ?, 'link', 2, ?, ?, ?)",
            (fingerprint(url), url, depth, depth, T0, T0),
        )
    for url, offset, columns in CAPTURES:
        insert_capture(conn, 1, url, T0 + offset, **columns)
    insert_capture(conn, 2, f"{E}/other-crawl", T0)
    return conn


def run(conn: sqlite3.Connection, fmt: str, crawl: str = "site") -> tuple[int, str]:
    out = io.StringIO()
    count = export([source_of(conn, crawl)], fmt, out)  # type: ignore[arg-type]
    return count, out.getvalue()


def jsonl_rows(conn: sqlite3.Connection) -> list[dict]:
    count, text = run(conn, "jsonl")
    rows = [json.loads(line) for line in text.splitlines()]
    assert count == len(rows) == len(CAPTURES)
    return rows


FINAL_URLS = {
    f"{E}/": f"{E}/",
    f"{E}/old": f"{E}/final",  # two hops
    f"{E}/new": f"{E}/final",
    f"{E}/loop-a": f"{E}/loop-a",  # the loop closes back at the start
    f"{E}/loop-b": f"{E}/loop-b",
    f"{E}/away": "http://other.org/x",  # never fetched: the chain ends at the last known target
    f"{E}/down": f"{E}/down",
    f"{E}/moved": f"{E}/was-moved",  # the target's latest capture is a page, not its older redirect
    f"{E}/hop0": f"{E}/hop10",  # at most ten hops
    f"{E}/hop9": f"{E}/hop15",
}


@pytest.mark.parametrize(("url", "final"), FINAL_URLS.items())
def test_final_url_follows_redirects_through_latest_captures(conn, url: str, final: str) -> None:
    assert {row["url"]: row["final_url"] for row in jsonl_rows(conn)}[url] == final


def test_jsonl_rows_in_capture_order_with_every_field(conn) -> None:
    rows = jsonl_rows(conn)
    assert [row["url"] for row in rows] == [url for url, _, _ in CAPTURES]
    assert all(list(row) == list(FIELDS) for row in rows)
    home, old, _, final = rows[:4]
    assert home["title"] == 'Home, "quoted"\nsecond line'
    assert home["fetched_at"] == "2024-05-01T12:00:00Z"
    assert rows[10]["fetched_at"] == "2024-05-01T13:00:00Z"
    assert (home["depth"], old["depth"], rows[4]["depth"]) == (0, 1, None)
    assert final["redirects"] == [f"{E}/old", f"{E}/new"] and home["redirects"] == []
    assert final["title"] == "Ünïcode ☃"
    assert home["warc_offset"] == 0 and home["warc_length"] == 500
    assert home["payload_digest"] == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"
    down = rows[7]
    assert (down["status"], down["error"], down["warc_file"]) == (None, "connection refused", None)
    assert rows[8]["truncated"] == "length" and home["truncated"] is None


def test_csv_round_trips_through_dictreader(conn) -> None:
    count, text = run(conn, "csv")
    reader = csv.DictReader(io.StringIO(text))
    rows = list(reader)
    assert tuple(reader.fieldnames or ()) == FIELDS
    assert count == len(rows) == len(CAPTURES)
    for row, expected in zip(rows, jsonl_rows(conn), strict=True):
        as_text = {
            key: " ".join(value) if key == "redirects" else "" if value is None else str(value)
            for key, value in expected.items()
        }
        assert row == as_text
    assert rows[0]["title"] == 'Home, "quoted"\nsecond line'
    assert rows[3]["redirects"] == f"{E}/old {E}/new"


def test_cdxj_lines_sorted_by_surt_then_time(conn) -> None:
    count, text = run(conn, "cdxj")
    lines = text.splitlines()
    assert count == len(lines) == sum(1 for _, _, cols in CAPTURES if cols.get("warc_file", "") is not None)
    parsed = [(key, stamp, json.loads(block)) for key, stamp, block in (line.split(" ", 2) for line in lines)]
    assert [(key, stamp) for key, stamp, _ in parsed] == sorted((key, stamp) for key, stamp, _ in parsed)
    for key, stamp, fields in parsed:
        assert key == surt(fields["url"]) and len(stamp) == 14
        assert list(fields) == ["url", "mime", "status", "digest", "length", "offset", "filename"]
    homes = [(stamp, fields["offset"]) for key, stamp, fields in parsed if fields["url"] == f"{E}/"]
    assert homes == [("20240501120000", "0"), ("20240501130000", "36000")]
    first = parsed[0]
    assert first[0] == "com,example)/"
    assert first[2] == {
        "url": f"{E}/", "mime": "text/html", "status": "200", "digest": "3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ",
        "length": "500", "offset": "0", "filename": "site-20240501120000-00001.warc.gz",
    }  # fmt: skip
    assert "com,example)/b?a=2&z=1" in {key for key, _, _ in parsed}
    assert f"{E}/down" not in text


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "cdxj"])
def test_only_the_named_crawl_is_exported(conn, fmt: str) -> None:
    count, text = run(conn, fmt, crawl="other")
    assert count == 1 and "/other-crawl" in text
    assert "/other-crawl" not in run(conn, fmt)[1]


@pytest.mark.parametrize(("fmt", "expected"), [("jsonl", ""), ("csv", ",".join(FIELDS) + "\n"), ("cdxj", "")])
def test_a_crawl_without_captures(conn, fmt: str, expected: str) -> None:
    conn.execute("INSERT INTO crawls(id, name, identity, created_at) VALUES (3, 'empty', '{}', 0)")
    assert run(conn, fmt, crawl="empty") == (0, expected)


def test_an_unknown_crawl_names_the_ones_there_are(conn) -> None:
    with pytest.raises(StoreError, match=r"no crawl named 'nope'.*other, site"):
        run(conn, "jsonl", crawl="nope")


def test_a_read_only_connection_exports_cdxj(conn, tmp_path: Path) -> None:
    readonly = connect(tmp_path / "crawl.db", readonly=True)
    assert run(readonly, "cdxj") == run(conn, "cdxj")
