"""Parsing that a hostile page cannot stall.

HTML parsers (lexbor included) take time that grows much faster than linearly on some malformed markup,
such as tens of thousands of unclosed or misnested tags: 40 KB of it can take seconds, 10 MB hours. Such
markup needs many tags, so a page with few tags is parsed here, at once; a page with many is parsed in a
child process under a time limit, and a child that runs over is killed. Normal pages never pay for the
child (a 20 KB page has a few hundred tags).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from ..models import ParsedPage
from .html import parse_html
from .media import find_media

MAX_INLINE_TAGS = 5000
"""Pages with more `<` than this are parsed in the child process."""
PARSE_TIMEOUT = 10.0
"""Seconds a page may take to parse in the child before it is given up."""


class ParseTimeout(Exception):
    """The page's HTML could not be parsed within the time limit."""


class GuardedParser:
    """`await parser.parse(...)` is `parse_html(...)`, bounded in time; close it with `close()`."""

    def __init__(self, *, max_inline_tags: int = MAX_INLINE_TAGS, timeout: float = PARSE_TIMEOUT) -> None:
        self._max_inline_tags = max_inline_tags
        self._timeout = timeout
        self._pool: ProcessPoolExecutor | None = None

    async def parse(
        self, text: str, url: str, *, requisites: bool, follow_nofollow: bool, media: frozenset[str] = frozenset()
    ) -> ParsedPage:
        """Links, title and text; also the media of the `media` kinds ("audio", "video") when any is asked."""
        if text.count("<") <= self._max_inline_tags:
            return _parse(text, url, requisites, follow_nofollow, media)
        if self._pool is None:
            # spawn: the crawl has threads (database, archive), which a forked child must not inherit
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        future = asyncio.get_running_loop().run_in_executor(
            self._pool, _parse, text, url, requisites, follow_nofollow, media
        )
        try:
            async with asyncio.timeout(self._timeout):  # not wait_for: it can swallow a cancellation on 3.11
                return await future
        except (TimeoutError, BrokenProcessPool):
            self._kill()
            raise ParseTimeout(f"HTML too complex to parse in {self._timeout:g} s") from None

    def _kill(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for process in list(getattr(pool, "_processes", {}).values()):  # no public way to stop a busy worker
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _parse(text: str, url: str, requisites: bool, follow_nofollow: bool, media: frozenset[str]) -> ParsedPage:
    page = parse_html(text, url, requisites=requisites, follow_nofollow=follow_nofollow)
    if media:
        page.media = find_media(text, url, media)
    return page
