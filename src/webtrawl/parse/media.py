"""The generic media detector: the audio, video and playlist addresses a page shows without help.

Sites put their media in many places: links, `<audio>`/`<video>` elements, Open Graph and Twitter meta
tags, JSON-LD, and the scripts and JSON a player is configured with. Media elements, media meta tags and
JSON-LD media objects say themselves what they hold (a `type` may refine it); a link must say it by its
`type` or its extension, and an address in a script by its extension, or it is left out: pages and
scripts name countless URLs, and only those are worth a download.

Like `parse.html`, one walk gathers raw addresses in document order and resolves them afterwards against
the first `<base href>`. A hostile page cannot make the work unbounded: the script text read, the JSON-LD
nodes visited, and the addresses gathered are all capped, and the script patterns never backtrack.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from heapq import merge

from selectolax.lexbor import LexborHTMLParser

from ..errors import InvalidURL
from ..models import MediaKind, MediaRef
from ..urls import normalize

MAX_REFS = 1000
"""Media references reported for one page; the rest are ignored."""
MAX_SCRIPT_TEXT = 2 * 1024 * 1024
"""Characters of script (inline scripts and JSON together) searched on one page."""
MAX_SCRIPT_MATCHES = 10_000
"""Media-looking addresses in scripts looked at on one page (a script may repeat one a million times)."""
MAX_JSON_LD_NODES = 100_000
"""JSON objects and arrays of one JSON-LD script looked into."""
_MAX_CANDIDATES = 4 * MAX_REFS
"""Distinct raw addresses gathered before the walk stops (some fail to resolve or turn out the same)."""

AUDIO_EXTENSIONS = frozenset({"mp3", "m4a", "aac", "ogg", "oga", "opus", "flac", "wav", "wma", "aif", "aiff", "mka",
                              "weba"})  # fmt: skip
VIDEO_EXTENSIONS = frozenset({"mp4", "m4v", "webm", "mkv", "mov", "avi", "wmv", "ogv", "3gp", "flv"})
PLAYLIST_EXTENSIONS = frozenset({"m3u", "m3u8", "pls", "xspf", "mpd"})
PLAYLIST_TYPES = frozenset({"audio/x-mpegurl", "audio/mpegurl", "application/vnd.apple.mpegurl",
                            "application/x-mpegurl", "application/mpegurl", "audio/x-scpls",
                            "application/xspf+xml", "application/dash+xml"})  # fmt: skip

_KIND_BY_EXTENSION: dict[str, MediaKind] = {
    **dict.fromkeys(AUDIO_EXTENSIONS, "audio"),
    **dict.fromkeys(VIDEO_EXTENSIONS, "video"),
    **dict.fromkeys(PLAYLIST_EXTENSIONS, "playlist"),
}
_NOT_MEDIA_TYPES = ("text/html", "application/xhtml+xml", "image/")
"""Content types that say a response is not a media file whatever its name (an error or landing page).
Other types that are not media (octet-stream, text/plain as servers send for .m3u) leave it to the name."""

_EXTENSION_HINT = re.compile(
    rf"\.(?:{'|'.join(sorted(_KIND_BY_EXTENSION, key=len, reverse=True))})(?=[?#]|\s*$)", re.IGNORECASE
)
"""Somewhere a media extension ends a path: rules out most addresses at C speed (a page may have 100,000)."""
_AUTHORITY = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:/*[^/]*|//[^/]*")
_ESCAPE = re.compile(r"\\{1,2}(?:u([0-9a-fA-F]{4})|/)")
_ESCAPED = r"\\{1,2}(?:/|u[0-9a-fA-F]{4})"
"""JSON's `\\/` and `\\u002F`, and the same escaped once more (JSON in a JavaScript string)."""
_SLASH = r"(?:\\{0,2}/|\\{1,2}u002[fF])"
_QUERY = rf"""(?:[?#](?:[^\s"'`<>\\]|{_ESCAPED}){{0,2048}}+)?"""
_EXTENSION_LOOKBEHIND = "|".join(
    rf"(?<=\.(?:{'|'.join(sorted(exts))}))"
    for exts in ({e for e in _KIND_BY_EXTENSION if len(e) == n} for n in {len(e) for e in _KIND_BY_EXTENSION})
)
"""The path ends in a media extension: one look-behind per extension length, as each must have a fixed width."""
_ABSOLUTE_MEDIA_URL = re.compile(
    rf"""http(?<!blob:http)s?:{_SLASH}{_SLASH}(?:[^\s"'`<>()\[\]{{}}|^,&:?#\\]|:\d|{_ESCAPED}){{1,2048}}+"""
    rf"(?i:{_EXTENSION_LOOKBEHIND}){_QUERY}"
)
"""An http(s) media URL anywhere in a script, escaped or not, also inside another string (`"file=https://…"`),
except after `blob:` (a blob lives only in the page that made it).
A pattern that starts with a literal "http" is searched for four times faster, so only the extension ignores
case and `blob:` is looked for behind the "http".
The repetitions are possessive, so nothing is tried twice, and a colon (but a port's) ends the path, so a
failed match never runs over the next `http:`: time stays in proportion to the script's length."""
_QUOTED_MEDIA = re.compile(
    rf"""(["'`])([^"'`\s<>{{}}|^*?#]{{1,2048}}+(?:{_EXTENSION_LOOKBEHIND}){_QUERY})\1""",
    re.IGNORECASE,
)
"""A quoted string whose path ends in a media extension ("/files/a.ogg", "a.mp3?x=1"): relative addresses
in scripts are taken only in this form. A failed match runs at most to the next quote."""

