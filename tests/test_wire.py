"""`cluster.wire`: a completion survives its trip through a Redis stream entry exactly."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields

import pytest

from webtrawl.cluster.wire import VERSION, decode_completion, encode_completion
from webtrawl.models import Capture, Completion, Entry, MediaFile, NewURL, Previous, Resource, WarcLocation
from webtrawl.urls import fingerprint

PAGE = "http://www.example.com/section/index.html"
HOST = "http://www.example.com"


def entry(url: str = PAGE, **fields) -> Entry:
    values = {"fp": fingerprint(url), "host": HOST, "depth": 2, "kind": "link", "referrer_fp": None, "attempts": 0}
    return Entry(url=url, **{**values, **fields})


def child(n: int, **fields) -> NewURL:
    url = f"{HOST}/section/page-{n:04d}.html"
    values = {"fp": fingerprint(url), "host": HOST, "depth": 3, "referrer_fp": fingerprint(PAGE)}
    return NewURL(url=url, **{**values, **fields})


def rich() -> Completion:
    return Completion(
        entry=entry(
            depth=4,
            kind="redirect",
            referrer_fp=-(2**63),
            attempts=2,
            via=("http://www.example.com/old", "http://www.example.com/older"),
            previous=Previous(
                fetched_at=1_699_000_000.25,
                digest="sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ",
                etag='"v1"',
                last_modified="Mon, 13 Nov 2023 10:00:00 GMT",
                interval=3600.5,
            ),
            priority=0.125,
        ),
        verdict="done",
        reason="HTTP 200 after a retry",
        not_before=1_700_000_000.123456789,
        capture=Capture(
            fp=2**63 - 1,
            url=PAGE,
            fetched_at=1_700_000_000.1 + 0.2,
            status=200,
            content_type="text/html",
            size=12_345,
            truncated="length",
            title='Ünïcode ☃ "quoted" \\ <title> 😀',
            text="line one\nline two\ttab \u2028 separator \x00 nul",
            location="http://www.example.com/next",
            redirects=("http://www.example.com/old", "http://www.example.com/older"),
            request_headers=[("User-Agent", "webtrawl/0.1"), ("Accept", "*/*")],
            response_headers=[("Set-Cookie", "a=1"), ("set-cookie", "b=2"), ("X-Latin", "caf\xe9 \xff")],
            etag='W/"abc"',
            last_modified="Tue, 14 Nov 2023 22:13:20 GMT",
            ip="2001:db8::1",
            ttfb=1e-7,
            elapsed=0.30000000000000004,
            warc=WarcLocation(
                file="crawl-20231114221320-00001.warc.gz",
                offset=2**40,
                length=4096,
                payload_digest="sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ",
            ),
            error="",
            payload_digest="sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ",
            unchanged=True,
            simhash=-(2**63),
            duplicate_of=42,
            near_duplicate_of=-7,
            resources=[
                Resource(
                    url="http://cdn.example.com/app.js",
                    target="http://cdn.example.com/app.js?",
                    fetched_at=1_700_000_000.25,
                    status=200,
                    content_type="application/javascript",
                    warc=WarcLocation(file="crawl-20231114221320-00001.warc.gz", offset=2**40 + 4096, length=512),
                ),
                Resource(
                    url="http://api.example.com/graphql",
                    target="http://api.example.com/graphql",
                    fetched_at=1_700_000_000.27,
                    status=200,
                    content_type="application/json",
                    warc=WarcLocation(file="crawl-20231114221320-00001.warc.gz", offset=2**40 + 6000, length=700),
                    method="POST",
                    request_query="query=media&id=8",
                ),
                Resource(
                    url=f"urn:dom:{PAGE}",
                    target=f"urn:dom:{PAGE}",
                    fetched_at=1_700_000_000.3,
                    status=None,
                    content_type="text/html",
                    warc=WarcLocation(file="crawl-20231114221320-00001.warc.gz", offset=2**40 + 8192, length=99),
                ),
            ],
        ),
        children=[
            child(1),
            child(2, kind="requisite", referrer_fp=None),
            child(3, kind="redirect", via=("http://www.example.com/a",)),
        ],
        drops=[("http://other.example/x", "off-site"), ("http://www.example.com/" + "a/" * 200, "too deep")],
        media=MediaFile(
            task="musicsite:7f3a",
            page_url="http://www.example.com/track/7f3a",
            url="http://cdn.example.com/stream/7f3a?sig=abc",
            kind="audio",
            content_type="audio/mpeg",
            path="media/www.example.com/musicsite/7f3a.mp3",
            size=2**33,
            sha256="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            duplicate_of="generic:http://www.example.com/a.mp3",
            title="Ünïcode ☃",
            artist="Artist",
            album="Album",
            duration=187.25,
            fetched_at=1_700_000_000.5,
            resumes=2,
            error="too large",
            stream="dash",
            segments=94,
            audio_path="media/www.example.com/musicsite/7f3a.audio.m4a",
        ),
        interval=5400.0,
        due=1_700_005_400.5,
        gained_host="http://www.example.com:8080",
    )


def minimal() -> Completion:
    return Completion(entry=entry(), verdict="failed", reason="blocked by robots.txt")


def left_at_default(obj: object) -> set[str]:
    """The fields of a dataclass instance that still hold their default value."""
    unset = set()
    for f in fields(obj):  # type: ignore[arg-type]
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        if default is not MISSING and getattr(obj, f.name) == default:
            unset.add(f.name)
    return unset


def test_the_rich_completion_sets_every_field() -> None:
    """So a field added to the models and forgotten by the wire format fails the round trip."""
    completion = rich()
    assert completion.capture is not None
    for obj in (
        completion,
        completion.entry,
        completion.entry.previous,
        completion.capture,
        completion.capture.warc,
        completion.media,
    ):
        assert left_at_default(obj) == set(), type(obj).__name__
    assert set.intersection(*(left_at_default(u) for u in completion.children)) == set()


@pytest.mark.parametrize("make", [rich, minimal], ids=["rich", "minimal"])
def test_a_completion_round_trips_exactly(make) -> None:
    completion = make()
    decoded, node = decode_completion(encode_completion(completion, "node-02"))
    assert node == "node-02"
    assert decoded == completion


def test_sequences_come_back_as_the_types_they_were() -> None:
    decoded, _ = decode_completion(encode_completion(rich(), "node-01"))
    capture = decoded.capture
    assert capture is not None and capture.warc is not None
    assert type(decoded.entry.via) is tuple and type(capture.redirects) is tuple
    assert all(type(pair) is tuple for pair in capture.request_headers + capture.response_headers)
    assert type(decoded.children[2].via) is tuple and decoded.children[0].via == ()
    assert all(type(drop) is tuple for drop in decoded.drops)
    assert capture.location == "http://www.example.com/next" and decoded.children[1].referrer_fp is None
    assert capture.fetched_at == 1_700_000_000.1 + 0.2 and capture.ttfb == 1e-7


def test_a_retry_keeps_its_not_before() -> None:
    completion = Completion(entry=entry(attempts=1), verdict="retry", reason="HTTP 503", not_before=1_700_000_030.5)
    assert decode_completion(encode_completion(completion, "node-07"))[0] == completion


def test_the_encoding_is_compact_json() -> None:
    data = encode_completion(rich(), "node-02")
    doc = json.loads(data)
    assert doc["v"] == VERSION
    # No padding: no longer than the standard library's most compact form (floats may be shorter: 1e-7).
    assert len(data) <= len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())
    assert "☃".encode() in data  # UTF-8 as is, not \\u escapes


def test_a_page_with_forty_links_stays_small() -> None:
    page = Completion(
        entry=entry(),
        verdict="done",
        capture=Capture(
            fp=fingerprint(PAGE),
            url=PAGE,
            fetched_at=1_700_000_000.25,
            status=200,
            content_type="text/html",
            size=20_000,
            title="A section",
            text="",
            response_headers=[("Content-Type", "text/html; charset=utf-8"), ("Content-Length", "20000")],
            warc=WarcLocation(file="crawl-20231114221320-00001.warc.gz", offset=123_456, length=5_000),
        ),
    )
    alone = len(encode_completion(page, "node-02"))
    page.children = [child(n) for n in range(40)]
    with_links = len(encode_completion(page, "node-02"))
    per_link = (with_links - alone) / 40
    url_length = len(page.children[0].url)
    print(f"page entry {alone} B without links, {with_links} B with 40 links ({per_link:.0f} B per link)")
    assert alone < 1024
    assert per_link < url_length + 90  # the URL, its host, two fingerprints and a few small fields


@pytest.mark.parametrize("version", [0, VERSION + 1, "1", None])
def test_an_unknown_version_is_refused(version) -> None:
    doc = json.loads(encode_completion(minimal(), "node-02"))
    doc["v"] = version
    with pytest.raises(ValueError, match="version"):
        decode_completion(json.dumps(doc).encode())


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff\xfe", b"[1, 2]", b'{"v": 1}', b'{"v": 1, "node": "node-01", "entry": [1, 2]}'],
    ids=["empty", "not-utf8", "array", "no-fields", "short-entry"],
)
def test_something_else_is_refused_with_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_completion(data)
