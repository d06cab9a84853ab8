"""Bounded Content-Encoding decoding and charset sniffing, checked on real compressed and encoded bytes."""

from __future__ import annotations

import gzip
import random
import tracemalloc
import zlib

import brotli
import pytest

from webtrawl.parse.decode import codec_for, decompress, sniff_charset, to_text
from webtrawl.parse.html import parse_html

PAGE = b"<html><head><title>Hello</title></head><body>" + b"<p>Some text to compress.</p>" * 500 + b"</body>"
MIB = 1 << 20
GIB = 1 << 30


def _zlib(data: bytes) -> bytes:
    return zlib.compress(data)


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        (None, PAGE),
        ("", PAGE),
        ("identity", PAGE),
        ("gzip", gzip.compress(PAGE, mtime=0)),
        ("x-gzip", gzip.compress(PAGE, mtime=0)),
        ("GZip", gzip.compress(PAGE, mtime=0)),
        ("deflate", _zlib(PAGE)),
        ("deflate", _raw_deflate(PAGE)),
        ("br", brotli.compress(PAGE)),
        ("gzip, br", brotli.compress(gzip.compress(PAGE, mtime=0))),
        ("deflate,gzip", gzip.compress(_zlib(PAGE), mtime=0)),
        ("br, identity, gzip", gzip.compress(brotli.compress(PAGE), mtime=0)),
        ("gzip", gzip.compress(PAGE[:1000], mtime=0) + gzip.compress(PAGE[1000:], mtime=0)),  # two gzip members
        ("gzip", gzip.compress(PAGE, mtime=0) + b"\0\0trailing junk"),
        ("gzip", PAGE),  # labelled gzip but sent decoded: taken as it is
    ],
)
def test_decompress_undoes_each_coding(encoding: str | None, body: bytes) -> None:
    assert decompress(body, encoding, 10 * MIB) == (PAGE, False)