_OG_GROUPS: dict[str, tuple[str, MediaKind]] = {
    "og:audio": ("og:audio", "audio"),
    "og:audio:url": ("og:audio", "audio"),
    "og:audio:secure_url": ("og:audio", "audio"),
    "og:video": ("og:video", "video"),
    "og:video:url": ("og:video", "video"),
    "og:video:secure_url": ("og:video", "video"),
    "twitter:player:stream": ("twitter:player:stream", "video"),
}
"""Meta properties that name a media address: the object they belong to and the kind assumed without a type."""
_OG_TYPES = {"og:audio:type": "og:audio", "og:video:type": "og:video",
             "twitter:player:stream:content_type": "twitter:player:stream"}  # fmt: skip
_LD_TYPES: dict[str, MediaKind | None] = {"AudioObject": "audio", "MusicRecording": "audio", "VideoObject": "video",
                                          "MediaObject": None}  # fmt: skip
"""JSON-LD types whose `contentUrl` is a media file, with its kind (None: only its extension can tell)."""

_ELEMENT_KINDS: dict[str, MediaKind] = {"audio": "audio", "video": "video"}
_TYPE_NAME = re.compile(r"[/:#]")

_SELECTOR = "base[href],a[href],link[href],audio,video,source,track[src],meta[content],script"


def media_kind(url: str, content_type: str | None = None) -> MediaKind | None:
    """What `url` holds, by its Content-Type when that names a media or playlist type, else by its extension.

    A document or image type (`text/html`, `image/*`) means it is no media file whatever its name says.
    """
    if content_type:
        mime = content_type.partition(";")[0].strip().lower()
        kind = _type_kind(mime)
        if kind is not None:
            return kind
        if mime.startswith(_NOT_MEDIA_TYPES):
            return None
    return _extension_kind(url)


def sniff_kind(head: bytes) -> MediaKind | None:
    """What a response's first bytes say it holds, for servers that send media as octet-stream."""
    if head.startswith((b"ID3", b"fLaC", b"OggS")) or head[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf1"):
        return "audio"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio"
    if head[4:8] == b"ftyp" or head.startswith(b"\x1a\x45\xdf\xa3"):  # MP4 family, Matroska/WebM
        return "video"
    if len(head) > 188 and head[0] == head[188] == 0x47:  # MPEG-TS
        return "video"
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"#EXTM3U") or b"<MPD" in head[:512]:
        return "playlist"
    return None


