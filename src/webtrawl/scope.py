"""Scope: is this URL in the crawl, and if not, why.

`Scope.check` runs for every link of every page, so it works on the normalized URL string by slicing
(see `urls`) and applies its rules cheapest first. Each refusal has a short reason that the crawl counts
and shows the user:

    url-too-long            longer than max_url_length
    out-of-scope            not on a seed's host / domain / path prefix (per the scope mode)
    deny-pattern            a deny regex matches (searched anywhere in the normalized URL)
    not-allowed             allow regexes are given and none matches
    too-many-query-params   more than max_query_params query parameters
    repeated-path-segments  a path segment occurs more than max_repeated_segments times (a/b/a/b/a/b/a)
    meaningless-symbols     the last path segment has too many symbols (only when that limit is set)
    binary-extension        the path names a file that is not a page (.jpg, .zip, …)
    too-deep                deeper than max_depth

Depth is checked last, so a URL is refused for a reason of its own whenever it has one; that reason holds
at every depth, and only "too-deep" depends on where the URL was found (see `DEPTH_ONLY_REASONS`).

Scheme and userinfo never matter for scope: `http://` and `https://` of one host are the same site.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol
from urllib.parse import unquote

from .config import BINARY_EXTENSIONS, REQUISITE_EXTENSIONS, ScopeConfig
from .urls import host_key

DEPTH_ONLY_REASONS = frozenset({"too-deep"})
"""Reasons that depend on the depth a URL was found at: such a URL must not be remembered as seen, so a
shorter path to it can still bring it in."""

_PLAIN_SYMBOLS = frozenset("-_.~")

VERDICTS = 4096
"""URLs whose verdict (at any depth) `Scope.check` remembers. Most links of a page are links every page
has (navigation, footers); judging one again costs ~1.8 µs, remembering it a dict lookup. When full, the
memory starts over, as does a growing scope's. (Judging the links of 8,000 pages of the benchmark site in
random order took as long with 4,096 as with 16,384, which costs ~3 MB more.)"""
_UNJUDGED = "unjudged"  # no reason is this string: `verdicts.get(url, _UNJUDGED) is _UNJUDGED` means unknown


class SharedHosts(Protocol):
    """How the processes of one crawl share the hosts its scope gains (seeds that redirect elsewhere): the
    nodes of a distributed crawl (`cluster.scopehosts`). An embedded crawl is one process and needs none."""

    async def record(self, host: str) -> None:
        """Make `host` the crawl's before anything found through it enters the frontier."""

    async def learn(self, moment: float) -> None:
        """Put in the scope every host the crawl had gained at some time after `moment` (monotonic)."""


