"""webtrawl: a breadth-first, resumable, polite web crawler that archives to WARC and indexes to SQLite."""

from __future__ import annotations

__version__ = "0.1.0"

import asyncio
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
    from .reader import open as open  # webtrawl.open; not in __all__, to spare the builtin


def __getattr__(name: str) -> Any:
    # The engine (aiohttp, the store, the browser driver) is imported when first asked for, so that a
    # process that needs only a part, such as the page-reading worker (`python -m webtrawl.parse`), does not
    # load it all.
    if name == "Crawler":
        from .crawler import Crawler

        return Crawler
    if (
        name == "open"
    ):  # `webtrawl.open(DIR)`: a crawl directory read from Python (not in __all__: it is a builtin's name)
        from .reader import open

        return open
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def crawl(*seeds: str, **settings: Any) -> CrawlReport:
    """Run a crawl to its end (or a limit) and return its report; blocking (where an event loop runs, as in
    Jupyter or an async program, `await crawl_async(...)` instead).

    `settings` are the `webtrawl crawl` command's flags by name, with the same values:
    `crawl("https://example.org/", out="dir", max_depth=2, delay="1s", scope="domain", max_size="5MB")`;
    `config="crawl.toml"` reads a settings file first (the keywords win); a whole part of the config may be
    given as one (`fetch=FetchConfig(...)`). A bad setting raises `ConfigError` naming it.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(crawl_async(*seeds, **settings))
    raise WebtrawlError(
        "webtrawl.crawl() blocks, and an event loop already runs here (Jupyter, an async program): "
        "use `await webtrawl.crawl_async(...)` with the same arguments"
    )


async def crawl_async(*seeds: str, **settings: Any) -> CrawlReport:
    """`crawl`, awaited in the caller's event loop."""
    from .crawler import Crawler
    from .settings import for_api

    return await Crawler(for_api(seeds, settings)).run()


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
    "crawl_async",
]
