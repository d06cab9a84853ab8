"""`webtrawl export DIR --format jsonl|csv|cdxj`: the captures of one crawl, streamed to a text file.

A crawl is read as a list of sources (`store.shards.Source`): an embedded crawl's database, or the shards
of a distributed crawl, merged. JSONL and CSV give one row per capture in capture order (of several sources,
merged by fetch time), with the fields in `FIELDS`:

- `final_url`: where a redirect leads, followed through the latest capture of each target for at most
  `MAX_HOPS` hops; a loop stops where it closes (`/a` → `/b` → `/a` gives `/a`). For a capture that is
  not a redirect, the URL itself.
- `depth`: the URL's depth in the crawl (the smallest it was found at).
- `fetched_at`: ISO 8601 in UTC, to the second (`2024-05-01T12:00:00Z`).
- `redirects`: the URLs that redirected to this one, first first (a list in JSONL; space-separated in CSV,
  as URLs have no spaces). Missing values are `null` in JSONL and empty in CSV.
- `node`: in a distributed crawl, the node that fetched it (its WARC file is in that node's directory).
- `truncated`: why the body is incomplete, as WARC-Truncated says it ("length", "time", "disconnect"), or
  "not-downloaded": a non-HTML body the crawl did not fetch (a 2xx then has no WARC record to replay).

`--media` writes the media index instead (JSONL or CSV): one row per media task that ended, with the fields
of `MEDIA_FIELDS` (`path` is relative to the crawl directory; a duplicate has none and names the task whose
file has the same content; a failure has its reason in `error`).

CDXJ is the index replay tools (pywb and others) read: one line per response record (every capture with a
WARC record, and the robots.txt, sitemap and rendered pages' request responses of `resources`),
`<SURT> <yyyymmddhhmmss> {json}`, sorted by SURT then time, values written as `cdxj-indexer` writes them
(strings; digest without its `sha1:` prefix; a rendered page's POST keyed and named by its method and body,
`store.replaykey`). SQLite sorts each source (spilling to disk when large) and
the sources are merged in order, so no export holds more than one row a source in memory, however big the
crawl.
"""

from __future__ import annotations

import csv
import heapq
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, fields
from functools import lru_cache
from typing import Any, Literal, TextIO

from ..errors import InvalidURL, StoreError
from ..models import MediaFile
from ..urls import fingerprint, normalize, surt
from .index import TITLE
from .media import media_rows
from .replaykey import lookup_url
from .shards import Source

Format = Literal["jsonl", "csv", "cdxj"]

FIELDS = (
    "url", "final_url", "status", "content_type", "size", "title", "depth", "fetched_at", "warc_file",
    "warc_offset", "warc_length", "payload_digest", "truncated", "error", "redirects", "node",
)  # fmt: skip
MAX_HOPS = 10
MEDIA_FIELDS = tuple(f.name for f in fields(MediaFile))

# `+c.crawl_id` keeps SQLite from using the (crawl_id, fp) index: walking the table in id order streams
# rows from the first one, where the index would need every row sorted by id first.
_ROWS = f"""
    SELECT c.url, c.location, c.status, c.content_type, c.size, {TITLE}, u.depth, c.fetched_at, c.warc_file,
           c.warc_offset, c.warc_length, c.payload_digest, c.truncated, c.error, c.redirects, c.node
    FROM captures c LEFT JOIN urls u ON u.crawl_id = c.crawl_id AND u.fp = c.fp
    WHERE +c.crawl_id = ? ORDER BY c.id
"""
_LATEST = """
    SELECT fetched_at, status, location FROM captures WHERE crawl_id = ? AND fp = ?
    ORDER BY fetched_at DESC, id DESC LIMIT 1
"""
# Every response record: the captures', and those of `resources` (the robots.txt and sitemaps the crawl read,
# the requests of rendered pages), under the URL their record names. The records webtrawl makes of a rendered
# page (its DOM, its thumbnail: no status) are found through their page, not listed.
_CDXJ_ROWS = """
    SELECT webtrawl_surt(url) AS key, fetched_at, url, content_type, status, payload_digest, warc_length,
           warc_offset, warc_file, 'GET', ''
    FROM captures WHERE crawl_id = ?1 AND warc_file IS NOT NULL
    UNION ALL
    SELECT webtrawl_surt(webtrawl_lookup_url(target, method, request_query)), fetched_at, target, content_type,
           status, payload_digest, warc_length, warc_offset, warc_file, method, request_query
    FROM resources WHERE crawl_id = ?1 AND status IS NOT NULL
    ORDER BY key, fetched_at, warc_file, warc_offset
"""


