"""webtrawl: a breadth-first, resumable, polite web crawler that archives to WARC and indexes to SQLite."""

from __future__ import annotations

__version__ = "0.1.0"

import asyncio
from pathlib import Path
from typing import Any

from .config import CrawlConfig, FetchConfig, PolitenessConfig, RenderConfig, ScopeConfig
from .crawler import Crawler
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


def crawl(*seeds: str, out: str | Path, **settings: Any) -> CrawlReport:
    """Run a crawl to its end (or a limit) and return its report; blocking.

    `settings` are `CrawlConfig` fields: `crawl("https://example.org/", out="dir", max_pages=100,
    scope=ScopeConfig(mode="domain"))`.
    """
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
