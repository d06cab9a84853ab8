"""The CPU a page costs in the libraries alone: the floor under each of `make bench`'s stages.

Each row runs only the library calls a stage cannot do without, on the benchmark site's pages, with none of
webtrawl's own code around them:

  fetch     aiohttp GETs every page from nginx, 16 at a time on one keep-alive session (bodies read whole)
  parse     lexbor parses a page, finds its elements with the crawl's selector, reads its text;
            ada resolves every href against the page's URL
  hashing   the compiled SimHash of the page's text
  archive   the payload and block digests (SHA-1) and the record's gzip member (isal), as `store.warc` makes
  database  a capture row (the text with it) and the page's out-links, in transactions of 140 pages, into a
            database with the crawl's schema
  index     FTS5 indexing those captures' title, URL and text, in chunks as the crawl's catch-up does (not
            the in-links it fills in the same transactions: they are webtrawl's own table)

Their sum is what a page costs however little Python runs around these calls. Beside each floor stands the
stage's figure from the newest `make bench` result in benchmarks/out, when there is one: the difference is
webtrawl's own work. The machine's speed moves both (a floor can come out above the crawl's own figure), so
run the two in the same hour; the last line sums the lower of the two in each row.

    .venv/bin/python benchmarks/floors_bench.py [--pages 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import resource
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
from ada_url import join_url
from isal import isal_zlib
from selectolax.lexbor import LexborHTMLParser

from nginx import Nginx
from sitegen import generate
from webtrawl.parse.html import _PAGE_SELECTOR, _REQUISITE_SELECTOR, parse_html
from webtrawl.parse.simhash import simhash
from webtrawl.store.db import connect, transaction
from webtrawl.store.index import INDEX_CHUNK
from webtrawl.store.warc import COMPRESS_LEVEL

OUT = Path(__file__).parent / "out"
BATCH = 140
"""Pages a transaction of the crawl's writer holds, about (benchmarks/README.md, "database")."""
TARGET = 1.2
"""CPU ms a page the speed goal allows for every stage together."""


def cpu() -> float:
    """CPU seconds of this process (all its threads): aiohttp's and SQLite's work is not all on one thread."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(work: Callable[[], object]) -> float:
    started = cpu()
    work()
    return cpu() - started


async def fetch_all(base: str, paths: list[str]) -> list[tuple[str, bytes]]:
    connector = aiohttp.TCPConnector(limit=16)
    queue = iter(paths)
    pages: list[tuple[str, bytes]] = []
    async with aiohttp.ClientSession(
        connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False
    ) as session:

        async def one_at_a_time() -> None:
            for path in queue:
                async with session.get(base + path) as response:
                    pages.append((str(response.url), await response.read()))

        await asyncio.gather(*(one_at_a_time() for _ in range(16)))
    return pages


def parse(pages: list[tuple[str, bytes]]) -> None:
    selector = f"{_PAGE_SELECTOR},{_REQUISITE_SELECTOR}"
    for url, body in pages:
        tree = LexborHTMLParser(body.decode())
        for node in tree.css(selector):
            href = node.attributes.get("href") or node.attributes.get("src")
            if href:
                join_url(url, href)
        if tree.body is not None:
            tree.body.text(separator=" ", strip=True)


def archive(pages: list[tuple[str, bytes]]) -> None:
    head = b"WARC/1.1\r\nWARC-Type: response\r\n" + b"X-Field: value\r\n" * 12 + b"\r\n"
    for _url, body in pages:
        hashlib.sha1(body).digest()
        hashlib.sha1(head + body).digest()
        gz = isal_zlib.compressobj(COMPRESS_LEVEL, isal_zlib.DEFLATED, 31)
        gz.compress(head)
        gz.compress(body)
        gz.flush()


def links_of(pages: list[tuple[str, bytes]]) -> list[list[int]]:
    """Stand-in fingerprints of each page's out-links (a hash of each href as written), for the database rows."""
    return [[hash(part[: part.find(b'"')]) for part in body.split(b'href="')[1:]] for _url, body in pages]


