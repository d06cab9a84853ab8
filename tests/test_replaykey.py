"""`store.replaykey`: a request's body keyed as pywb keys it, and a body no parser reads never stops a crawl."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from webtrawl.store.db import connect
from webtrawl.store.replay import captures_of_url, is_archived, nearest_resource
from webtrawl.store.replaykey import lookup_url, request_query
from webtrawl.store.schema import MIGRATIONS, REQUESTS_SCHEMA


@pytest.mark.parametrize(
    ("content_type", "body", "query"),
    [
        ("application/json", b'{"query": "media", "id": 8}', "query=media&id=8"),
        ("application/x-www-form-urlencoded", b"a=1&b=%20x", "a=1&b= x"),
        ("text/plain", b"hello", "__wb_post_data=aGVsbG8="),
        (None, b"\x00\x01", "__wb_post_data=AAE="),
        ("application/json", b"{not json", ""),
        ("multipart/form-data; boundary=x", b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\n1", None),
        ('multipart/form-data; boundary="x"', b"--x\r\n", None),
        ("application/x-amf", b"\x00\x03zz", "__wb_post_data=AAN6eg=="),
        ("application/json", b"[" * 100_000, None),
    ],
)
def test_a_body_becomes_the_query_replay_looks_it_up_by(
    content_type: str | None, body: bytes, query: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    got = request_query("POST", content_type, body, "http://a.test/api")
    assert got == query if query is not None else got.startswith("__wb_post_data=")
    assert capsys.readouterr() == ("", "")  # nothing printed over the crawl's display


def test_a_get_is_looked_up_by_its_url_alone_and_another_method_by_its_own_key() -> None:
    assert request_query("GET", "application/json", b"{}", "http://a.test/") == ""
    assert lookup_url("http://a.test/x", "GET", "") == "http://a.test/x"
    assert lookup_url("http://a.test/x?y=1", "POST", "a=1") == "http://a.test/x?y=1&__wb_method=POST&a=1"
    assert lookup_url("http://a.test/x", "DELETE", "") == "http://a.test/x?__wb_method=DELETE"


def test_a_crawl_of_an_earlier_webtrawl_read_as_it_is_still_replays(tmp_path: Path) -> None:
    """Read-only readers (the dashboard, `show`) do not migrate: a database from before requests had their
    method (schema 13) replays its rendered pages' requests as before."""
    database = tmp_path / "crawl.db"
    conn = sqlite3.connect(database)
    for script in MIGRATIONS[: REQUESTS_SCHEMA - 1]:
        conn.executescript(script)
    conn.execute(f"PRAGMA user_version = {REQUESTS_SCHEMA - 1}")
    conn.execute("INSERT INTO crawls(id, name, identity, created_at) VALUES (1, 'default', '{}', 0)")
    conn.execute(
        "INSERT INTO resources(crawl_id, page_fp, url, target, fetched_at, status, content_type, warc_file, "
        "warc_offset, warc_length) VALUES (1, 7, 'http://a.test/app.js', 'http://a.test/app.js', 5, 200, "
        "'text/javascript', 'a.warc.gz', 0, 10)"
    )
    conn.commit()
    conn.close()
    reader = connect(database, readonly=True)
    try:
        assert [c.url for c in captures_of_url(reader, 1, "http://a.test/app.js")] == ["http://a.test/app.js"]
        assert is_archived(reader, 1, "http://a.test/app.js")
        assert nearest_resource(reader, 1, "http://a.test/app.js", 5.0) is not None
    finally:
        reader.close()
