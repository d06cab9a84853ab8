"""When a fetched URL is due again: an adaptive interval per URL, after Nutch's AdaptiveFetchSchedule.

A URL starts at the shortest interval. Each re-fetch that finds the content changed shortens it (×0.8),
one that finds it unchanged (a 304, or the same digest) lengthens it (×1.4), within the crawl's bounds:
pages that change often are visited often, pages that never change drift toward the longest interval.
A URL that failed for good (a 404 of a removed page) is treated as unchanged: it is looked at again,
less and less often, so a page that comes back is found. Every ended fetch gets a due time, so a later
`--recrawl` knows what to fetch, whether or not this run re-crawls.
"""

from __future__ import annotations

from .config import RevisitConfig
from .models import Previous

CHANGED = 0.8
UNCHANGED = 1.4


def next_interval(config: RevisitConfig, previous: Previous | None, changed: bool) -> float:
    """The URL's interval from this fetch on."""
    if previous is None or previous.interval is None:
        return config.min_interval
    factor = CHANGED if changed else UNCHANGED
    interval = previous.interval * factor if previous.interval > 0 else config.min_interval * factor
    return min(config.max_interval, max(config.min_interval, interval))
