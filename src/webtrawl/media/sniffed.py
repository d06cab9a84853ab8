"""Media that players revealed while their page was rendered (the sniffer): tasks with a stable identity.

A player often gets its media's address from an API when it runs, signed for this client and valid for
minutes. Such an address is a poor name for a task: the next load of the page gives another. A sniffed task
is named by the address without the query parameters that sign or date it (`stable_id`), so the same media
played on two pages, or on two loads, is one task; its host's robots.txt and pace apply. The address itself,
with the Referer and cookies the browser sent, is kept in memory (`Sniffs`) for the download that follows.
When that address is gone (another run, another node) or refused (it expired), the page the task was found
on is rendered again for a fresh one (`SniffedResolver.resolve`); that rendering is not archived again.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..fetch.page import Sniffed
from .resolvers import MediaClient, MediaTask, Resolved, ResolveError

SNIFFED = "sniffed"
"""The resolver name of sniffed tasks."""
MAX_KEPT = 10_000
"""Fresh addresses kept for their tasks (the oldest are forgotten: their pages are rendered again)."""
_SIGNING = re.compile(
    r"(?:sig|signature|token|auth|hash|hmac|nonce|policy|key-pair-id|acl|expires?|exp|e|st|ts|t|ttl|"
    r"validfrom|validto|hdnts|hdnea|x-amz-.*|x-goog-.*)",
    re.IGNORECASE,
)
"""Query parameters that sign an address or date it, rather than name what it serves."""


def stable_id(url: str) -> str:
    """The address without its signing and dating query parameters: the same media on every load."""
    parts = urlsplit(url)
    kept = [
        (name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True) if not _SIGNING.fullmatch(name)
    ]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), ""))


class Sniffs:
    """The addresses players revealed in this process, waiting for their tasks' downloads."""

    def __init__(self) -> None:
        self._fresh: OrderedDict[str, Sniffed] = OrderedDict()

    def tasks(self, sniffed: Iterable[Sniffed], kinds: Iterable[str], known: set[str]) -> list[MediaTask]:
        """The page's sniffed media of the kinds collected (stream manifests always), as tasks; addresses in
        `known` (found in the page's HTML) are tasks already."""
        wanted = {*kinds, "playlist"}
        found: dict[str, MediaTask] = {}
        for media in sniffed:
            if media.url in known or (media.kind and media.kind not in wanted):
                continue
            name = stable_id(media.url)
            task = MediaTask(SNIFFED, name, name)
            found[task.entry_url] = task
            self._fresh[task.entry_url] = media
            self._fresh.move_to_end(task.entry_url)
        while len(self._fresh) > MAX_KEPT:
            self._fresh.popitem(last=False)
        return list(found.values())

    def take(self, task: MediaTask) -> Sniffed | None:
        """The address last sniffed for `task`, once: a second attempt asks the page again."""
        return self._fresh.pop(task.entry_url, None)


class SniffedResolver:
    """Where a sniffed task's bytes are: the address its player revealed, else a fresh one from rendering the
    page it was found on again (`render()` gives what that page's players asked for then)."""

    name = SNIFFED
    hosts: tuple[str, ...] = ()

    def __init__(self, sniffs: Sniffs, render: Callable[[], Awaitable[list[Sniffed]]] | None) -> None:
        self._sniffs = sniffs
        self._render = render

    def find(self, page: object) -> list[MediaTask]:
        return []  # its tasks come from renderings (`Sniffs.tasks`), not from a page's HTML

    async def resolve(self, task: MediaTask, client: MediaClient) -> Resolved:
        media = self._sniffs.take(task)
        if media is None:
            if self._render is None:
                raise ResolveError("its page must be rendered again for a fresh address (--render)", retryable=False)
            media = next((m for m in await self._render() if stable_id(m.url) == task.id), None)
            if media is None:
                raise ResolveError(f"its page no longer plays {task.id}")
        return Resolved(media.url, headers=dict(media.headers), content_type=media.content_type)
