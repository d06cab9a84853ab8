"""`webtrawl show DIR URL` as a user runs it: the archived response byte for byte, decoded, the list of
captures, revisits, and one-line errors for what the crawl does not hold."""

from __future__ import annotations

import asyncio
import gzip
import os
import sys
from pathlib import Path

from tests.crawls import connect
from tests.sites import SiteServer
from tests.sites.routes import NOT_FOUND
from tests.test_cli import FAST, one_line_error, webtrawl

UNREACHABLE = "http://127.0.0.1:9/"


async def show(*args: str) -> tuple[int, bytes, str]:
    """Run `webtrawl show` in a subprocess; stdout as bytes (payloads may be compressed)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webtrawl", "show", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out, err.decode()


def split(shown: bytes) -> tuple[list[str], bytes]:
    """The header lines (status line first) and the payload of what `show` printed."""
    head, found, payload = shown.partition(b"\r\n\r\n")
    assert found, shown[:200]
    return head.decode("latin-1").split("\r\n"), payload


async def test_show_prints_the_response_as_the_server_sent_it(site_server: SiteServer, tmp_path: Path) -> None:
    site = site_server.site
    chunked = "/p1/p2/p3/"
    assert site.route("/p1/").gzip and site.route(chunked).chunked and not site.route(chunked).gzip
    seeds = (site_server.url, site.url(chunked), site.url("/missing/0/"), UNREACHABLE)
    code, _out, err = await webtrawl(
        "crawl", *seeds, "--out", str(tmp_path), "--max-depth", "1", "--retries", "0", *FAST
    )
    assert code == 0, err
    directory = str(tmp_path)

    code, shown, err = await show(directory, site.url("/p1/"))
    assert (code, err) == (0, "")
    lines, payload = split(shown)
    assert lines[0] == "HTTP/1.1 200 OK"
    assert "Content-Encoding: gzip" in lines and "Content-Type: text/html; charset=utf-8" in lines
    assert payload == gzip.compress(site.route("/p1/").body, mtime=0)  # the bytes the server sent, still gzip

    code, decoded, err = await show(directory, site.url("/p1/"), "--decoded")
    assert (code, err) == (0, "")
    assert split(decoded) == (lines, site.route("/p1/").body)

    # Written as the crawler normalizes: scheme and host case, a fragment, the default port's absence.
    code, same, _err = await show(directory, site.url("/p1/#top").replace("http://", "HTTP://"))
    assert (code, same) == (0, shown)

    code, shown, err = await show(directory, site.url(chunked))
    assert (code, err) == (0, "")
    lines, payload = split(shown)
    assert "X-Webtrawl-Original-Transfer-Encoding: chunked" in lines  # how it travelled; stored de-chunked
    assert payload == site.route(chunked).body

    code, shown, _err = await show(directory, site.url("/missing/0/"))
    lines, payload = split(shown)
    assert (code, lines[0], payload) == (0, "HTTP/1.1 404 Not Found", NOT_FOUND)
    code, listed, _err = await show(directory, site.url("/missing/0/"), "--list")
    (line,) = listed.decode().splitlines()
    assert code == 0 and line.split()[1:3] == ["404", "text/html"] and line.endswith("response")

    for url, why in [
        (site.url("/no/such/page/"), "the crawl never found it"),
        (site.url("/private/"), "the frontier has it as failed: blocked by robots.txt"),
        (UNREACHABLE, "the frontier has it as failed: robots.txt unreachable (connection refused)"),
        (too_deep(tmp_path), "dropped: too-deep"),
    ]:
        for flags in ((), ("--list",)):
            code, out, err = await show(directory, url, *flags)
            assert (code, out) == (2, b"")
            one_line_error(err, f"no capture of {url} in this crawl ({why})")

    for args, fragments in [
        ((directory, "http://[oops/"), ["bad URL http://[oops/"]),
        ((directory, site_server.url, "--name", "other"), ["no crawl named 'other'", "default"]),
        ((directory, site_server.url, "--list", "--decoded"), ["--list or --decoded"]),
        ((str(tmp_path / "nowhere"), site_server.url), ["no crawl database"]),
    ]:
        code, out, err = await show(*args)
        assert (code, out) == (2, b"")
        one_line_error(err, *fragments)

    (warc,) = (tmp_path / "warc").iterdir()
    warc.rename(tmp_path / warc.name)
    code, out, err = await show(directory, site_server.url)
    assert (code, out) == (2, b"")
    one_line_error(err, f"the WARC file {warc.name} is missing from {tmp_path / 'warc'}")


def too_deep(out: Path) -> str:
    (url,) = connect(out).execute("SELECT url FROM dropped WHERE reason = 'too-deep' LIMIT 1").fetchone()
    return str(url)


async def test_a_revisit_shows_the_payload_it_repeats_and_list_shows_every_capture(
    site_server: SiteServer, tmp_path: Path
) -> None:
    site = site_server.site
    crawl = ("crawl", site_server.url, "--out", str(tmp_path), "--max-depth", "1", "--min-interval", "1s", *FAST)
    code, _out, err = await webtrawl(*crawl)
    assert code == 0, err
    await asyncio.sleep(1.1)
    code, _out, err = await webtrawl(*crawl, "--recrawl")
    assert code == 0, err

    first, second = connect(tmp_path).execute(
        "SELECT warc_file, warc_offset, unchanged FROM captures WHERE url = ? ORDER BY id", (site.url("/p1/"),)
    )
    assert (first[2], second[2]) == (0, 1)  # the test site sends the same bytes again
    code, listed, err = await show(str(tmp_path), site.url("/p1/"), "--list")
    assert (code, err) == (0, "")
    lines = listed.decode().splitlines()
    assert len(lines) == 2
    for line, (warc_file, offset, _unchanged), kind in zip(
        lines, (first, second), ("response", "revisit"), strict=True
    ):
        at, status, mime, size, where, record = line.split()
        assert at.endswith("Z") and (status, mime, record) == ("200", "text/html", kind)
        assert where == f"{warc_file}:{offset}" and int(size.replace(",", "")) > 0
    assert lines[0].split()[0] < lines[1].split()[0]  # oldest first

    code, shown, err = await show(str(tmp_path), site.url("/p1/"), "--decoded")
    assert code == 0
    (notice,) = err.splitlines()
    assert "revisit record" in notice and lines[1].split()[0] in notice and lines[0].split()[0] in notice
    headers, payload = split(shown)
    assert headers[0] == "HTTP/1.1 200 OK" and payload == site.route("/p1/").body


async def test_a_fetch_without_response_is_listed_with_its_error(tmp_path: Path) -> None:
    code, _out, _err = await webtrawl(
        "crawl", UNREACHABLE, "--out", str(tmp_path), "--retries", "0", "--ignore-robots", "-q"
    )
    assert code == 1
    code, listed, err = await show(str(tmp_path), UNREACHABLE, "--list")
    (line,) = listed.decode().splitlines()
    assert (code, err) == (0, "") and line.split()[1:5] == ["-", "-", "0", "-"]
    assert line.endswith("no record: connection refused")
    code, out, err = await show(str(tmp_path), UNREACHABLE)
    assert (code, out) == (2, b"")
    one_line_error(err, f"no capture of {UNREACHABLE} has an archived record", "connection refused")


async def test_a_reader_that_stops_early_gets_no_traceback(site_server: SiteServer, tmp_path: Path) -> None:
    code, _out, err = await webtrawl("crawl", site_server.url, "--out", str(tmp_path), "--max-pages", "1", *FAST)
    assert code == 0, err
    read, write = os.pipe()
    os.close(read)  # as `| head` does once it has its lines: every write now fails with EPIPE
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "webtrawl", "show", str(tmp_path), site_server.url,
            stdout=write, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    finally:
        os.close(write)
    _out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert (proc.returncode, err.decode()) == (1, "")