def export(sources: Sequence[Source], fmt: Format, out: TextIO) -> int:
    """Write the captures of the crawl in `sources` to `out` in `fmt`; return how many rows were written."""
    writers: dict[str, Callable[[Sequence[Source], TextIO], int]] = {
        "jsonl": _jsonl,
        "csv": _csv,
        "cdxj": _cdxj,
    }
    if fmt not in writers:
        raise ValueError(f"unknown export format {fmt!r} (known: {', '.join(writers)})")
    return writers[fmt](sources, out)


def export_media(sources: Sequence[Source], fmt: Format, out: TextIO) -> int:
    """Write the media index of the crawl in `sources` to `out` as JSONL or CSV; return how many rows were written."""
    if fmt not in ("jsonl", "csv"):
        raise StoreError("the media index exports as jsonl or csv")
    writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
    if writer is not None:
        writer.writerow(MEDIA_FIELDS)
    count = 0
    for source in sources:
        for media in media_rows(source.conn, source.crawl_id):
            row = asdict(media)
            row["fetched_at"] = iso_time(row["fetched_at"])
            if writer is None:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
            else:
                writer.writerow(row.values())
            count += 1
    return count


def iso_time(timestamp: float) -> str:
    """A time as exports and `show` write it: ISO 8601 in UTC, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


def capture_rows(sources: Sequence[Source]) -> Iterator[dict[str, Any]]:
    """Capture rows in capture order (of several sources, merged by fetch time), as dicts keyed by FIELDS."""
    final_url = _redirect_resolver(sources)
    rows = heapq.merge(*(s.conn.execute(_ROWS, (s.crawl_id,)) for s in sources), key=lambda row: row[7])
    for url, location, status, *rest in rows:
        row = dict(zip(FIELDS, (url, url, status, *rest), strict=True))
        if location and status is not None and 300 <= status < 400:
            row["final_url"] = final_url(location)
        row["fetched_at"] = iso_time(row["fetched_at"])
        row["redirects"] = json.loads(row["redirects"]) if row["redirects"] else []
        yield row


def _redirect_resolver(sources: Sequence[Source]) -> Callable[[str], str]:
    """`final_url(location)`: where a chain of redirects starting at `location` ends (its captures may be in
    any source).

    Answers are remembered for the most recent targets, since many pages often redirect to the same one.
    """

    def latest(url: str) -> tuple[int | None, str | None] | None:
        try:
            fp = fingerprint(normalize(url))
        except InvalidURL:
            return None
        found = [row for s in sources if (row := s.conn.execute(_LATEST, (s.crawl_id, fp)).fetchone())]
        return max(found, key=lambda row: row[0])[1:] if found else None

    @lru_cache(maxsize=4096)
    def final_url(location: str) -> str:
        current, seen = location, {location}
        for _ in range(MAX_HOPS - 1):
            found = latest(current)
            if found is None:
                break
            status, target = found
            if not (target and status is not None and 300 <= status < 400) or target in seen:
                break
            current = target
            seen.add(current)
        return current

    return final_url


def _jsonl(sources: Sequence[Source], out: TextIO) -> int:
    count = 0
    for row in capture_rows(sources):
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
        count += 1
    return count


def _csv(sources: Sequence[Source], out: TextIO) -> int:
    """CSV with a header row; lines end in `\\n` (Unix tools and `csv.reader` both read that)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(FIELDS)
    count = 0
    for row in capture_rows(sources):
        row["redirects"] = " ".join(row["redirects"])
        writer.writerow(row.values())
        count += 1
    return count


def _surt_key(url: str) -> str:
    try:
        return surt(url)
    except InvalidURL:  # not a crawlable URL, yet it has a record: sort it by itself rather than fail
        return url


def _cdxj(sources: Sequence[Source], out: TextIO) -> int:
    for source in sources:
        source.conn.create_function("webtrawl_surt", 1, _surt_key, deterministic=True)
        source.conn.create_function("webtrawl_lookup_url", 3, lookup_url, deterministic=True)
    # Each source sorted by SQLite, the sources merged in the same order.
    rows = heapq.merge(
        *(s.conn.execute(_CDXJ_ROWS, (s.crawl_id,)) for s in sources),
        key=lambda row: (row[0], row[1], row[8], row[7]),
    )
    count = 0
    for key, fetched_at, url, mime, status, digest, length, offset, filename, method, query in rows:
        fields = {
            "url": url,
            "mime": mime or "-",
            "status": "-" if status is None else str(status),
            "digest": (digest or "-").removeprefix("sha1:"),
            "length": str(length),
            "offset": str(offset),
            "filename": filename,
        }
        if method != "GET":  # as cdxj-indexer names a POST's response (its key carries both too)
            fields |= {"method": method, "requestBody": query}
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(fetched_at))
        out.write(f"{key} {stamp} {json.dumps(fields, ensure_ascii=False)}\n")
        count += 1
    return count
