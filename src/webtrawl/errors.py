"""webtrawl's exceptions: one tree, so callers catch ours and never a library's.

    WebtrawlError
    ├── ConfigError          a setting the user gave is invalid (bad regex, bad value)
    │   └── IdentityMismatch resuming a crawl with different seeds, scope or normalization
    ├── InvalidURL           a string is not a crawlable http(s) URL
    ├── StoreError           the crawl directory or its database cannot be used
    │   ├── StoreLocked      another process owns the crawl directory
    │   ├── RedisUnavailable the distributed mode's Redis cannot be reached or used
    │   └── CrawlGone        a distributed crawl's state vanished from Redis while it ran
    └── FetchError           a request failed (wrapped aiohttp/OS errors; carries a short reason)

The CLI turns ConfigError, InvalidURL and StoreError into a one-line message and exit code 2.
"""

from __future__ import annotations


class WebtrawlError(Exception):
    """Base of every error webtrawl raises on purpose."""


class ConfigError(WebtrawlError):
    """A setting is invalid; the message names it and says what is expected."""


class IdentityMismatch(ConfigError):
    """A crawl was resumed with settings that change what it is (seeds, scope, normalization)."""


class InvalidURL(WebtrawlError):
    """A string is not a crawlable http(s) URL."""


class StoreError(WebtrawlError):
    """The crawl directory or its database cannot be used."""


class StoreLocked(StoreError):
    """Another process holds the crawl directory's lock."""


class RedisUnavailable(StoreError):
    """The Redis that holds a distributed crawl cannot be reached; the message names the URL and the cause."""


class CrawlGone(StoreError):
    """The crawl's settings are no longer in Redis (a Redis restarted with nothing on disk, or flushed)."""


class ShardsUnreachable(StoreError):
    """A crawl Redis lost is to be rebuilt from its shards, and some of them cannot be read here; the message
    names them and the ways on."""


class NodeExited(WebtrawlError):
    """The node `webtrawl crawl --redis` started beside itself failed; it said why on stderr."""


class FetchError(WebtrawlError):
    """A request failed before a usable response arrived."""

    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