def _type_kind(mime: str) -> MediaKind | None:
    if mime in PLAYLIST_TYPES:
        return "playlist"
    if mime.startswith("audio/"):
        return "audio"
    if mime.startswith("video/"):
        return "video"
    return None


def _extension_kind(url: str) -> MediaKind | None:
    """The kind named by the extension of the last path segment (query and fragment ignored); `.mp3` alone
    is a name without an extension."""
    if _EXTENSION_HINT.search(url) is None:
        return None
    path = url.partition("#")[0].partition("?")[0].strip()
    if "/" in path and (authority := _AUTHORITY.match(path)):
        path = path[authority.end() :]
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    return None if dot <= 0 else _KIND_BY_EXTENSION.get(name[dot + 1 :].lower())


def _element_kind(url: str, mime: str | None, default: MediaKind) -> MediaKind:
    """An element's (or JSON-LD object's) own kind, unless its type or a playlist extension says otherwise.

    A container's extension is not trusted over the element: `.webm` in `<audio>` and `.ogg` in `<video>`
    are common and right.
    """
    kind = _type_kind(mime.partition(";")[0].strip().lower()) if mime else None
    if kind is None and _extension_kind(url) == "playlist":
        return "playlist"
    return kind or default


@dataclass(slots=True)
class _Found:
    raw: str
    kind: MediaKind | None
    found_by: str


@dataclass(slots=True)
class _Scan:
    """Raw addresses in document order, before any is resolved."""

    wanted: frozenset[str]
    found: list[_Found] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    base: str | None = None
    script_budget: int = MAX_SCRIPT_TEXT
    match_budget: int = MAX_SCRIPT_MATCHES
    og_objects: dict[str, list[_Found]] = field(default_factory=dict)

    @property
    def full(self) -> bool:
        return len(self.found) >= _MAX_CANDIDATES

    def add(self, raw: str | None, kind: MediaKind | None, found_by: str) -> _Found | None:
        if not raw or kind not in self.wanted or raw in self.seen or self.full:
            return None
        self.seen.add(raw)
        item = _Found(raw, kind, found_by)
        self.found.append(item)
        return item


def find_media(html: str, page_url: str, kinds: frozenset[str]) -> list[MediaRef]:
    """The media references of a page fetched from `page_url`, for the wanted `kinds` ("audio", "video").

    Playlists are reported whenever some kind is wanted. References come back absolute, normalized,
    deduplicated (the first finding wins) and in document order; addresses that are not http(s) (data:,
    blob:, javascript:) or do not parse are left out.
    """
    if not kinds:
        return []
    scan = _Scan(frozenset(kinds) | {"playlist"})
    for node in LexborHTMLParser(html).css(_SELECTOR):
        if scan.full:
            break
        tag = node.tag
        attrs = node.attributes
        if tag == "a" or tag == "link":
            href = attrs.get("href")
            if href and href not in scan.seen:  # checked first: a page may repeat one link 100,000 times
                scan.add(href, media_kind(href, attrs.get("type")), "link")
        elif tag == "audio" or tag == "video":
            # Players that load lazily keep the address in `data-src` until the element is shown.
            if src := attrs.get("src") or attrs.get("data-src"):
                scan.add(src, _element_kind(src, None, _ELEMENT_KINDS[tag]), tag)
        elif tag == "source" or tag == "track":
            parent = node.parent
            parent_kind = _ELEMENT_KINDS.get(parent.tag or "") if parent is not None else None
            if parent_kind is None:  # a `<source>` in a `<picture>` is an image
                continue
            if tag == "track":
                scan.add(attrs.get("src"), parent_kind, "track")
            elif src := attrs.get("src") or attrs.get("data-src"):
                scan.add(src, _element_kind(src, attrs.get("type"), parent_kind), "source")
        elif tag == "meta":
            _meta(attrs, scan)
        elif tag == "script":
            _script(node.text(), (attrs.get("type") or "").strip().lower(), scan)
        elif tag == "base" and scan.base is None:
            scan.base = attrs.get("href")
    return _resolve(scan, page_url)


