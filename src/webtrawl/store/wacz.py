"""`webtrawl export DIR --format wacz -o FILE`: the crawl as one WACZ file, the package ReplayWeb.page and
pywb open and archives share (WARC files, a CDXJ index, a pages list and `datapackage.json` with every
file's digest).

The package is made by Webrecorder's own `wacz` library, so that what other tools check is what they
expect: it indexes the WARC files itself and writes the index, the digests and the package description.
webtrawl gives it the crawl's WARC files (a distributed crawl's from every shard's directory) and its pages
list: one line per URL fetched as an HTML page with
status 200 (its latest capture: URL, time and title), which replay tools show as the archive's entry points.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import StoreError
from .export import iso_time
from .index import TITLE
from .replay import WARC_DIR, record_path
from .shards import Source

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


def export_wacz(sources: Sequence[Source], crawl: str, output: Path) -> int:
    """Write crawl `crawl`, read from `sources` (an embedded crawl's database, or a distributed crawl's
    shards, each with its WARC files in its directory), to the WACZ file `output`; return how many pages it
    lists.

    StoreError when the `wacz` package is missing, when a WARC file of the crawl is not in its source's
    `warc/` directory, when the crawl has no WARC file, or when one is damaged; then nothing is left at
    `output`. Only what the crawl committed is packaged.
    """
    try:
        from wacz.main import main as wacz_main
    except ImportError:
        raise StoreError("WACZ export needs the wacz package: pip install 'webtrawl[wacz]'") from None
    files: list[tuple[Path, int | None]] = []
    for source in sources:
        names = sorted(name for (name,) in source.conn.execute(_WARC_FILES, (source.crawl_id,)))
        missing = [name for name in names if record_path(source.directory, name) is None]
        if missing:
            raise StoreError(
                f"{len(missing)} WARC file(s) of crawl {crawl!r} are not in {source.directory / WARC_DIR} "
                f"(first: {missing[0]})"
            )
        ends = dict(
            source.conn.execute("SELECT name, committed_end FROM warc_files WHERE crawl_id = ?", (source.crawl_id,))
        )
        files += [(path, ends.get(name)) for name in names if (path := record_path(source.directory, name))]
    if not files:
        raise StoreError(f"crawl {crawl!r} has archived nothing yet: no WARC file to package")
    partial = output.with_name(output.name + ".part")
    with tempfile.TemporaryDirectory() as scratch:
        inputs = [_committed(path, end, Path(scratch)) for path, end in files]
        pages = Path(scratch) / "pages.jsonl"
        count = _write_pages(sources, pages)
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


def _write_pages(sources: Sequence[Source], path: Path) -> int:
    """The pages list: each URL's latest page, whichever source holds it, in fetch order."""
    latest: dict[str, tuple[float, str | None]] = {}
    for source in sources:
        for url, fetched_at, title in source.conn.execute(_PAGES, (source.crawl_id,)):
            if url not in latest or fetched_at > latest[url][0]:
                latest[url] = (fetched_at, title)
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}) + "\n")
        for url, (fetched_at, title) in sorted(latest.items(), key=lambda item: item[1][0]):
            page = {"url": url, "ts": iso_time(fetched_at), "title": title or url}
            out.write(json.dumps(page, ensure_ascii=False) + "\n")
    return len(latest)
