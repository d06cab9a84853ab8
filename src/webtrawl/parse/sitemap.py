"""Reading a sitemap file (sitemaps.org protocol) as it is decompressed, a chunk at a time.

Neither a huge file nor a decompression bomb costs more than a chunk of memory beyond the body: gzip
(a `.xml.gz` file, a `Content-Encoding`, or both) is inflated in steps of `CHUNK` bytes up to a limit,
and each step is fed to an expat parser whose target keeps only the entries' locations. A file that
declares a DTD is refused, so entity expansion (a "billion laughs") cannot happen.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from itertools import chain
from xml.etree.ElementTree import ParseError, XMLParser

from .decode import decompress

CHUNK = 64 * 1024
"""Bytes decompressed and parsed in one step (the caller lets other tasks run between steps)."""
_GZIP_MAGIC = b"\x1f\x8b"


class SitemapError(Exception):
    """A sitemap file that cannot be read (not XML, not a sitemap, a DTD)."""


def decoded_chunks(body: bytes, content_encoding: str | None, limit: int) -> Iterator[bytes]:
    """The XML of a sitemap body, in chunks of at most `CHUNK` bytes and `limit` bytes in all.

    `Content-Encoding` is undone first (gzip a chunk at a time, rarer codings at once but bounded), then
    the gzip of a `.xml.gz` file, recognized by its magic number. A corrupt stream ends early: the parser
    then reports the XML cut short.
    """
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    if codings in (["gzip"], ["x-gzip"]):
        # A body labelled gzip without gzip's magic number was most likely sent already decoded.
        chunks = _gunzip(_split(body), limit) if body.startswith(_GZIP_MAGIC) else _split(body)
    elif codings:
        chunks = _split(decompress(body, content_encoding, limit)[0])
    else:
        chunks = _split(body)
    head = b""
    for piece in chunks:  # enough bytes to see the magic number (a first chunk may be tiny)
        head += piece
        if len(head) >= len(_GZIP_MAGIC):
            break
    if head.startswith(_GZIP_MAGIC):
        yield from _gunzip(chain([head], chunks), limit)
    else:
        yield head
        yield from chunks


def _split(body: bytes) -> Iterator[bytes]:
    view = memoryview(body)
    for start in range(0, len(body), CHUNK):
        yield bytes(view[start : start + CHUNK])


def _gunzip(chunks: Iterator[bytes], limit: int) -> Iterator[bytes]:
    """Inflate the gzip members in `chunks`, yielding at most `limit` bytes; a corrupt stream ends it."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    data, produced = b"", 0
    while produced < limit:
        if not data:
            data = next(chunks, b"")
            if not data:
                return
        try:
            out = inflater.decompress(data, min(CHUNK, limit - produced))
        except zlib.error:
            return
        data = inflater.unconsumed_tail
        if out:
            produced += len(out)
            yield out
        if inflater.eof:  # another member may follow; anything else after the last one is ignored
            data = inflater.unused_data + data
            if data and not data.startswith(_GZIP_MAGIC[:1]):
                return
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)


def parse_sitemap(chunks: Iterable[bytes]) -> Iterator[list[tuple[str, str]]]:
    """Parse a sitemap fed in chunks; per chunk, the entries it completed: ("url" | "sitemap", location).

    Page URLs come from `<urlset><url><loc>`, sitemaps from `<sitemapindex><sitemap><loc>` (any namespace:
    `<image:loc>` and other extensions sit deeper and are skipped). Raises `SitemapError` at the first
    fault, after the entries before it were yielded.
    """
    target = _Target()
    parser = XMLParser(target=target)
    try:
        for chunk in chunks:
            parser.feed(chunk)
            yield target.take()
        parser.close()
    except ParseError as exc:
        yield target.take()
        raise SitemapError(f"bad XML: {exc}") from None
    except SitemapError:
        yield target.take()
        raise
    yield target.take()


class _Target:
    """An ElementTree parser target that keeps only what a sitemap's entries need: a few bytes per entry."""

    def __init__(self) -> None:
        self.root: str | None = None
        self.depth = 0
        self.parent = ""
        self.text: list[str] | None = None
        self.entries: list[tuple[str, str]] = []

    def take(self) -> list[tuple[str, str]]:
        entries, self.entries = self.entries, []
        return entries

    def doctype(self, name: str, pubid: str | None, system: str | None) -> None:
        raise SitemapError("a DTD is not allowed in a sitemap")

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        local = tag.rpartition("}")[2]
        self.depth += 1
        if self.depth == 1:
            if local not in ("urlset", "sitemapindex"):
                raise SitemapError(f"not a sitemap: <{local}>")
            self.root = local
        elif self.depth == 2:
            self.parent = local
        elif self.depth == 3 and local == "loc":
            self.text = []

    def end(self, tag: str) -> None:
        if self.text is not None and self.depth == 3:
            loc = "".join(self.text).strip()
            self.text = None
            if loc and (self.root, self.parent) in (("urlset", "url"), ("sitemapindex", "sitemap")):
                self.entries.append(("url" if self.parent == "url" else "sitemap", loc))
        self.depth -= 1

    def data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)

    def close(self) -> None:
        return None
