"""Reading a playlist file (M3U and HLS, PLS, XSPF) for the media it lists.

The format is told by the file's first bytes when they are distinctive, else by its Content-Type, else by
its extension. Entries are resolved against the playlist's address. An entry of an M3U, PLS or XSPF list
whose name tells nothing is taken as audio: these lists are mostly internet radio and music, whose streams
have addresses like `http://host:8000/live`. An HLS playlist is different: its entries are variant
playlists (`.m3u8`) and segments (`.ts`, `.aac`, …), reported only when their extension names a kind; the
crawl collects an HLS playlist (or a DASH MPD) as one stream (`media.streams`) and never lists it here.

Work is bounded: a body over `MAX_BODY` is not read, at most `MAX_ENTRIES` entries are returned (of the
first `4 * MAX_ENTRIES` distinct ones), and an XSPF file that declares a DTD is refused, so entity expansion
cannot happen.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import suppress
from typing import Literal
from xml.parsers.expat import ExpatError, ParserCreate

from ..errors import InvalidURL
from ..models import MediaKind, MediaRef
from ..parse.media import PLAYLIST_TYPES, media_kind
from ..urls import normalize

MAX_BODY = 1024 * 1024
"""Bytes of a playlist that are read; a larger body is ignored whole."""
MAX_ENTRIES = 1000
"""Entries returned from one playlist."""
_MAX_TRIED = 4 * MAX_ENTRIES
"""Distinct entries looked at: a megabyte of lines that are not media, or do not resolve, costs no more."""

_Format = Literal["m3u", "pls", "xspf"]
_FORMAT_BY_TYPE: dict[str, _Format] = {
    **dict.fromkeys(PLAYLIST_TYPES - {"application/dash+xml"}, "m3u"),
    "audio/x-scpls": "pls",
    "application/xspf+xml": "xspf",
}
_FORMAT_BY_EXTENSION: dict[str, _Format] = {"m3u": "m3u", "m3u8": "m3u", "pls": "pls", "xspf": "xspf"}


class _DoctypeRefused(Exception):
    """An XSPF file declared a DTD."""


def read_playlist(body: bytes, url: str, content_type: str | None) -> list[MediaRef]:
    """The media a playlist fetched from `url` lists, absolute and normalized, deduplicated, in its order.

    `body` must already be decoded from its Content-Encoding. A body that is too large, of no known format,
    or malformed from the start gives an empty list; a malformed XSPF gives the entries before the fault.
    Entries that are not http(s) (local paths, `file:`) are left out.
    """
    if len(body) > MAX_BODY:
        return []
    playlist_format = _format(body, url, content_type)
    entries: Iterable[str]
    default: MediaKind | None = "audio"
    if playlist_format == "xspf":
        entries = _xspf(body)
    elif playlist_format is None or b"\0" in body:  # binary: still compressed, or no playlist; junk "lines"
        return []
    else:
        try:
            text = body.decode("utf-8-sig")
        except UnicodeDecodeError:  # an old `.m3u` in Latin-1
            text = body.decode("latin-1")
        if playlist_format == "pls":
            entries = _pls(text)
        else:
            entries = _m3u(text)
            if "#EXT-X-" in text:
                default = None
    refs: list[MediaRef] = []
    seen: set[str] = set()
    tried: set[str] = set()
    for entry in entries:
        if entry in tried:
            continue
        if len(tried) >= _MAX_TRIED:
            break
        tried.add(entry)
        kind = media_kind(entry) or default
        if kind is None:
            continue
        try:
            absolute = normalize(entry, url)
        except InvalidURL:
            continue
        if absolute not in seen:
            seen.add(absolute)
            refs.append(MediaRef(absolute, kind, "playlist"))
            if len(refs) >= MAX_ENTRIES:
                break
    return refs


def _format(body: bytes, url: str, content_type: str | None) -> _Format | None:
    head = body[:64].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith(b"#extm3u"):
        return "m3u"
    if head.startswith(b"[playlist]"):
        return "pls"
    if head.startswith(b"<?xml") or head.startswith(b"<playlist"):
        return "xspf"
    mime = (content_type or "").partition(";")[0].strip().lower()
    if mime in _FORMAT_BY_TYPE:
        return _FORMAT_BY_TYPE[mime]
    name = url.partition("#")[0].partition("?")[0].rpartition("/")[2]
    return _FORMAT_BY_EXTENSION.get(name.rpartition(".")[2].lower()) if "." in name else None


def _m3u(text: str) -> Iterator[str]:
    """Every line that is neither blank nor a comment or tag (`#EXTINF`, `#EXT-X-…`)."""
    for line in text.splitlines():
        entry = line.strip()
        if entry and not entry.startswith("#"):
            yield entry


def _pls(text: str) -> Iterator[str]:
    """The values of `FileN=` lines (`TitleN`, `LengthN` and the header are skipped)."""
    for line in text.splitlines():
        key, equals, value = line.partition("=")
        key = key.strip().lower()
        if equals and key.startswith("file") and key[4:].isdigit() and (entry := value.strip()):
            yield entry


def _xspf(body: bytes) -> list[str]:
    """The `<location>`s of the tracks, in any namespace; those before a fault if the XML is malformed.

    expat is used directly: it stops at once when a handler raises, where ElementTree's parser would go on
    through the rest of the document (expanding its entities) and report the error only at the end.
    """
    reader = _XspfReader()
    parser = ParserCreate(namespace_separator="}")
    parser.StartDoctypeDeclHandler = reader.doctype
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.data
    with suppress(ExpatError, _DoctypeRefused):
        parser.Parse(body, True)
    return reader.locations


class _XspfReader:
    """expat handlers that keep only the text of `<track><location>` elements."""

    def __init__(self) -> None:
        self.path: list[str] = []
        self.text: list[str] | None = None
        self.locations: list[str] = []

    def doctype(self, name: str, system: str | None, pubid: str | None, has_internal_subset: bool) -> None:
        raise _DoctypeRefused

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        local = tag.rpartition("}")[2]
        if local == "location" and self.path and self.path[-1] == "track":
            self.text = []
        self.path.append(local)

    def end(self, tag: str) -> None:
        self.path.pop()
        if self.text is not None:
            if location := "".join(self.text).strip():
                self.locations.append(location)
            self.text = None

    def data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)
