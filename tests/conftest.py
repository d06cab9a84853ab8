"""Fixtures for the whole suite: a test web site served on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.sites import SiteServer


@pytest.fixture
async def site_server() -> AsyncIterator[SiteServer]:
    """The default test site (300 pages, seed 0, calendar on), served for one test; see `tests/sites`."""
    async with SiteServer() as server:
        yield server
