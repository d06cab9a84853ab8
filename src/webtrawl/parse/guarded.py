"""Reading pages off the event loop: a big run's in a worker process, a hostile page's under a time limit.

- Parsing and hashing cost about 1.2 ms a page, a third of a crawl's CPU, and on the loop they hold the one
  thread that fetches. So a run reads its pages in a worker process (`worker`), and the loop fetches
  meanwhile. Starting the worker costs about 0.5 s and 30 MB, more than reading a few hundred pages inline,
  so the first `OFFLOAD_AFTER` pages of a run are read on the loop, and a small crawl never starts one.
- HTML parsers (lexbor included) take time that grows much faster than linearly on some malformed markup,
  such as tens of thousands of unclosed or misnested tags: 40 KB of it can take seconds, 10 MB hours. Such
  markup needs many tags, so a page with more than `MAX_INLINE_TAGS` is read in a second worker under a
  time limit, and a worker that runs over is killed. Normal pages never go there (a 20 KB page has a few
  hundred tags), so the first worker needs no limit.
"""

from __future__ import annotations

import asyncio

from .analysis import Analysis, PageInput, analyze
from .worker import ParseWorker, WorkerDied

MAX_INLINE_TAGS = 5000
"""Pages with more `<` than this are read in the guarded worker."""
PARSE_TIMEOUT = 10.0
"""Seconds a page may take to read in the guarded worker before it is given up."""
OFFLOAD_AFTER = 256
"""Pages a run reads on the loop before it starts its worker process."""


class ParseFailed(Exception):
    """The page could not be read: its HTML took too long to parse, or ended the parser's process."""


class GuardedParser:
    """`await parser.analyze(page)` is `analysis.analyze(page)`, off the loop once the run is big enough and
    bounded in time; close it with `await close()`."""

    def __init__(
        self,
        *,
        max_inline_tags: int = MAX_INLINE_TAGS,
        timeout: float = PARSE_TIMEOUT,
        offload_after: int = OFFLOAD_AFTER,
    ) -> None:
        self._max_inline_tags = max_inline_tags
        self._timeout = timeout
        self._inline_left = offload_after
        self._worker: ParseWorker | None = None
        self._guard: ParseWorker | None = None

    async def analyze(self, page: PageInput) -> Analysis:
        """What `page` says. Raises `ParseFailed`."""
        if self._inline_left > 0:
            self._inline_left -= 1
            analysis = analyze(page, self._max_inline_tags)
        else:
            analysis = await self._in_worker(page)
        return analysis if analysis is not None else await self._guarded(page)  # None: too many tags

    async def _in_worker(self, page: PageInput) -> Analysis | None:
        # The worker may die (killed, out of memory, or by the page it was reading) with other pages in
        # flight: each is read again by a new one. A page that ends two workers while they read it fails
        # instead of ending more; the pages waiting behind it are not blamed.
        deaths = 0
        while True:
            if self._worker is None:
                self._worker = ParseWorker()
            worker = self._worker
            try:
                analysis = await worker.analyze(page, self._max_inline_tags)
            except WorkerDied as died:
                if self._worker is worker:  # the first of its pages to hear of it reaps it
                    self._worker = None
                    await worker.close()
                deaths += died.reading
                if deaths == 2:
                    raise ParseFailed("the HTML parser's process ended twice reading this page") from None
                continue
            return analysis

    async def _guarded(self, page: PageInput) -> Analysis:
        if self._guard is None:
            self._guard = ParseWorker()
        guard = self._guard
        try:
            async with asyncio.timeout(self._timeout):  # not wait_for: it can swallow a cancellation on 3.11
                analysis = await guard.analyze(page)
        except (TimeoutError, WorkerDied):
            if self._guard is guard:
                self._guard = None
                guard.kill()
                await guard.close()
            raise ParseFailed(f"HTML too complex to parse in {self._timeout:g} s") from None
        assert analysis is not None  # read without a tag limit
        return analysis

    async def close(self) -> None:
        """Let the worker finish the pages it was given and exit; stop the guard at once (a page it is
        reading may take hours, and no one waits for it any more); reap both."""
        worker, guard, self._worker, self._guard = self._worker, self._guard, None, None
        if guard is not None:
            guard.kill()
            await guard.close()
        if worker is not None:
            await worker.close()