@pytest.mark.parametrize("encoding", ["compress", "zstd", "gzip, compress", "x-unknown"])
def test_unknown_coding_leaves_body_as_received(encoding: str) -> None:
    body = gzip.compress(PAGE, mtime=0)
    assert decompress(body, encoding, 10 * MIB) == (body, False)


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        (None, lambda d: d),
        ("gzip", gzip.compress),
        ("deflate", _zlib),
        ("deflate", _raw_deflate),
        ("br", brotli.compress),
        ("gzip, br", lambda d: brotli.compress(gzip.compress(d, mtime=0))),
    ],
)
def test_output_is_cut_at_max_size(encoding: str | None, compress) -> None:
    body = compress(PAGE)
    assert decompress(body, encoding, 1000) == (PAGE[:1000], True)
    assert decompress(body, encoding, len(PAGE)) == (PAGE, False)
    assert decompress(body, encoding, len(PAGE) - 1) == (PAGE[:-1], True)


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [("gzip", gzip.compress), ("deflate", _zlib), ("deflate", _raw_deflate), ("br", brotli.compress)],
)
def test_stream_cut_short_returns_what_decoded(encoding: str, compress) -> None:
    data = random.Random(1).randbytes(100_000)  # incompressible: half the stream holds half the data
    body = compress(data)
    out, truncated = decompress(body[: len(body) // 2], encoding, 10 * MIB)
    assert truncated
    assert 0 < len(out) < len(data)
    assert data.startswith(out)


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [("gzip", gzip.compress), ("deflate", _zlib), ("br", lambda d: brotli.compress(d, quality=5))],
)
def test_corrupt_stream_returns_what_decoded_before_the_fault(encoding: str, compress) -> None:
    data = " ".join(str(n * n) for n in range(150_000)).encode()
    body = bytearray(compress(data))
    middle = len(body) // 2
    body[middle : middle + 64] = b"\xff" * 64
    out, truncated = decompress(bytes(body), encoding, 10 * MIB)
    assert truncated
    assert len(out) < len(data)
    # What came before the fault is kept, give or take the slice of input the fault is in (and a decoder
    # may emit a little garbage before it notices).
    assert out[: len(data) // 4] == data[: len(data) // 4]


def test_empty_body() -> None:
    for encoding in (None, "gzip", "deflate", "br", "gzip, br"):
        assert decompress(b"", encoding, 100) == (b"", False)


def test_max_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_size"):
        decompress(PAGE, None, 0)


def _zeros_bomb(wbits: int) -> bytes:
    """A deflate-family stream that inflates to 1 GiB of zeros, built in milliseconds.

    A full flush resets the compressor, so each further MiB of zeros compresses to the very same block:
    the bomb is the header, that block 1024 times, and the final empty block. The checksum trailer is
    left out: a bounded decoder stops long before it, and an unbounded one must inflate 1 GiB to see it.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, wbits)
    zeros = bytes(MIB)
    first = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    header = first[: len(first) - len(block)]
    assert first == header + block
    final = compressor.flush()
    trailer = 0 if wbits < 0 else 4 if wbits <= zlib.MAX_WBITS else 8
    return header + block * (GIB // MIB) + final[: len(final) - trailer]


def _brotli_bomb() -> bytes:
    compressor = brotli.Compressor(quality=1)
    zeros = bytes(MIB)
    return b"".join(compressor.process(zeros) for _ in range(GIB // MIB)) + compressor.finish()


@pytest.mark.parametrize(
    ("encoding", "make_bomb"),
    [
        ("gzip", lambda: _zeros_bomb(16 + zlib.MAX_WBITS)),
        ("deflate", lambda: _zeros_bomb(zlib.MAX_WBITS)),
        ("deflate", lambda: _zeros_bomb(-zlib.MAX_WBITS)),
        ("br", _brotli_bomb),
        ("gzip, br", lambda: brotli.compress(_zeros_bomb(16 + zlib.MAX_WBITS)[:MIB], quality=1)),
    ],
)
def test_decompression_bomb_stops_at_max_size_quickly_and_in_bounded_memory(encoding, make_bomb) -> None:
    bomb = make_bomb()
    assert len(bomb) < 2 * MIB
    max_size = 8 * MIB
    tracemalloc.start()
    try:
        out, truncated = decompress(bomb, encoding, max_size)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (len(out), truncated) == (max_size, True)
    assert out.count(0) == max_size
    assert peak < 3 * max_size


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        ("utf-8", "utf-8"),
        ("UTF8", "utf-8"),
        (" unicode-1-1-utf-8 ", "utf-8"),
        ("iso-8859-1", "cp1252"),
        ("latin1", "cp1252"),
        ("ISO_8859-1", "cp1252"),
        ("ascii", "cp1252"),
        ("us-ascii", "cp1252"),
        ("windows-1252", "cp1252"),
        ("iso-8859-9", "cp1254"),
        ("tis-620", "cp874"),
        ("gb2312", "gb18030"),
        ("GBK", "gb18030"),
        ("x-gbk", "gb18030"),
        ("gb18030", "gb18030"),
        ("big5", "big5hkscs"),
        ("Big5-HKSCS", "big5hkscs"),
        ("shift_jis", "cp932"),
        ("Shift-JIS", "cp932"),
        ("sjis", "cp932"),
        ("x-sjis", "cp932"),
        ("windows-31j", "cp932"),
        ("euc-jp", "euc_jp"),
        ("iso-2022-jp", "iso2022_jp"),
        ("euc-kr", "cp949"),
        ("ks_c_5601-1987", "cp949"),
        ("koi8-r", "koi8-r"),
        ("windows-1251", "cp1251"),
        ("iso-8859-2", "iso8859-2"),
        ("iso-8859-15", "iso8859-15"),
        ("macintosh", "mac-roman"),
        ("utf-16", "utf-16-le"),
        ("utf-16be", "utf-16-be"),
        ("utf-7", None),
        ("base64", None),
        ("rot13", None),
        ("unicode-escape", None),
        ("idna", None),
        ("no-such-charset", None),
        ("", None),
    ],
)
def test_codec_for_web_labels(label: str, codec: str | None) -> None:
    assert codec_for(label) == codec


@pytest.mark.parametrize(
    ("body", "header", "charset"),
    [
        (b"<p>plain", None, "utf-8"),
        (b"<p>plain", "text/html", "utf-8"),
        (b"<p>x", "text/html; charset=ISO-8859-1", "cp1252"),
        (b"<p>x", 'text/html; charset="Shift_JIS"', "cp932"),
        (b"<p>x", "text/html;charset='gbk'", "gb18030"),
        (b"<p>x", "text/html; Charset = big5 ; q=1", "big5hkscs"),
        (b'<meta charset="gbk"><p>x', "text/html; charset=koi8-r", "koi8-r"),  # the header wins
        (b'<meta charset="gbk"><p>x', "text/html; charset=bogus", "gb18030"),  # unless it names nothing
        (b"\xef\xbb\xbf<meta charset=gbk>", "text/html; charset=big5", "utf-8"),  # a BOM beats both
        (b"\xff\xfe<\x00p\x00", "text/html; charset=gbk", "utf-16-le"),
        (b"\xfe\xff\x00<\x00p", None, "utf-16-be"),
        (b'<html><head><META CHARSET="windows-1251">', None, "cp1251"),
        (b"<meta charset=euc-jp>", None, "euc_jp"),
        (b"<meta http-equiv=Content-Type content='text/html; charset=Big5'>", None, "big5hkscs"),
        (b'<meta name="x" content="y"><meta charset="bogus"><meta charset="latin1">', None, "cp1252"),
        (b'<meta charset="utf-16le">', None, "utf-8"),  # a page readable as ASCII is not UTF-16
        (b'<meta charset="no-such">', None, "utf-8"),
        (b"<!-- " + b"x" * 1100 + b' --><meta charset="gbk">', None, "utf-8"),  # past the first 1024 bytes
    ],
)
def test_sniff_charset(body: bytes, header: str | None, charset: str) -> None:
    assert sniff_charset(body, header) == charset


def _title_seen(body: bytes, header: str | None) -> str:
    """The title a user sees for a fetched body: sniff, decode, parse — as the crawler does."""
    text = to_text(body, sniff_charset(body, header))
    return parse_html(text, "http://example.com/").title


@pytest.mark.parametrize(
    ("body", "header", "title"),
    [
        ('<meta charset="gbk"><title>中文网页标题</title>'.encode("gbk"), None, "中文网页标题"),
        ('<meta charset="gb2312"><title>简体中文</title>'.encode("gb2312"), None, "简体中文"),
        ('<meta charset="big5"><title>繁體中文網頁</title>'.encode("big5"), None, "繁體中文網頁"),
        (
            "<title>日本語のページ</title>".encode("shift_jis"),
            "text/html; charset=Shift_JIS",
            "日本語のページ",
        ),
        ("<title>①ｶﾀｶﾅ～</title>".encode("cp932"), "text/html; charset=shift_jis", "①ｶﾀｶﾅ～"),
        (
            "<title>Café “quoted” – ok</title>".encode("cp1252"),
            "text/html; charset=iso-8859-1",
            "Café “quoted” – ok",
        ),
        ("<title>Ünïcödé</title>".encode("cp1252"), "text/html; charset=windows-1252", "Ünïcödé"),
        ("\ufeff<title>UTF-16 Ωμέγα</title>".encode("utf-16-le"), None, "UTF-16 Ωμέγα"),
        ("\ufeff<title>UTF-16 Ωμέγα</title>".encode("utf-16-be"), "text/html; charset=gbk", "UTF-16 Ωμέγα"),
        ("\ufeff<title>BOM ok</title>".encode(), None, "BOM ok"),
        ("<title>Привет, мир</title>".encode("koi8-r"), "text/html; charset=KOI8-R", "Привет, мир"),
        ("<title>no charset at all — ✓</title>".encode(), None, "no charset at all — ✓"),
        (
            "<title>declared wrong — 中文</title>".encode(),
            "text/html; charset=shift_jis",
            "declared wrong — 中文",
        ),
        (
            "<title>declared wrong: café</title>".encode("cp1252"),
            "text/html; charset=utf-8",
            "declared wrong: café",
        ),
        ('<meta charset="utf-8"><title>déjà vu</title>'.encode("cp1252"), None, "déjà vu"),
    ],
)
def test_title_a_user_sees_in_each_charset(body: bytes, header: str | None, title: str) -> None:
    assert _title_seen(body, header) == title


def test_to_text_keeps_declared_charset_when_errors_are_few() -> None:
    body = b"ok text " * 100 + b"\xff"  # one stray byte in a UTF-8 page
    text = to_text(body, "utf-8")
    assert text == "ok text " * 100 + "\ufffd"


def test_to_text_with_unknown_codec_falls_back_to_utf8() -> None:
    assert to_text("é".encode(), "no-such-codec") == "é"
