"""Stage one of the commit: results gathered into batches, and each batch's records appended to the archive.

Batches form by themselves: whatever arrived while the previous batch was written goes next, and a batch
lingers a little to fill, so under load batches grow and the per-transaction costs of the commit that
follows (FTS5 segment merges, WAL commits, index pages touched) are shared by more rows. The archive itself
runs on the crawler's archive thread (`archive`), so the event loop never waits for the disk.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from .errors import InvalidURL
from .fetch.page import Rendering
from .models import Capture, FetchOutcome, Resource, WarcLocation
from .results import Result, SiteFiles
from .store.mirror import Mirror
from .store.replaykey import request_query
from .store.warc import WarcWriter, kept_as_metadata
from .urls import normalize

COMMIT_BATCH = 512
"""Most results committed in one transaction; also how many may wait for the archiver (each holds a
response body, so this bounds the memory a slow disk can make the crawl hold)."""
COMMIT_LINGER = 0.2
"""Seconds the committer waits to fill a batch once it has one result, unless the crawl starves meanwhile
(`starved`: the crawl may be waiting for the batch's links). At 0.05 the 20,000-page benchmark
committed batches of about 16 pages and its database stage took 0.81 ms of CPU a page; at 0.2, 0.65 ms
(the WAL commits and index pages touched are shared by more rows), for 23 MB more peak memory."""
STARVE_CHECK = 0.02
"""Seconds between two looks, while a batch fills, at whether the crawl starves."""


async def batches(results: asyncio.Queue[Result | None], starved: Callable[[], bool]) -> AsyncIterator[list[Result]]:
    """The results, a batch at a time, until the None that ends them; `starved()` says the crawl waits for
    the batch being filled (nothing in flight, nothing to claim), which then goes at once."""
    end = False
    while not end:
        first = await results.get()
        if first is None:
            return
        batch = [first]
        deadline = time.monotonic() + COMMIT_LINGER
        while len(batch) < COMMIT_BATCH:
            try:
                item = results.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or starved():
                    break
                try:  # in short waits, to see the crawl starve meanwhile
                    # Not `asyncio.wait_for`: on Python 3.11 it can swallow a cancellation that meets its timeout,
                    # and a task group cancelling this loop (the crawl ending on an error) would wait for ever.
                    async with asyncio.timeout(min(remaining, STARVE_CHECK)):
                        item = await results.get()
                except TimeoutError:
                    continue
            if item is None:
                end = True
                break
            batch.append(item)
        yield batch


def archive(batch: list[Result], warc: WarcWriter, mirror: Mirror | None) -> dict[str, int]:
    """Append the batch's records to the archive and flush; runs on the archive thread."""
    for result in batch:
        if isinstance(result, SiteFiles):
            result.archived = [_resource(outcome, warc.write(outcome)) for outcome in result.outcomes]
            continue
        capture: Capture | None = result.completion.capture
        if result.outcome is not None and capture is not None:
            revisit = result.completion.entry.previous if capture.unchanged else None
            location = warc.write(result.outcome, revisit)
            if kept_as_metadata(result.outcome):
                continue  # there is no copy to replay
            capture.warc = location
            # The record's digest is the capture's: the page was not hashed twice (a revisit's is its original's).
            capture.payload_digest = capture.payload_digest or location.payload_digest
            if result.rendering is not None:
                _archive_rendering(result.rendering, capture, warc)
            if mirror is not None and result.decoded is not None:
                mirror.write(capture.url, capture.content_type, result.decoded)
    return warc.flush()


def _archive_rendering(rendering: Rendering, capture: Capture, warc: WarcWriter) -> None:
    """After a rendered page's own records: its requests' (each naming the page), then its DOM and thumbnail."""
    page_id, resources = warc.last_record_id, capture.resources
    for outcome in rendering.resources:
        resources.append(_resource(outcome, warc.write(outcome, page_id=page_id)))
        outcome.archived = True
    made = [(f"urn:dom:{capture.url}", "text/html; charset=utf-8", rendering.dom)]
    made.append((f"urn:thumbnail:{capture.url}", "image/jpeg", rendering.screenshot))
    for uri, content_type, body in made:
        if body:
            location = warc.write_resource(uri, content_type, body, page_id, capture.fetched_at)
            resources.append(Resource(url=uri, target=uri, fetched_at=capture.fetched_at, status=None,
                                      content_type=content_type.partition(";")[0], warc=location))  # fmt: skip


def _resource(outcome: FetchOutcome, location: WarcLocation) -> Resource:
    """The index row of a response archived outside the captures, found by its normalized URL."""
    try:
        url = normalize(outcome.url)
    except InvalidURL:  # a browser asked for it as it was: replay finds it under that form
        url = outcome.url
    method = outcome.method
    query = request_query(method, _sent_type(outcome), outcome.request_body, outcome.url)
    return Resource(url=url, target=outcome.url, fetched_at=outcome.started_at, status=outcome.status,
                    content_type=outcome.content_type, warc=location, method=method,
                    request_query=query)  # fmt: skip


def _sent_type(outcome: FetchOutcome) -> str | None:
    """The Content-Type of the request's body."""
    return next((value for name, value in outcome.request_headers if name.lower() == "content-type"), None)
