"""Reading pages off the loop: a big run's in a worker process, pathological markup in a child that is given
up when too slow; what is read is the same wherever it runs."""

from __future__ import annotations

import asyncio
import fcntl
import gzip
import os
import signal
import subprocess
import sys
import time

import pytest

from webtrawl.parse.analysis import PageInput, analyze
from webtrawl.parse.guarded import GuardedParser, ParseFailed
from webtrawl.parse.simhash import simhash
from webtrawl.parse.worker import PIPE_SIZE, ParseWorker

URL = "http://example.org/"
TEXT = " ".join(f"word{i}" for i in range(40))


def page(html: str, **options: object) -> PageInput:
    settings: dict = {"requisites": False, "follow_nofollow": False, **options}
    return PageInput(
        body=html.encode(), url=URL, content_encoding=None, content_type="text/html", max_size=10**7, **settings
    )


async def test_the_first_pages_of_a_run_are_read_inline_then_in_the_worker() -> None:
    parser = GuardedParser(offload_after=2)
    html = f'<title>t</title><a href="/x">x</a><p>{TEXT}</p>'
    try:
        read = [await parser.analyze(page(html)) for _ in range(4)]
    finally:
        await parser.close()
    assert [analysis.away for analysis in read] == [False, False, True, True]
    for analysis in read:
        assert analysis.page is not None and analysis.page.title == "t"
        assert [link.url for link in analysis.page.links] == ["http://example.org/x"]
        assert analysis.simhash == simhash(analysis.page.text) is not None
        assert analysis.cpu["parse"] > 0 and analysis.cpu["hashing"] >= 0


async def test_pages_read_at_once_each_get_their_own_answer() -> None:
    parser = GuardedParser(offload_after=0)
    try:
        read = await asyncio.gather(*(parser.analyze(page(f"<title>page {i}</title>")) for i in range(50)))
    finally:
        await parser.close()
    assert [analysis.page.title for analysis in read if analysis.page] == [f"page {i}" for i in range(50)]


async def test_the_pipes_to_and_from_the_worker_hold_many_pages() -> None:
    """With Linux's default 64 KB a pipe held three pages, and the child stopped at each answer until the
    crawl's loop came back to read it."""
    worker = ParseWorker()
    try:
        await worker.analyze(page("<title>t</title>"))
        assert worker.pid is not None
        for end in (0, 1):  # the child's stdin and stdout, opened again through /proc
            descriptor = os.open(f"/proc/{worker.pid}/fd/{end}", os.O_RDONLY | os.O_NONBLOCK)
            try:
                assert fcntl.fcntl(descriptor, fcntl.F_GETPIPE_SZ) == PIPE_SIZE
            finally:
                os.close(descriptor)
    finally:
        await worker.close()


async def test_the_worker_returns_the_decoded_text_and_body_only_when_asked() -> None:
    html = "<title>café</title><video src=/v.mp4></video>"
    body = gzip.compress(html.encode("utf-8"))
    parser = GuardedParser(offload_after=0)
    asked = PageInput(
        body=body,
        url=URL,
        content_encoding="gzip",
        content_type="text/html; charset=utf-8",
        max_size=10**7,
        requisites=False,
        follow_nofollow=False,
        media=frozenset({"video"}),
        keep_text=True,
        keep_body=True,
    )
    try:
        kept = await parser.analyze(asked)
        plain = await parser.analyze(page(html))
    finally:
        await parser.close()
    assert kept.text == html and kept.body == html.encode()
    assert kept.page is not None and [ref.url for ref in kept.page.media] == ["http://example.org/v.mp4"]
    assert plain.text is None and plain.body is None


@pytest.mark.parametrize("noticed_first", [False, True], ids=["next-page-first", "end-noticed-first"])
async def test_a_killed_worker_is_replaced_and_the_page_still_read(noticed_first: bool) -> None:
    parser = GuardedParser(offload_after=0)
    try:
        await parser.analyze(page("<title>first</title>"))
        assert parser._worker is not None and parser._worker.pid is not None
        os.kill(parser._worker.pid, signal.SIGKILL)
        if noticed_first:  # it died idle: its end is noticed before the next page comes
            await asyncio.sleep(0.5)
        async with asyncio.timeout(60):  # a page asked of a dead worker would wait for ever
            analysis = await parser.analyze(page("<title>after</title>"))
    finally:
        await parser.close()
    assert analysis.page.title == "after"


async def test_many_tags_are_read_in_the_guarded_child_with_the_same_result() -> None:
    parser = GuardedParser(max_inline_tags=100)
    html = "<title>many</title>" + "".join(f'<p><a href="/p{i}">{i}</a></p>' for i in range(300))
    try:
        analysis = await parser.analyze(page(html))
    finally:
        await parser.close()
    assert analysis.away
    assert analysis.page is not None and analysis.page.title == "many" and len(analysis.page.links) == 300
    assert analysis.page == analyze(page(html)).page and analysis.simhash == analyze(page(html)).simhash


async def test_a_page_too_slow_to_parse_is_given_up_and_the_parser_recovers() -> None:
    # The limit covers starting the child (about 0.5 s here); the nested page takes about 10 s of lexbor
    # time (it grows faster than linearly with nesting).
    parser = GuardedParser(timeout=2.0)
    with pytest.raises(ParseFailed, match="too complex"):
        await parser.analyze(page("<div>" * 60_000))
    analysis = await parser.analyze(page("<div>" * 6000 + "<title>ok</title>"))
    assert analysis.page is not None and analysis.page.title == "ok"
    await parser.close()


async def test_closing_stops_a_guard_busy_with_a_page_nobody_waits_for() -> None:
    parser = GuardedParser(timeout=3600.0)
    reading = asyncio.create_task(parser.analyze(page("<div>" * 200_000)))  # hours of lexbor time
    async with asyncio.timeout(60):
        while parser._guard is None or parser._guard.pid is None:
            await asyncio.sleep(0.01)
    guard = parser._guard
    reading.cancel()
    async with asyncio.timeout(60):  # killed, not waited for
        await parser.close()
    assert guard._process is not None and guard._process.returncode is not None


def test_a_guard_busy_with_a_page_exits_when_its_crawl_is_killed() -> None:
    script = (
        "import asyncio, sys\n"
        "from tests.test_guarded_parse import page\n"
        "from webtrawl.parse.guarded import GuardedParser\n"
        "async def main():\n"
        "    parser = GuardedParser(timeout=3600.0)\n"
        "    task = asyncio.create_task(parser.analyze(page('<div>' * 200_000)))\n"
        "    while parser._guard is None or parser._guard.pid is None:\n"
        "        await asyncio.sleep(0.01)\n"
        "    print(parser._guard.pid, flush=True)\n"
        "    await task\n"
        "asyncio.run(main())\n"
    )
    crawl = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert crawl.stdout is not None
    guard = int(crawl.stdout.readline())
    crawl.kill()  # as kill -9 would: nothing closes the pipe while the guard is busy parsing
    crawl.wait()
    crawl.stdout.close()
    for _ in range(300):
        try:
            os.kill(guard, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{guard}/stat") as stat:  # reaped by init, or a zombie: gone either way
            if stat.read().split(") ", 1)[1].startswith("Z"):
                return
        time.sleep(0.1)
    os.kill(guard, signal.SIGKILL)
    raise AssertionError("the guard outlived its crawl by 30 s")
