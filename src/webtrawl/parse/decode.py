"""Turn a response body into text for the parser, within a size bound.

The WARC keeps every body exactly as received; this module works on a copy for parsing only. Undoing
`Content-Encoding` never produces more than the caller's `max_size` bytes, so a small compressed body
that inflates to gigabytes (a decompression bomb) costs at most `max_size` bytes of memory and the time
to produce them. Charset detection follows the HTML standard's sniffing order, simplified: byte-order
mark, then the Content-Type header, then a `<meta>` declaration in the first 1024 bytes, else UTF-8.
"""

from __future__ import annotations

import codecs
import re
import zlib
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

import brotli

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_WBITS = -zlib.MAX_WBITS
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 64 * 1024
"""Compressed bytes fed to a decoder per step: a corrupt stream still yields what came before the fault."""


def decompress(body: bytes, content_encoding: str | None, max_size: int) -> tuple[bytes, bool]:
    """Undo the codings of a `Content-Encoding` header, producing at most `max_size` bytes.

    Codings listed as `gzip, br` were applied in that order, so they are undone in reverse. Returns the
    decoded bytes and whether they are incomplete: cut at `max_size`, or the stream was corrupt or ended
    early (then the bytes decoded before the fault are returned). A coding this module does not know
    leaves the body as it is: the caller cannot parse it, but nothing is lost.
    """
    if max_size < 1:
        raise ValueError(f"max_size must be at least 1, not {max_size}")
    if not body:
        return body, False
    codings = [c.strip().lower() for c in (content_encoding or "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not all(c in _DECODERS for c in codings):
        codings = []
    truncated = False
    for coding in reversed(codings):
        body, cut = _DECODERS[coding](body, max_size)
        truncated = truncated or cut
    if len(body) > max_size:
        return body[:max_size], True
    return body, truncated


def _gunzip(body: bytes, max_size: int) -> tuple[bytes, bool]:
    # A body labelled gzip that lacks gzip's magic number was most likely sent already decoded (a common
    # server misconfiguration); the magic number tells the two apart safely, so it is kept as it is.
    if not body.startswith(_GZIP_MAGIC):
        return body, False
    return _inflate(body, _GZIP_WBITS, max_size)


def _inflate_deflate(body: bytes, max_size: int) -> tuple[bytes, bool]:
    # "deflate" should mean a zlib stream, but many servers send raw deflate; a zlib header is two bytes
    # whose first names method 8 and whose big-endian value is a multiple of 31.
    is_zlib = len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0
    return _inflate(body, _ZLIB_WBITS if is_zlib else _RAW_WBITS, max_size)


def _inflate(body: bytes, wbits: int, max_size: int) -> tuple[bytes, bool]:
    """Inflate a zlib-family stream to at most `max_size` bytes (gzip: every member, one after another)."""
    parts: list[bytes] = []
    size = 0
    chunks = _chunks(body)
    data: bytes | memoryview = b""
    inflater = zlib.decompressobj(wbits)
    try:
        while True:
            if not data:
                data = next(chunks, b"")
                if not data:
                    return b"".join(parts), True  # the input ended before the stream did
            # max_length stops the output at the bound; input not yet used waits in unconsumed_tail.
            piece = inflater.decompress(data, max_size - size)
            parts.append(piece)
            size += len(piece)
            if inflater.eof:
                data = inflater.unused_data
                if len(data) < 2:
                    data += next(chunks, b"")
                if wbits != _GZIP_WBITS or data[:2] != _GZIP_MAGIC:
                    return b"".join(parts), False  # bytes after the end of the stream are ignored
                if size >= max_size:
                    return b"".join(parts), True  # another gzip member follows
                inflater = zlib.decompressobj(wbits)
            elif size >= max_size:
                return b"".join(parts), _yields_more(inflater, wbits, chunks)
            else:
                data = inflater.unconsumed_tail
    except zlib.error:
        return b"".join(parts), True


def _yields_more(inflater: Any, wbits: int, chunks: Iterator[memoryview]) -> bool:
    """Whether a stream whose output reached the bound has more to give, or lacks its proper end."""
    data: bytes | memoryview = inflater.unconsumed_tail
    while True:
        if inflater.decompress(data, 1):
            return True
        if inflater.eof:
            return wbits == _GZIP_WBITS and inflater.unused_data[:2] == _GZIP_MAGIC
        data = inflater.unconsumed_tail or next(chunks, b"")
        if not data:
            return True  # the input ended before the stream did


def _chunks(body: bytes) -> Iterator[memoryview]:
    """The body in slices, so that a fault mid-stream loses only the slice it is in."""
    view = memoryview(body)
    return (view[i : i + _CHUNK] for i in range(0, len(view), _CHUNK))


def _unbrotli(body: bytes, max_size: int) -> tuple[bytes, bool]:
    """Decode brotli to at most `max_size` bytes.

    The decoder hands its output out in pieces and keeps input it has not decoded yet, so each slice of
    input is drained (empty input until nothing more comes) before the next goes in.
    """
    parts: list[bytes] = []
    size = 0
    chunks = _chunks(body)
    decoder = brotli.Decompressor()
    draining = False
    try:
        while size < max_size and not decoder.is_finished():
            chunk: bytes | memoryview = b""
            if not draining and decoder.can_accept_more_data():
                chunk = next(chunks, b"")
                if not chunk:
                    break  # the input ended before the stream did
            piece = decoder.process(chunk, output_buffer_limit=max_size - size)
            if not piece and not chunk and not decoder.can_accept_more_data():
                break  # stuck: nothing comes out and nothing may go in
            draining = bool(piece)
            parts.append(piece)
            size += len(piece)
    except brotli.error:
        return b"".join(parts)[:max_size], True
    out = b"".join(parts)
    if len(out) > max_size:
        return out[:max_size], True
    return out, not decoder.is_finished()


_DECODERS: dict[str, Callable[[bytes, int], tuple[bytes, bool]]] = {
    "gzip": _gunzip,
    "x-gzip": _gunzip,
    "deflate": _inflate_deflate,
    "br": _unbrotli,
}

# Web labels Python does not know, and Python codecs the web means a superset of (the HTML standard
# decodes latin-1 and ASCII as windows-1252, GB2312 and GBK as GB18030, Shift_JIS as windows-31j, …).
_WEB_LABELS = {
    "x-user-defined": "cp1252",
    "x-cp1252": "cp1252",
    "dos-874": "cp874",
    "x-gbk": "gb18030",
    "chinese": "gb18030",
    "csgb2312": "gb18030",
    "csiso58gb231280": "gb18030",
    "iso-ir-58": "gb18030",
    "gb_2312": "gb18030",
    "gb_2312-80": "gb18030",
    "big5-hkscs": "big5hkscs",
    "cn-big5": "big5hkscs",
    "x-x-big5": "big5hkscs",
    "csbig5": "big5hkscs",
    "x-sjis": "cp932",
    "windows-31j": "cp932",
    "x-euc-jp": "euc_jp",
    "cseucpkdfmtjapanese": "euc_jp",
    "ks_c_5601-1987": "cp949",
    "ks_c_5601-1989": "cp949",
    "ksc_5601": "cp949",
    "ksc5601": "cp949",
    "korean": "cp949",
    "windows-949": "cp949",
    "cseuckr": "cp949",
    "csksc56011987": "cp949",
    "iso-ir-149": "cp949",
    "macintosh": "mac-roman",
    "mac": "mac-roman",
    "x-mac-roman": "mac-roman",
    "csmacintosh": "mac-roman",
    "x-mac-cyrillic": "mac-cyrillic",
    "x-mac-ukrainian": "mac-cyrillic",
    "iso-8859-8-i": "iso8859-8",
    "csiso88598i": "iso8859-8",
    "logical": "iso8859-8",
    "visual": "iso8859-8",
    "koi8-ru": "koi8-u",
    "unicode-1-1-utf-8": "utf-8",
    "unicode11utf8": "utf-8",
    "unicode20utf8": "utf-8",
    "x-unicode20utf8": "utf-8",
    "utf-16": "utf-16-le",
    "unicode": "utf-16-le",
    "ucs-2": "utf-16-le",
    "csunicode": "utf-16-le",
    "iso-10646-ucs-2": "utf-16-le",
    "unicodefeff": "utf-16-le",
    "unicodefffe": "utf-16-be",
}
_SUPERSETS = {
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "iso8859-9": "cp1254",
    "iso8859-11": "cp874",
    "tis-620": "cp874",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "utf-16": "utf-16-le",
}
# Python codecs that stand for an encoding of the HTML standard; any other codec Python knows (utf-7,
# idna, unicode-escape, …) is refused, as a browser would.
_WEB_CODECS = frozenset(
    ["utf-8", "utf-16-le", "utf-16-be", "gb18030", "big5hkscs", "cp932", "euc_jp", "iso2022_jp", "cp949"]
    + ["cp866", "koi8-r", "koi8-u", "mac-roman", "mac-cyrillic", "cp874"]
    + [f"cp{n}" for n in range(1250, 1259)]
    + [f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)]
)

_HEADER_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([^\s"';,]+)""", re.IGNORECASE)
_META_CHARSET = re.compile(rb"""<meta\s[^>]*?charset\s*=\s*["']?\s*([a-z0-9_.:+-]+)""", re.IGNORECASE)


@lru_cache(maxsize=256)
def codec_for(label: str) -> str | None:
    """The Python codec for a charset label as the web uses it, or None if it names no web encoding."""
    label = label.strip().lower()
    if label in _WEB_LABELS:
        return _WEB_LABELS[label]
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    name = _SUPERSETS.get(name, name)
    return name if name in _WEB_CODECS else None


def sniff_charset(body: bytes, content_type_header: str | None) -> str:
    """The codec to decode an HTML body with: BOM, then the header's charset, then `<meta>`, else UTF-8."""
    if body.startswith(b"\xef\xbb\xbf"):
        return "utf-8"
    if body.startswith(b"\xff\xfe"):
        return "utf-16-le"
    if body.startswith(b"\xfe\xff"):
        return "utf-16-be"
    if content_type_header:
        match = _HEADER_CHARSET.search(content_type_header)
        if match and (codec := codec_for(match.group(1))):
            return codec
    for meta in _META_CHARSET.finditer(body, 0, 1024):
        if codec := codec_for(meta.group(1).decode("ascii")):
            # A page whose <meta> could be read as ASCII is not UTF-16, whatever it says.
            return "utf-8" if codec.startswith("utf-16") else codec
    return "utf-8"


def to_text(body: bytes, charset: str) -> str:
    """Decode `body`, replacing bad bytes; when the charset is evidently wrong, try UTF-8 and windows-1252.

    "Evidently wrong" means more than 1% of the characters came out as U+FFFD; the candidate with the
    fewest replacements wins. A leading byte-order mark is dropped.
    """
    try:
        text = body.decode(charset, "replace")
    except LookupError:
        charset = "utf-8"
        text = body.decode(charset, "replace")
    if "\ufffd" in text:
        bad = text.count("\ufffd")
        if bad * 100 > len(text):
            for other in ("utf-8", "cp1252"):
                if other != charset:
                    candidate = body.decode(other, "replace")
                    candidate_bad = candidate.count("\ufffd")
                    if candidate_bad < bad:
                        text, bad = candidate, candidate_bad
    return text[1:] if text.startswith("\ufeff") else text
