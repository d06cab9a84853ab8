"""webtrawl: a breadth-first, resumable, polite web crawler that archives to WARC and indexes to SQLite."""

from __future__ import annotations

__version__ = "0.1.0"

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import CrawlConfig, FetchConfig, PolitenessConfig, RenderConfig, ScopeConfig
from .errors import (
    ConfigError,
    FetchError,
    IdentityMismatch,
    InvalidURL,
    StoreError,
    StoreLocked,
    WebtrawlError,
)
from .stats import CrawlReport

if TYPE_CHECKING:
    from .crawler import Crawler


def __getattr__(name: str) -> Any:
    # The engine (aiohttp, the store, the browser driver) is imported when first asked for, so that a
    # process that needs only a part, such as the page-reading worker (`python -m webtrawl.parse`), does not
    # load it all.
    if name == "Crawler":
        from .crawler import Crawler

        return Crawler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def crawl(*seeds: str, out: str | Path, **settings: Any) -> CrawlReport:
    """Run a crawl to its end (or a limit) and return its report; blocking.

    `settings` are `CrawlConfig` fields: `crawl("https://example.org/", out="dir", max_pages=100,
    scope=ScopeConfig(mode="domain"))`.
    """
    from .crawler import Crawler

    return asyncio.run(Crawler(CrawlConfig(seeds=seeds, out=Path(out), **settings)).run())


__all__ = [
    "ConfigError",
    "CrawlConfig",
    "CrawlReport",
    "Crawler",
    "FetchConfig",
    "FetchError",
    "IdentityMismatch",
    "InvalidURL",
    "PolitenessConfig",
    "RenderConfig",
    "ScopeConfig",
    "StoreError",
    "StoreLocked",
    "WebtrawlError",
    "__version__",
    "crawl",
]