class Scope:
    """Decides, per normalized URL and depth, whether the crawl may visit it.

    Modes: `host` — the host key (host and port) of a seed; `domain` — a seed's host name without a
    leading `www.`, and every subdomain of it, on any port; `prefix` — a seed's host key and its path up
    to and including the last `/`; `any` — every host.
    """

    def __init__(self, config: ScopeConfig, seeds: Sequence[str]) -> None:
        """`seeds` must be normalized (`urls.normalize`)."""
        self._mode = config.mode
        self._max_length = config.max_url_length
        self._max_depth = config.max_depth
        self._max_params = config.max_query_params
        self._max_repeats = config.max_repeated_segments
        self._max_symbols = config.max_meaningless_symbols
        self._deny = tuple(re.compile(pattern) for pattern in config.deny)
        self._allow = tuple(re.compile(pattern) for pattern in config.allow)
        self._binary = BINARY_EXTENSIONS - REQUISITE_EXTENSIONS if config.page_requisites else BINARY_EXTENSIONS
        self._hosts: set[str] = set()
        self._domains: set[str] = set()
        self._prefixes: dict[str, tuple[str, ...]] = {}
        """Per host key, the path prefixes in scope (mode prefix)."""
        self._seed_prefixes: tuple[str, ...] = ()
        """Every seed's path prefix: what a host added later gets (mode prefix)."""
        self._seed_hosts = frozenset(host_key(seed) for seed in seeds)
        self._verdicts: dict[str, str | None] = {}
        """Per URL, `_verdict` (every reason but depth's)."""
        for seed in seeds:
            host = host_key(seed)
            path = _path(seed)
            prefix = path[: path.rfind("/") + 1]
            self._prefixes[host] = (*self._prefixes.get(host, ()), prefix)
            if prefix not in self._seed_prefixes:
                self._seed_prefixes += (prefix,)
            self._add(host)

    @property
    def hosts(self) -> frozenset[str]:
        """Host keys of the seeds and of every host added since."""
        return frozenset(self._hosts)

    @property
    def host_count(self) -> int:
        """How many hosts `hosts` has (it only grows), without copying them."""
        return len(self._hosts)

    def has_host(self, host: str) -> bool:
        return host in self._hosts

    def is_seed_host(self, host: str) -> bool:
        return host in self._seed_hosts

    def add_host(self, host: str) -> None:
        """Put the host key `host` in scope too (a seed redirected to it).

        In mode `prefix` the new host gets the seeds' path prefixes (`http://a/docs/` moving to
        `https://b/docs/` keeps `/docs/`); a host already in scope keeps its own.
        """
        if host not in self._prefixes:
            self._prefixes[host] = self._seed_prefixes
        self._add(host)

    def _add(self, host: str) -> None:
        self._hosts.add(host)
        self._verdicts.clear()  # a URL out of scope may be in now
        name = _hostname(host)
        self._domains.add(name[4:] if name.startswith("www.") else name)

    def check(self, url: str, depth: int) -> str | None:
        """None if the normalized `url`, found at `depth`, is in scope; otherwise the reason it is not."""
        if len(url) > self._max_length:  # not remembered: a hostile page's huge URLs would outlive it
            return "url-too-long"
        verdicts = self._verdicts
        verdict = verdicts.get(url, _UNJUDGED)
        if verdict is _UNJUDGED:
            verdict = self._verdict(url)
            if len(verdicts) >= VERDICTS:
                verdicts.clear()
            verdicts[url] = verdict
        if verdict is None and self._max_depth is not None and depth > self._max_depth:
            return "too-deep"
        return verdict

    def _verdict(self, url: str) -> str | None:
        """Why `url`, no longer than the limit, is out of scope at any depth, or None."""
        path_start = url.find("/", url.find("://") + 3)
        query_start = url.find("?", path_start)
        path = url[path_start:query_start] if query_start >= 0 else url[path_start:]
        if self._mode != "any" and not self._in_scope(host_key(url), path):
            return "out-of-scope"
        for pattern in self._deny:
            if pattern.search(url):
                return "deny-pattern"
        if self._allow and not any(pattern.search(url) for pattern in self._allow):
            return "not-allowed"
        if query_start >= 0 and _too_many_params(url[query_start + 1 :], self._max_params):
            return "too-many-query-params"
        if path.count("/") > self._max_repeats and _has_repeats(path, self._max_repeats):
            return "repeated-path-segments"
        last = path[path.rfind("/") + 1 :]
        if self._max_symbols is not None and _symbols(last) > self._max_symbols:
            return "meaningless-symbols"
        if _extension(last) in self._binary:
            return "binary-extension"
        return None

    def _in_scope(self, host: str, path: str) -> bool:
        if self._mode == "host":
            return host in self._hosts
        if self._mode == "prefix":
            prefixes = self._prefixes.get(host)
            return prefixes is not None and path.startswith(prefixes)
        # domain: the host name itself or any parent of it is a seed's domain
        name = _hostname(host)
        domains = self._domains
        while name not in domains:
            dot = name.find(".")
            if dot < 0:
                return False
            name = name[dot + 1 :]
        return True


def is_requisite_path(url: str) -> bool:
    """Whether the normalized `url` names a file a page needs to display (image, font, CSS, script)."""
    path = _path(url)
    return _extension(path[path.rfind("/") + 1 :]) in REQUISITE_EXTENSIONS


def _path(url: str) -> str:
    """The path of a normalized URL (fragments are already gone)."""
    start = url.find("/", url.find("://") + 3)
    end = url.find("?", start)
    return url[start:end] if end >= 0 else url[start:]


def _hostname(host: str) -> str:
    """A host key without its port (`[::1]:8080` → `[::1]`)."""
    colon = host.rfind(":")
    return host[:colon] if colon > host.rfind("]") else host


def _extension(segment: str) -> str:
    """The lowercased extension of a path segment ('' when it has none)."""
    dot = segment.rfind(".")
    return segment[dot + 1 :].lower() if dot >= 0 else ""


def _too_many_params(query: str, limit: int) -> bool:
    """More than `limit` non-empty `&`-separated parameters in `query`."""
    if query.count("&") < limit:  # at most limit parameters: no need to look closer
        return False
    return sum(1 for param in query.split("&") if param) > limit


def _has_repeats(path: str, limit: int) -> bool:
    """Whether some segment of `path` occurs more than `limit` times (a trailing slash adds none)."""
    segments = path[1:].split("/")
    if len(segments) - len(set(segments)) < limit:  # too few duplicates: the common, cheap answer
        return False
    if not segments[-1]:
        segments.pop()
    counts: dict[str, int] = {}
    for segment in segments:
        count = counts.get(segment, 0) + 1
        if count > limit:
            return True
        counts[segment] = count
    return False


def _symbols(segment: str) -> int:
    """Characters of the percent-decoded `segment` that are neither alphanumeric nor `-_.~`."""
    if "%" in segment:
        segment = unquote(segment)
    return sum(1 for char in segment if not char.isalnum() and char not in _PLAIN_SYMBOLS)
