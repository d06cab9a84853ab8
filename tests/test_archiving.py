"""Results gathered into batches for the archive: a crawl that ends on an error cancels the gathering, and it ends."""

from __future__ import annotations

import asyncio

from webtrawl.archiving import batches
from webtrawl.models import Completion, Entry
from webtrawl.results import PageResult


def result(n: int) -> PageResult:
    entry = Entry(
        url=f"http://a.test/{n}", fp=n, host="http://a.test", depth=0, kind="link", referrer_fp=None, attempts=0
    )
    return PageResult(Completion(entry=entry, verdict="done"))


async def gather(results: asyncio.Queue[PageResult | None]) -> None:
    async for _batch in batches(results, lambda: False):  # never starved: it lingers to fill a batch
        pass


async def test_a_cancelled_batch_ends_even_when_a_result_arrives_with_the_cancellation() -> None:
    """The task group of a crawl that fails cancels the archiver while results may still arrive; a cancellation
    lost there (as `asyncio.wait_for` loses one on Python 3.11 when its awaited value arrives at the same moment)
    left the crawl waiting for ever."""
    for _ in range(50):
        results: asyncio.Queue[PageResult | None] = asyncio.Queue()

        task = asyncio.create_task(gather(results))
        results.put_nowait(result(1))
        await asyncio.sleep(0.001)  # the batch has its first result and waits for more
        results.put_nowait(result(2))  # a result arrives...
        task.cancel()  # ...as the crawl's task group cancels the archiver
        done, _ = await asyncio.wait({task}, timeout=2)
        assert done, "the cancelled gathering went on"
        assert task.cancelled()
