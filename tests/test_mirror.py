"""The plain-file mirror: where each URL lands, and that nothing lands outside the mirror directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from webtrawl.errors import StoreError
from webtrawl.store.mirror import MAX_NAME, Mirror

HTML = "text/html; charset=utf-8"

PATHS = [
    # (url, content type, path under the mirror directory)
    ("http://example.com", HTML, "example.com/index.html"),
    ("http://example.com/", HTML, "example.com/index.html"),
    ("http://example.com/a/", HTML, "example.com/a/index.html"),
    ("http://example.com/a/b", HTML, "example.com/a/b.html"),
    ("http://example.com/a/b.html", HTML, "example.com/a/b.html"),
    ("http://example.com/a/b.HTM", HTML, "example.com/a/b.HTM"),
    ("http://example.com/page.php", HTML, "example.com/page.php.html"),
    ("http://example.com/page.xhtml", "application/xhtml+xml", "example.com/page.xhtml.html"),
    ("http://example.com/notes.txt", "text/plain", "example.com/notes.txt"),
    ("http://example.com/data", "", "example.com/data"),
    ("http://example.com/list?p=2", HTML, "example.com/list?p=2.html"),
    ("http://example.com/?p=2", HTML, "example.com/index.html?p=2.html"),
    ("http://example.com/a.html?p=2", HTML, "example.com/a.html?p=2.html"),
    ("http://example.com/x?q=a%2Fb", "text/plain", "example.com/x?q=a%2Fb"),
    ("http://example.com/x?q=a/b", "text/plain", "example.com/x?q=a%2Fb"),
    ("http://example.com/a%20b.txt", "text/plain", "example.com/a b.txt"),
    ("http://example.com/caf%C3%A9/", HTML, "example.com/café/index.html"),
    ("http://example.com/bad%FFutf8", "text/plain", "example.com/bad%FFutf8"),
    ("http://example.com/a%2Fb", "text/plain", "example.com/a%2Fb"),
    ("http://example.com/%2E%2E/%2E%2E/etc/passwd", "text/plain", "example.com/%2E%2E/%2E%2E/etc/passwd"),
    ("http://example.com/%2E/x", "text/plain", "example.com/%2E/x"),
    ("http://example.com/nul%00byte", "text/plain", "example.com/nul%00byte"),
    ("http://example.com/tab%09and%0Anewline", "text/plain", "example.com/tab%09and%0Anewline"),
    ("http://example.com/a//b", "text/plain", "example.com/a/b"),
    ("http://example.com/frag#part", "text/plain", "example.com/frag"),
    ("http://Example.COM:8080/p", HTML, "example.com+8080/p.html"),
    ("http://user:secret@example.com/p", "text/plain", "example.com/p"),
    ("http://[::1]:8080/p", "text/plain", "[::1]+8080/p"),
    ("http://127.0.0.1/p", "text/plain", "127.0.0.1/p"),
    ("https://example.com/p", "text/plain", "example.com/p"),
]


@pytest.mark.parametrize(("url", "content_type", "expected"), PATHS)
def test_url_to_path(tmp_path: Path, url: str, content_type: str, expected: str) -> None:
    written = Mirror(tmp_path).write(url, content_type, b"body of " + url.encode())
    assert written == tmp_path / expected
    assert written.read_bytes() == b"body of " + url.encode()


@pytest.mark.parametrize(
    ("url", "content_type", "suffix"),
    [
        ("http://example.com/" + "x" * 300, "text/plain", ""),
        ("http://example.com/" + "x" * 300 + ".pdf", "application/pdf", ".pdf"),
        ("http://example.com/" + "x" * 300, HTML, ".html"),
        ("http://example.com/p?" + "q=1&" * 100, HTML, ".html"),
        ("http://example.com/" + "é" * 150, "text/plain", ""),
        ("http://example.com/" + "d" * 300 + "/index", "text/plain", ""),
    ],
)
def test_long_names_are_cut_with_a_hash(tmp_path: Path, url: str, content_type: str, suffix: str) -> None:
    mirror = Mirror(tmp_path)
    written = mirror.write(url, content_type, b"long")
    other = mirror.write(url.replace("x", "y").replace("é", "è").replace("q=1", "q=2"), content_type, b"other")
    assert written.read_bytes() == b"long" and written != other
    for part in written.relative_to(tmp_path).parts:
        assert len(part.encode()) <= MAX_NAME
    assert written.name.endswith(suffix)
    assert "~" in str(written.relative_to(tmp_path))


@pytest.mark.parametrize("file_first", [True, False])
def test_a_file_and_a_directory_of_the_same_name(tmp_path: Path, file_first: bool) -> None:
    mirror = Mirror(tmp_path)
    writes = [("http://example.com/a", b"file a"), ("http://example.com/a/b/c", b"file c")]
    for url, body in writes if file_first else reversed(writes):
        mirror.write(url, "text/plain", body)
    assert (tmp_path / "example.com/a/index.html").read_bytes() == b"file a"
    assert (tmp_path / "example.com/a/b/c").read_bytes() == b"file c"


def test_a_file_deep_in_the_way_is_moved_too(tmp_path: Path) -> None:
    mirror = Mirror(tmp_path)
    mirror.write("http://example.com/a/b", "text/plain", b"b")
    mirror.write("http://example.com/a/b/c/d", "text/plain", b"d")
    assert (tmp_path / "example.com/a/b/index.html").read_bytes() == b"b"
    assert (tmp_path / "example.com/a/b/c/d").read_bytes() == b"d"


def test_html_pages_do_not_clash_with_their_children(tmp_path: Path) -> None:
    mirror = Mirror(tmp_path)
    assert mirror.write("http://example.com/a", HTML, b"a") == tmp_path / "example.com/a.html"
    assert mirror.write("http://example.com/a/b", HTML, b"b") == tmp_path / "example.com/a/b.html"
    assert (tmp_path / "example.com/a.html").read_bytes() == b"a"


def test_rewriting_a_page_replaces_it(tmp_path: Path) -> None:
    mirror = Mirror(tmp_path)
    mirror.write("http://example.com/", HTML, b"old")
    path = mirror.write("http://example.com/", HTML, b"new")
    assert path.read_bytes() == b"new"


def test_nothing_escapes_the_mirror_directory(tmp_path: Path) -> None:
    root = tmp_path / "mirror"
    mirror = Mirror(root)
    for url in ("http://example.com/%2E%2E/%2E%2E/x", "http://example.com/../../y", "http://%2E%2E/z"):
        assert mirror.write(url, "text/plain", b"").resolve().is_relative_to(root.resolve())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mirror"]


def test_an_unwritable_mirror_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "mirror").write_bytes(b"a file, not a directory")
    with pytest.raises(StoreError, match="cannot write the mirror file"):
        Mirror(tmp_path / "mirror" / "sub").write("http://example.com/", HTML, b"")
