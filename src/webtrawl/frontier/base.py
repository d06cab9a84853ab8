"""The `Frontier` protocol: the one source of truth for URL state, batch-first.

Contracts every backend keeps (a contract test suite runs against each):
- `add` ignores URLs it has seen, except that a URL still waiting takes the smaller depth.
- With budgets, a URL new to the frontier is added only while its host, and its template, have fewer
  URLs than their budget (seeds always; sitemap entries regardless of the template budget); one over
  budget is recorded as dropped ("host-budget", "template-budget"). A URL already there never counts
  again, and the counts survive a reopen.
- `claim(n)` hands out at most `n` waiting URLs, only of hosts the politeness state says are ready
  (it reserves their slots); per host the smallest depth goes first, and across hosts the lowest ready
  depth. A handed-out URL is `running` until it comes back through `complete`.
- `complete` commits a batch atomically: children are added (and link edges recorded) before their
  parent is marked done, captures and drop counts are written, and the archive checkpoint (each WARC
  file's committed end) is recorded with them.
- `exhausted()` is true when nothing is waiting (not even a retry later) and nothing is running; with
  children-before-completion this means the crawl is finished.
- URLs left `running` by a process that died go back to `waiting` when the frontier is opened again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ..models import Completion, Entry, FrontierCounts, NewURL, Resource


class Frontier(Protocol):
    async def add(self, urls: Sequence[NewURL], drops: Sequence[tuple[str, str]] = ()) -> int:
        """Add URLs (seeds, sitemap entries); returns how many were new (or found at a smaller depth).

        `drops` are (url, reason) pairs refused before reaching the frontier (by the scope), recorded
        with the URLs so the report counts them.
        """
        ...

    async def claim(self, n: int) -> list[Entry]:
        """Hand out up to `n` URLs from ready hosts, reserving their hosts' slots."""
        ...

    async def complete(
        self, batch: Sequence[Completion], checkpoint: Mapping[str, int], site_files: Sequence[Resource] = ()
    ) -> None:
        """Commit a batch of results, the site files archived with it (robots.txt, sitemaps) and the archive
        checkpoint in one atomic step."""
        ...

    async def counts(self) -> FrontierCounts:
        """How many URLs are in each state (and waiting ones by depth)."""
        ...

    def done_count(self) -> int:
        """URLs done so far by the whole crawl (all runs): the measure of --max-pages."""
        ...

    @property
    def running(self) -> int:
        """URLs handed out by this process and not yet completed."""
        ...

    def exhausted(self) -> bool:
        """Nothing waiting, nothing running: the crawl is finished."""
        ...

    def next_wakeup(self) -> float | None:
        """Seconds until a waiting URL may become claimable (a host's delay or a retry); None if none waits."""
        ...

    async def close(self) -> None:
        """Return URLs this process still holds to waiting and release resources."""
        ...
