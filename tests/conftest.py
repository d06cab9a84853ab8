"""Fixtures for the whole suite: a test web site served on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.sites import SiteServer


@pytest.fixture
async def site_server() -> AsyncIterator[SiteServer]:
    """The default test site (300 pages, seed 0, calendar on), served for one test; see `tests/sites`."""
    async with SiteServer() as server:
        yield server


@pytest.fixture
def site_server_sync() -> Iterator[str]:
    """The default test site served from a thread, for tests that call blocking APIs; yields its URL."""
    ready = threading.Event()
    stop = threading.Event()
    urls: list[str] = []

    async def serve() -> None:
        async with SiteServer(calendar=False) as server:
            urls.append(server.url)
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10), "test site did not start"
    yield urls[0]
    stop.set()
    thread.join(5)
