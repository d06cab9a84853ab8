"""Reading what a crawl left in its directory, the way a user (or a replay tool) would."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from fastwarc.warc import ArchiveIterator as FastIterator
from warcio.archiveiterator import ArchiveIterator

from webtrawl.config import CrawlConfig, FetchConfig, PolitenessConfig, ScopeConfig


def fast_config(seed: str, out: Path, *, max_depth: int | None = None, **settings: object) -> CrawlConfig:
    """A crawl of a local test site without the politeness a real site deserves (tests must be quick)."""
    fetch = settings.pop("fetch", FetchConfig(backoff=0.05, read_timeout=5, total_timeout=10))
    return CrawlConfig(
        seeds=(seed,),
        out=out,
        scope=settings.pop("scope", ScopeConfig(max_depth=max_depth)),  # type: ignore[arg-type]
        politeness=PolitenessConfig(per_host=4, delay=0),
        fetch=fetch,  # type: ignore[arg-type]
        concurrency=8,
        **settings,  # type: ignore[arg-type]
    )


def connect(out: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{out / 'crawl.db'}?mode=ro", uri=True)


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def fetched_depths(out: Path) -> dict[str, int]:
    """Path → depth of every URL the crawl fetched (has a capture of)."""
    conn = connect(out)
    return {
        path_of(url): depth
        for url, depth in conn.execute(
            "SELECT url, depth FROM urls u WHERE EXISTS (SELECT 1 FROM captures c WHERE c.fp = u.fp)"
        )
    }


def last_statuses(out: Path) -> dict[str, int]:
    conn = connect(out)
    return {
        path_of(url): status
        for url, status in conn.execute(
            "SELECT url, status FROM captures WHERE id IN (SELECT MAX(id) FROM captures GROUP BY fp) "
            "AND status IS NOT NULL"
        )
    }


def dropped(out: Path, reason: str) -> set[str]:
    conn = connect(out)
    return {
        url
        for (url,) in conn.execute(
            "SELECT url FROM dropped WHERE reason = ?",
            (reason,),
        )
    }


ROBOTS_LAYER = frozenset({"/robots.txt", "/sitemap.xml"})
"""Paths the crawl asks each host for before its pages (the test site has no sitemap: /sitemap.xml is 404)."""


def request_counts(log: list, *, host: str | None = None) -> Counter[str]:
    """Path → how many requests the test server saw (robots.txt and the /sitemap.xml fallback left out)."""
    return Counter(r.path for r in log if r.path not in ROBOTS_LAYER and (host is None or r.host == host))


def check_warcs(out: Path) -> int:
    """Validate every WARC file with warcio and FastWARC (digests included); return how many responses are
    archived: response records, and the metadata records of responses whose body was not downloaded.

    Also checks the index and the archive agree: each capture's record is at its offset with its URL, and so
    is each response archived outside the captures.
    """
    responses = 0
    files = sorted((out / "warc").glob("*.warc.gz"))
    assert files, "no WARC file written"
    for file in files:
        with file.open("rb") as stream:
            for record in ArchiveIterator(stream, check_digests="raise"):
                record.content_stream().read()
                responses += record.rec_type in ("response", "metadata")
        with file.open("rb") as stream:
            for record in FastIterator(stream, parse_http=False):
                assert record.verify_block_digest(), f"bad block digest in {file.name}"
    conn = connect(out)
    for url, name, offset, unchanged in conn.execute(
        "SELECT url, warc_file, warc_offset, unchanged FROM captures WHERE warc_file IS NOT NULL"
    ):
        with (out / "warc" / name).open("rb") as stream:
            stream.seek(offset)
            record = next(iter(ArchiveIterator(stream)))
            assert record.rec_type == ("revisit" if unchanged else "response")
            assert record.rec_headers.get_header("WARC-Target-URI") == url
    for target, name, offset in conn.execute(
        "SELECT target, warc_file, warc_offset FROM resources WHERE status IS NOT NULL"
    ):  # robots.txt, sitemaps, a rendered page's requests
        with (out / "warc" / name).open("rb") as stream:
            stream.seek(offset)
            record = next(iter(ArchiveIterator(stream)))
            assert (record.rec_type, record.rec_headers.get_header("WARC-Target-URI")) == ("response", target)
    return responses
