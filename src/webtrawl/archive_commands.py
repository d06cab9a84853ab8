"""The commands that read what a crawl archived, without crawling: `export` (rows, the CDXJ index, or a
WACZ package), `show` (one URL's archived response), and `merge` (shards copied from other machines folded
into a distributed crawl's directory)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from .errors import InvalidURL, StoreError
from .store.crawls import crawl_name
from .store.db import DB_NAME, connect
from .store.export import export as export_rows
from .store.export import export_media, iso_time
from .store.fold import fold_shard
from .store.shards import Sources
from .store.show import capture_lines, captures_of, latest_archived, read_message
from .store.wacz import export_wacz
from .terminal import NAME_HELP, USAGE_ERRORS, fail, reader_gone, say, write_out
from .urls import normalize


@click.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "csv", "cdxj", "wacz"]), default="jsonl", show_default=True
)
@click.option("--name", help=NAME_HELP)
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), help="File to write (default: stdout; wacz: required)."
)
@click.option("--media", is_flag=True, help="Export the media index (one row per media file) instead of captures.")
def export(directory: Path, fmt: str, name: str | None, output: Path | None, media: bool) -> None:
    """Write one row per capture (or per media file) as JSON lines, CSV or CDXJ; or the whole crawl as a
    WACZ package (WARC files, index, pages list) that ReplayWeb.page and pywb open."""
    if fmt == "wacz" and (output is None or media):
        fail("--format wacz writes a package of the whole crawl to a file: give -o FILE.wacz (and no --media)")
    write = export_media if media else export_rows
    try:
        conn = connect(directory / DB_NAME, readonly=True)
        name = crawl_name(conn, name)
        with Sources.open(directory, name) as sources:
            if fmt == "wacz":
                assert output is not None
                if sources.unreachable:  # a package is whole or not made
                    raise StoreError(
                        f"the shard at {sources.unreachable[0].key} cannot be read here: make it readable, or "
                        f"fold a copy in with webtrawl merge {directory} COPY, before packaging the crawl"
                    )
                pages = export_wacz(sources.all, name, output)
                say(f"wrote {output}: {pages:,} pages listed, {output.stat().st_size / 1e6:,.1f} MB")
                return
            for place in sources.unreachable:
                say(f"the shard at {place.key} ({', '.join(place.nodes)}) cannot be read here: its pages are left out")
            if output is None:
                write(sources.all, fmt, sys.stdout)  # type: ignore[arg-type]
            else:
                with output.open("w", newline="", encoding="utf-8") as stream:
                    write(sources.all, fmt, stream)  # type: ignore[arg-type]
    except BrokenPipeError:
        reader_gone()
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}" if exc.filename in (None, str(output)) else str(exc))
    except USAGE_ERRORS as exc:
        fail(str(exc))


@click.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.argument("url")
@click.option("--name", help=NAME_HELP)
@click.option(
    "--decoded", is_flag=True, help="The payload with its Content-Encoding undone (headers stay as archived)."
)
@click.option("--list", "list_captures", is_flag=True, help="One line per capture of URL, oldest first, instead.")
def show(directory: Path, url: str, name: str | None, decoded: bool, list_captures: bool) -> None:
    """Print the archived response of URL's latest capture: status line, headers, a blank line, then the
    payload as received (still compressed if the server compressed it).

    An unchanged re-fetch (a revisit record) shows the response it repeats, and says so on stderr.
    """
    if decoded and list_captures:
        fail("--list prints no payload: give --list or --decoded, not both")
    try:
        url = normalize(url)
    except InvalidURL as exc:
        fail(f"bad URL {url}: {exc}")
    try:
        with contextlib.closing(connect(directory / DB_NAME, readonly=True)) as conn:
            name = crawl_name(conn, name)
        with Sources.open(directory, name) as sources:
            for place in sources.unreachable:
                say(f"the shard at {place.key} cannot be read here: its captures of {url} are not shown")
            found = captures_of(sources.all, url)
            if list_captures:
                write_out("".join(line + "\n" for line in capture_lines([f.capture for f in found])).encode())
                return
            shown, holder = latest_archived(sources.all, found)
            message = read_message(holder)
        capture, source = shown.capture, holder.capture
    except USAGE_ERRORS as exc:
        fail(str(exc))
    if source is not capture:
        say(
            f"the capture of {iso_time(capture.fetched_at)} is a revisit record (unchanged): showing the "
            f"response it repeats, captured {iso_time(source.fetched_at)}"
        )
    if source.truncated:
        say(f"the payload was cut when fetched ({source.truncated})")
    payload = message.payload
    if decoded:
        payload, cut = message.decoded()
        if cut:
            say("the payload is damaged or too large to decode whole: shown as far as it decodes")
    write_out(message.head + payload)


@click.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.argument("shards", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--name", help=NAME_HELP)
def merge(directory: Path, shards: tuple[Path, ...], name: str | None) -> None:
    """Fold shards copied from other machines into a distributed crawl's DIRECTORY (the coordinator's).

    Each SHARD is a node's directory as it left it (node.db, WARC files, media), copied here when the nodes
    had no filesystem shared with the coordinator; afterwards every reader of DIRECTORY reads it. Running it
    again changes nothing.
    """
    for source in shards:
        try:
            folded = fold_shard(directory, source, name)
        except USAGE_ERRORS as exc:
            fail(str(exc))
        nodes = ", ".join(folded.place.nodes)
        if folded.already:
            click.echo(f"{source}: folded in before (as {folded.place.copy}, {nodes}): nothing changed")
            continue
        click.echo(f"{source}: {folded.pages:,} page(s) of {nodes} folded in as {directory / str(folded.place.copy)}")
        if folded.unsettled:
            say(
                f"{source}: {folded.unsettled:,} result(s) its node staged when it was killed are left out (no "
                "Redis can tell any more whether they counted): a re-crawl fetches those pages again"
            )
