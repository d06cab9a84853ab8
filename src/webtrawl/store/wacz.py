"""`webtrawl export DIR --format wacz -o FILE`: the crawl as one WACZ file, the package ReplayWeb.page and
pywb open and archives share (WARC files, a CDXJ index, a pages list and `datapackage.json` with every
file's digest).

The package is made by Webrecorder's own `wacz` library, so that what other tools check is what they
expect: it indexes the WARC files itself and writes the index, the digests and the package description.
webtrawl gives it the crawl's WARC files and its pages list: one line per URL fetched as an HTML page with
status 200 (its latest capture: URL, time and title), which replay tools show as the archive's entry points.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

from ..errors import StoreError
from .crawls import crawl_id_of
from .export import iso_time
from .index import TITLE
from .replay import WARC_DIR, record_path

_PAGES = f"""
    SELECT c.url, c.fetched_at, {TITLE} FROM captures c
    WHERE c.id IN (
        SELECT MAX(id) FROM captures WHERE crawl_id = ? AND status = 200 AND warc_file IS NOT NULL
        AND content_type IN ('text/html', 'application/xhtml+xml') GROUP BY fp
    )
    ORDER BY c.id
"""
_WARC_FILES = """
    SELECT warc_file FROM captures WHERE crawl_id = ?1 AND warc_file IS NOT NULL
    UNION SELECT warc_file FROM resources WHERE crawl_id = ?1
    UNION SELECT name FROM warc_files WHERE crawl_id = ?1
"""


def export_wacz(conn: sqlite3.Connection, directory: Path, crawl: str, output: Path) -> int:
    """Write crawl `crawl` of `directory` to the WACZ file `output`; return how many pages it lists.

    StoreError when the `wacz` package is missing, when a WARC file of the crawl is not in `DIR/warc` (a
    distributed crawl's nodes keep theirs: copy them there first), when the crawl has no WARC file, or
    when one is damaged; then nothing is left at `output`. Only what the crawl committed is packaged.
    """
    try:
        from wacz.main import main as wacz_main
    except ImportError:
        raise StoreError("WACZ export needs the wacz package: pip install 'webtrawl[wacz]'") from None
    crawl_id = crawl_id_of(conn, crawl)
    names = sorted(name for (name,) in conn.execute(_WARC_FILES, (crawl_id,)))
    if not names:
        raise StoreError(f"crawl {crawl!r} has archived nothing yet: no WARC file to package")
    warcs = [record_path(directory, name) for name in names]
    missing = [name for name, path in zip(names, warcs, strict=True) if path is None]
    if missing:
        raise StoreError(
            f"{len(missing)} WARC file(s) of crawl {crawl!r} are not in {directory / WARC_DIR} "
            f"(first: {missing[0]}); a distributed crawl's nodes keep theirs: copy them there"
        )
    ends = dict(conn.execute("SELECT name, committed_end FROM warc_files WHERE crawl_id = ?", (crawl_id,)))
    partial = output.with_name(output.name + ".part")
    with tempfile.TemporaryDirectory() as scratch:
        inputs = [_committed(path, ends.get(path.name), Path(scratch)) for path in warcs if path is not None]
        pages = Path(scratch) / "pages.jsonl"
        count = _write_pages(conn, crawl_id, pages)
        arguments = ["create", *map(str, inputs), "-o", str(partial), "-p", str(pages), "--copy-pages"]
        arguments += ["--title", crawl]
        chatter = io.StringIO()  # the library reports its progress on stdout, which may be the user's pipe
        try:
            with contextlib.redirect_stdout(chatter):
                failure = chatter.getvalue().strip()[-300:] if wacz_main(arguments) else None
        except Exception as exc:  # a damaged WARC file, as the library's reader says it
            failure = f"{type(exc).__name__}: {exc}"
        if failure is not None:
            partial.unlink(missing_ok=True)
            raise StoreError(f"the wacz library could not package the crawl: {failure}")
    partial.replace(output)
    return count


def _committed(path: Path, end: int | None, scratch: Path) -> Path:
    """`path`, or a copy of its committed part: a running crawl, or one killed and not resumed yet, has
    records past the end its database knows, possibly half written."""
    if end is None or path.stat().st_size <= end:
        return path
    copy = scratch / path.name
    shutil.copyfile(path, copy)
    os.truncate(copy, end)
    return copy


def _write_pages(conn: sqlite3.Connection, crawl_id: int, path: Path) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}) + "\n")
        for url, fetched_at, title in conn.execute(_PAGES, (crawl_id,)):
            page = {"url": url, "ts": iso_time(fetched_at), "title": title or url}
            out.write(json.dumps(page, ensure_ascii=False) + "\n")
            count += 1
    return count
