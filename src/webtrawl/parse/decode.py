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
from collections.abc import Callable
from functools import lru_cache

import brotli

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_WBITS = -zlib.MAX_WBITS
_BROTLI_CHUNK = 64 * 1024
"""Compressed bytes fed to brotli per step, so a corrupt stream still yields what came before the fault."""


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
    # A body labelled gzip that lacks gzip's magic number was sent already decoded (a common server
    # misconfiguration); browsers show such pages, so the body is taken as it is.
    if not body.startswith(b"\x1f\x8b"):
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
    data = body
    inflater = zlib.decompressobj(wbits)
    try:
        while True:
            # max_length stops the output at the bound; input not yet used waits in unconsumed_tail.
            piece = inflater.decompress(data, max_size - size)
            parts.append(piece)
            size += len(piece)
            if inflater.eof:
                data = inflater.unused_data
                if wbits != _GZIP_WBITS or not data.startswith(b"\x1f\x8b"):
                    return b"".join(parts), False  # bytes after the end of the stream are ignored
                if size >= max_size:
                    return b"".join(parts), True  # another gzip member follows
                inflater = zlib.decompressobj(wbits)
                continue
            data = inflater.unconsumed_tail
            if size >= max_size:
                # Output stopped at the bound; the stream is complete only if nothing more comes out.
                more = inflater.decompress(data, 1)
                return b"".join(parts), bool(more) or not inflater.eof
            if not data:
                return b"".join(parts), True  # the input ended before the stream did
    except zlib.error:
        return b"".join(parts), True


def _unbrotli(body: bytes, max_size: int) -> tuple[bytes, bool]:
    parts: list[bytes] = []
    size = 0
    view = memoryview(body)
    pos = 0
    decoder = brotli.Decompressor()
    try:
        while size < max_size and not decoder.is_finished():
            if decoder.can_accept_more_data():
                if pos >= len(view):
                    break  # the input ended before the stream did
                chunk = view[pos : pos + _BROTLI_CHUNK]
                pos += len(chunk)
            else:
                chunk = view[:0]  # output is pending: brotli wants empty input until it is drained
            piece = decoder.process(chunk, output_buffer_limit=max_size - size)
            if not piece and not chunk:
                break  # nothing more will come out
            parts.append(piece)
            size += len(piece)
    except brotli.error:
        return b"".join(parts)[:max_size], True
    out = b"".join(parts)
    if len(out) > max_size:
        return out[:max_size], True
    if not decoder.is_finished():
        return out, True
    return out, False


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
    for match in _META_CHARSET.finditer(body, 0, 1024):
        if codec := codec_for(match.group(1).decode("ascii")):
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