def _meta(attrs: dict[str, str | None], scan: _Scan) -> None:
    """Open Graph and Twitter media: an `og:video:type` after an `og:video` says what the video is, and a
    player page (`text/html`, flash) is dropped."""
    name = (attrs.get("property") or attrs.get("name") or "").strip().lower()
    content = (attrs.get("content") or "").strip()
    if name in _OG_GROUPS:
        group, default = _OG_GROUPS[name]
        if name == group:  # the root property starts a new object; its structured properties follow it
            scan.og_objects[group] = []
        item = scan.add(content, _extension_kind(content) or default, "og")
        if item is not None:
            scan.og_objects.setdefault(group, []).append(item)
    elif name in _OG_TYPES and content:
        for item in scan.og_objects.get(_OG_TYPES[name], ()):
            item.kind = media_kind(item.raw, content)


def _script(text: str, script_type: str, scan: _Scan) -> None:
    if scan.script_budget <= 0 or not text:
        return
    text = text[: scan.script_budget]
    scan.script_budget -= len(text)
    if script_type == "application/ld+json":
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            pass
        else:
            for raw, kind in _json_ld(data):
                scan.add(raw, kind, "json-ld")
    for raw in _script_urls(text):
        scan.match_budget -= 1
        if scan.match_budget < 0 or scan.full:
            break
        scan.add(raw, _extension_kind(raw), "script")


def _script_urls(text: str) -> Iterator[str]:
    """Media-looking addresses in a script's text, unescaped, in the order they appear."""
    absolute = ((m.start(), m.group()) for m in _ABSOLUTE_MEDIA_URL.finditer(text))
    quoted = ((m.start(2), m.group(2)) for m in _QUOTED_MEDIA.finditer(text))
    for _, raw in merge(absolute, quoted):
        yield _ESCAPE.sub(_unescape, raw) if "\\" in raw else raw


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    return chr(int(code, 16)) if code else "/"


def _json_ld(data: object) -> Iterator[tuple[str, MediaKind | None]]:
    """`contentUrl`s of media objects anywhere in the data (`@graph`, lists, nested `audio`, `track` …), and
    `embedUrl`s that are media by their extension; an `embedUrl` is usually a player page."""
    stack = [data]
    visited = 0
    while stack and visited < MAX_JSON_LD_NODES:
        item = stack.pop()
        visited += 1
        if isinstance(item, list):
            stack.extend(value for value in reversed(item) if isinstance(value, dict | list))
            continue
        if not isinstance(item, dict):
            continue
        types = item.get("@type")
        for name in types if isinstance(types, list) else [types]:
            if not isinstance(name, str) or (local := _TYPE_NAME.split(name)[-1]) not in _LD_TYPES:
                continue
            default = _LD_TYPES[local]
            mime = item.get("encodingFormat")
            for url in _strings(item.get("contentUrl")):
                kind = _element_kind(url, mime if isinstance(mime, str) else None, default) if default else None
                yield url, kind or _extension_kind(url)
            for url in _strings(item.get("embedUrl")):
                yield url, _extension_kind(url)
            break
        stack.extend(value for value in reversed(item.values()) if isinstance(value, dict | list))


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _resolve(scan: _Scan, page_url: str) -> list[MediaRef]:
    base = page_url
    if scan.base is not None:
        with suppress(InvalidURL):  # a base that does not parse is ignored, as browsers do
            base = normalize(scan.base, page_url)
    refs: list[MediaRef] = []
    seen: set[str] = set()
    for item in scan.found:
        if item.kind is None or item.kind not in scan.wanted:  # an og object's type said otherwise
            continue
        try:
            url = normalize(item.raw, base)
        except InvalidURL:
            continue
        if url not in seen:
            seen.add(url)
            refs.append(MediaRef(url, item.kind, item.found_by))
            if len(refs) >= MAX_REFS:
                break
    return refs
