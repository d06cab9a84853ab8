"""Resolvers: which media a page holds, and where each one's bytes are right now.

A resolver reads a fetched page (`find`) and names its media as tasks: a stable id (a track id, or the
normalized direct address) that the crawl stores and deduplicates. Each download attempt asks it again for
the real address (`resolve`), because sites hand out signed addresses that expire or are bound to the
client that asked. A page is read by the first resolver whose host patterns match it, and always by the
generic resolver (the detector of `parse.media`, addresses used as they are), which is the fallback for
every site no resolver knows. Third-party resolvers register under the entry point group
`webtrawl.resolvers` (see the README for a complete example).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote, unquote

import aiohttp
from yarl import URL

from ..errors import ConfigError
from ..fetch.failures import describe_error
from ..models import MediaRef, NewURL
from ..urls import fingerprint, host_key, origin
from .download import read_at_most

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "webtrawl.resolvers"
MARK = "#webtrawl-media="
"""Frontier entries of media tasks are their start URL with this fragment and the resolver's name (and the
id, unless it is the URL itself): fragments never reach a server, and no page URL (normalized, so without
a fragment) can be equal to one."""
PLAYLIST = "playlist"
"""The name of the tasks that read a playlist (found by the generic detector) for the media it lists."""
MAX_REPLY = 1024 * 1024
"""Bytes of a page or API answer a resolver may read."""


@dataclass(frozen=True, slots=True)
class MediaTask:
    """One media file to collect, as its resolver names it."""

    resolver: str
    id: str
    url: str
    """Where resolving starts: the direct address, or the page that knows the media. Its host's robots.txt
    and pace apply to the task."""

    @property
    def entry_url(self) -> str:
        suffix = self.resolver if self.id == self.url else f"{self.resolver}:{quote(self.id, safe='')}"
        return self.url + MARK + suffix

    @property
    def key(self) -> str:
        """`resolver:id`, as the index records the task."""
        return f"{self.resolver}:{self.id}"

    @classmethod
    def from_entry_url(cls, entry_url: str) -> MediaTask:
        url, _, suffix = entry_url.partition(MARK)
        resolver, colon, quoted = suffix.partition(":")
        return cls(resolver, unquote(quoted) if colon else url, url)

    def new_url(self, depth: int, referrer_fp: int) -> NewURL:
        entry_url = self.entry_url
        return NewURL(
            url=entry_url,
            fp=fingerprint(entry_url),
            host=origin(self.url),
            depth=depth,
            kind="media",
            referrer_fp=referrer_fp,
        )


@dataclass(frozen=True, slots=True)
class Resolved:
    """Where a task's bytes are for this attempt, and what the request must carry to get them."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = ""
    """What the address is known to serve, when it is (a stream's manifest is collected as a stream)."""


@dataclass(frozen=True, slots=True)
class Page:
    """What a resolver sees of a fetched HTML page."""

    url: str
    html: str
    refs: list[MediaRef]
    """What the generic detector found on it (only the kinds the crawl collects)."""


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    url: str

    def json(self) -> Any:
        return json.loads(self.body)


class ResolveError(Exception):
    """A task's address could not be found now (`retryable`) or ever."""

    def __init__(self, reason: str, *, retryable: bool = True) -> None:
        super().__init__(reason)
        self.retryable = retryable


class MediaClient:
    """HTTP for resolvers: the crawl's media session, whose cookies and User-Agent downloads share."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    @property
    def user_agent(self) -> str:
        return self._session.headers.get("User-Agent", "")

    async def get(self, url: str, *, headers: dict[str, str] | None = None) -> Reply:
        """GET `url` (redirects followed), reading at most `MAX_REPLY` bytes; raises `ResolveError`."""
        try:
            async with self._session.get(URL(url), headers=headers) as resp:
                body = await read_at_most(resp, MAX_REPLY)
                return Reply(resp.status, dict(resp.headers), body, str(resp.url))
        except (aiohttp.ClientError, TimeoutError, ConnectionError) as exc:
            reason, retryable = describe_error(exc)
            raise ResolveError(f"{reason} ({url})", retryable=retryable) from None


@runtime_checkable
class Resolver(Protocol):
    name: str
    hosts: tuple[str, ...]
    """Patterns (`fnmatch`, case-sensitive) of the host keys whose pages it reads, e.g. "music.example"."""

    def find(self, page: Page) -> Iterable[MediaTask]: ...

    async def resolve(self, task: MediaTask, client: MediaClient) -> Resolved: ...


class GenericResolver:
    """Media addresses as the page shows them: nothing to resolve."""

    name = "generic"
    hosts: tuple[str, ...] = ()

    def find(self, page: Page) -> Iterable[MediaTask]:
        return [MediaTask(PLAYLIST if ref.kind == "playlist" else self.name, ref.url, ref.url) for ref in page.refs]

    async def resolve(self, task: MediaTask, client: MediaClient) -> Resolved:
        return Resolved(task.url)


class Registry:
    """The resolvers of a crawl: the generic one and the installed ones (`only` names a subset).

    A resolver with `opt_in = True` (yt-dlp's bridge) is used only when named. One with a `collects(kinds)`
    method is told which kinds the crawl collects. Catch-all resolvers (host pattern "*") read a page only
    when no resolver of a more precise pattern does.
    """

    def __init__(self, only: Iterable[str] = (), kinds: Iterable[str] = ()) -> None:
        self.generic = GenericResolver()
        wanted = tuple(only)
        found: dict[str, Resolver] = {self.generic.name: self.generic}
        broken: dict[str, str] = {}
        for point in entry_points(group=ENTRY_POINT_GROUP):
            if point.name in found:
                continue
            try:
                loaded = point.load()
                if getattr(loaded, "opt_in", False) and point.name not in wanted:
                    continue
                resolver = loaded() if isinstance(loaded, type) else loaded
            except Exception as exc:  # a broken plugin must not stop a crawl that may not need it
                broken[point.name] = str(exc)
                if point.name not in wanted:
                    log.warning("media resolver %r could not be loaded: %s", point.name, exc)
                continue
            if not isinstance(resolver, Resolver):
                log.warning("media resolver %r is not a resolver (needs name, hosts, find, resolve)", point.name)
                continue
            if callable(collects := getattr(resolver, "collects", None)):
                collects(tuple(kinds))
            found.setdefault(resolver.name, resolver)
        for name in wanted:
            if name in broken:
                raise ConfigError(f"resolver {name!r} cannot be used: {broken[name]}")
        unknown = sorted(set(wanted) - set(found))
        if unknown:
            known = ", ".join(sorted(found))
            raise ConfigError(f"unknown resolver(s) {', '.join(unknown)} (installed: {known})")
        chosen = [r for name, r in found.items() if not wanted or name in wanted]
        chosen.sort(key=lambda r: r.hosts == ("*",))  # stable: catch-alls last, the rest as installed
        self._resolvers = {r.name: r for r in chosen}

    def tasks(self, page: Page) -> list[MediaTask]:
        """The page's media: as the first resolver whose hosts match names them, and as the generic one sees
        them (a file both name is downloaded once per task; the second copy is recorded as a duplicate)."""
        host = host_key(page.url)
        found: dict[str, MediaTask] = {}
        for resolver in self._resolvers.values():
            if resolver is not self.generic and any(fnmatchcase(host, pattern) for pattern in resolver.hosts):
                found.update((task.key, task) for task in resolver.find(page))
                break
        if self.generic.name in self._resolvers:
            found.update((task.key, task) for task in self.generic.find(page))
        return list(found.values())

    def get(self, name: str) -> Resolver | None:
        return self._resolvers.get(name)