def write(conn: sqlite3.Connection, pages: list[tuple[str, bytes]], texts: list[str], links: list[list[int]]) -> None:
    for start in range(0, len(pages), BATCH):
        with transaction(conn):
            for number in range(start, min(start + BATCH, len(pages))):
                url, body = pages[number]
                conn.execute(
                    "INSERT INTO captures(crawl_id, fp, url, fetched_at, status, size, title, text) "
                    "VALUES (1, ?, ?, ?, 200, ?, ?, ?)",
                    (hash(url), url, time.time(), len(body), url, texts[number]),
                )
                conn.executemany(
                    "INSERT OR IGNORE INTO links(crawl_id, src_fp, dst_fp) VALUES (1, ?, ?)",
                    [(hash(url), dst) for dst in links[number]],
                )


def index(conn: sqlite3.Connection, captures: int) -> None:
    for start in range(0, captures, INDEX_CHUNK):
        with transaction(conn):
            conn.execute(
                "INSERT INTO captures_fts(rowid, title, url, text) "
                "SELECT id, title, url, text FROM captures WHERE id > ? AND id <= ? ORDER BY id",
                (start, start + INDEX_CHUNK),
            )


def crawled_stages() -> tuple[str, dict[str, float]] | None:
    """The newest `make bench` result's name and webtrawl's CPU ms a page by stage, if there is one."""
    for path in sorted(OUT.glob("results-*.json"), reverse=True):
        for result in json.loads(path.read_text())["results"]:
            if result["crawler"] == "webtrawl" and result.get("stages"):
                pages = result["pages"]
                return path.name, {stage: 1000 * spent / pages for stage, spent in result["stages"].items()}
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    args = parser.parse_args()
    site = OUT / f"site-{args.pages}-1"
    if not (site / "manifest.json").exists():
        generate(site, args.pages, 1)
    paths = sorted("/" + str(path.relative_to(site)) for path in site.rglob("*.html"))
    with tempfile.TemporaryDirectory() as scratch, Nginx(site, Path(scratch) / "nginx") as server:
        started = cpu()
        pages = asyncio.run(fetch_all(server.url.rstrip("/"), paths))
        seconds = {"fetch": cpu() - started}
    seconds["parse"] = timed(lambda: parse(pages))
    # The text the crawl keeps (scripts and styles left out, whitespace collapsed), not timed: what the
    # hash and the index read.
    texts = [parse_html(body.decode(), url).text or "" for url, body in pages]
    seconds["hashing"] = timed(lambda: [simhash(text) for text in texts])
    seconds["archive"] = timed(lambda: archive(pages))
    links = links_of(pages)
    with tempfile.TemporaryDirectory() as scratch:
        conn = connect(Path(scratch) / "floor.db")
        conn.execute("INSERT INTO crawls(id, name, identity, created_at) VALUES (1, 'floor', '', 0)")
        conn.commit()
        seconds["database"] = timed(lambda: write(conn, pages, texts, links))
        seconds["index"] = timed(lambda: index(conn, len(pages)))
        conn.close()
    print(f"{len(pages)} pages, {sum(map(len, links)) / len(pages):.0f} links a page")
    crawled = crawled_stages()
    print(f"webtrawl's figures: {crawled[0]}\n" if crawled else "no `make bench` result to compare with\n")
    stages = crawled[1] if crawled else {}
    rows = [(stage, 1000 * spent / len(pages), stages.get(stage)) for stage, spent in seconds.items()]
    if "other" in stages:
        rows.append(("other", 0.0, stages["other"]))
    rows.append(("sum", sum(row[1] for row in rows), sum(stages.values()) if stages else None))
    print("stage    | library floor, CPU ms/page | webtrawl's stage")
    print("---------+----------------------------+-----------------")
    for stage, floor, crawl in rows:
        print(f"{stage:<9}| {floor:26.3f} | {'-' if crawl is None else f'{crawl:.3f}':>15}")
    if stages:
        # A floor measured here can exceed the crawl's own figure for its stage (the machine's speed moves
        # within minutes): the lower of the two in each row is what the work cannot go under.
        lowest = sum(min(floor, stages.get(stage, floor)) for stage, floor, _crawl in rows[:-1] if stage != "other")
        print(f"the lower of the two in each row, summed: {lowest:.3f}")
    print(f"(the goal: {TARGET} ms/page for every stage together)")


if __name__ == "__main__":
    main()
