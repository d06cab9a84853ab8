"""`--mirror`: every page also saved as a plain file, laid out the way `wget -r -E` lays out a site.

    http://example.com/             → example.com/index.html
    http://example.com:8080/a/b     → example.com+8080/a/b.html          (HTML: `.html` appended)
    http://example.com/list?p=2     → example.com/list?p=2.html          (query kept, wget style)
    http://example.com/a%20b.txt    → example.com/a b.txt                (escapes decoded…)
    http://example.com/x?q=a%2Fb    → example.com/x?q=a%2Fb.html         (…except where unsafe)

A name is made safe for any POSIX file system: `/`, NUL and control characters are percent-escaped,
`.` and `..` segments are escaped so nothing lands outside the mirror, empty segments are dropped, and a
name longer than `MAX_NAME` bytes is cut and given a hash suffix (keeping its extension).

A file and a directory cannot share a name, yet `/a` and `/a/b` both exist on some sites. HTML rarely
meets this, because `/a` is stored as `a.html`; for the rest one rule applies: the directory wins and the
file goes inside it as `index.html`, whichever of the two arrives first. (If the site also has `/a/`,
both want `a/index.html`; the one written last is kept.)

The WARC files are the archive; the mirror is a convenience for browsing and is not part of the commit
order: a crash may leave a file of a page that is fetched again on resume, and rewritten.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from ..errors import StoreError

MAX_NAME = 200
"""Bytes per file name; file systems allow 255, and wget's `.1`-style or `.html` suffixes need room."""

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
DIRECTORY_INDEX = "index.html"

_UNSAFE = re.compile(r"[/\x00-\x1f\x7f]")
_HTML_NAME = re.compile(r"\.html?$", re.IGNORECASE)


def _escape(match: re.Match[str]) -> str:
    return f"%{ord(match[0]):02X}"


def _decode(text: str) -> str:
    """Percent-escapes decoded, as wget does, unless they do not form UTF-8 (then kept as they are)."""
    if "%" not in text:
        return text
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        return text


def safe_name(name: str) -> str:
    """`name` as one file name that is safe on any POSIX file system (see above)."""
    name = _UNSAFE.sub(_escape, name)
    if name in (".", ".."):
        return name.replace(".", "%2E")
    encoded = name.encode("utf-8", "surrogateescape")
    if len(encoded) <= MAX_NAME:
        return name
    stem, ext = os.path.splitext(name)
    if len(ext) > 12:  # not an extension worth keeping
        ext = ""
    digest = hashlib.sha1(encoded).hexdigest()[:12]
    room = MAX_NAME - len(ext.encode("utf-8", "surrogateescape")) - len(digest) - 1
    cut = stem.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "ignore")
    return f"{cut}~{digest}{ext}"


def mirror_path(url: str, content_type: str) -> PurePosixPath:
    """Where a page of `url` with this Content-Type goes, relative to the mirror directory."""
    parts = urlsplit(url)
    host = (parts.hostname or "unknown-host").lower()
    if ":" in host:  # IPv6 literal: keep the brackets it had in the URL
        host = f"[{host}]"
    if parts.port is not None:
        host += f"+{parts.port}"
    segments = [_decode(segment) for segment in parts.path.split("/")]
    name = segments.pop() or DIRECTORY_INDEX
    if parts.query:
        name += "?" + _decode(parts.query)
    if content_type.split(";", 1)[0].strip().lower() in HTML_TYPES and not _HTML_NAME.search(name):
        name += ".html"
    dirs = [safe_name(segment) for segment in segments if segment]
    return PurePosixPath(safe_name(host), *dirs, safe_name(name))


class Mirror:
    """Writes pages under `directory` (`DIR/mirror`) at the paths `mirror_path` gives. Blocking calls."""

    def __init__(self, directory: Path) -> None:
        self._root = Path(directory)

    def write(self, url: str, content_type: str, body: bytes) -> Path:
        """Save `body` (as received) for `url`; return the path of the file written."""
        relative = mirror_path(url, content_type)
        path = self._root.joinpath(*relative.parts)
        try:
            self._make_parents(path)
            if path.is_dir():
                path = path / DIRECTORY_INDEX
            path.write_bytes(body)
        except OSError as exc:
            raise StoreError(f"cannot write the mirror file {path}: {exc.strerror or exc}") from exc
        return path

    def _make_parents(self, path: Path) -> None:
        """Create the directories above `path`, moving any file that stands in the way into its directory."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return
        except (FileExistsError, NotADirectoryError):
            pass
        current = self._root
        for part in path.relative_to(self._root).parts[:-1]:
            current = current / part
            if current.is_file():
                aside = current.with_name(current.name + ".webtrawl-moving")
                current.rename(aside)
                current.mkdir()
                aside.rename(current / DIRECTORY_INDEX)
        path.parent.mkdir(parents=True, exist_ok=True)
