"""`ResourceCache`: what rendered pages load (styles, scripts, fonts, images) kept for the pages after them."""

from __future__ import annotations

from collections import OrderedDict

from ..models import FetchOutcome

STATIC_TYPES = ("text/css", "image/", "font/", "application/font", "application/x-font")
SCRIPT_TYPES = frozenset({"application/javascript", "text/javascript", "application/x-javascript", "text/ecmascript"})


class ResourceCache:
    """Responses to rendered pages' requests kept in memory, so one stylesheet shared by a thousand pages is
    fetched and archived once per run. Bounded in bytes; least recently used first out."""

    MAX_ENTRY = 2 * 1024 * 1024
    MAX_TOTAL = 64 * 1024 * 1024

    def __init__(self) -> None:
        self._entries: OrderedDict[str, FetchOutcome] = OrderedDict()
        self._size = 0

    def get(self, url: str) -> FetchOutcome | None:
        """The response to `url` once its records are in the archive (`FetchOutcome.archived`): a page whose
        result was not archived (tried again, unchanged) leaves the next page to fetch it again."""
        found = self._entries.get(url)
        if found is None or not found.archived:
            return None
        self._entries.move_to_end(url)
        return found

    def put(self, outcome: FetchOutcome) -> None:
        """Keep a static file (style, script, font, image); answers to a page's calls (JSON, HTML) may change
        from one call to the next, and are fetched each time."""
        cache_control = (outcome.header("Cache-Control") or "").lower()
        if outcome.status != 200 or outcome.truncated or "no-store" in cache_control:
            return
        if not outcome.content_type.startswith(STATIC_TYPES) and outcome.content_type not in SCRIPT_TYPES:
            return
        if len(outcome.body) > self.MAX_ENTRY or outcome.url in self._entries:
            return
        self._entries[outcome.url] = outcome
        self._size += len(outcome.body)
        while self._size > self.MAX_TOTAL:
            _url, old = self._entries.popitem(last=False)
            self._size -= len(old.body)
