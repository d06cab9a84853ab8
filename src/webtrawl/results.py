"""What a handler (`pages.PageHandler`, `media.handler.MediaHandler`) hands the committer for one URL, what the
crawl hands it of the files it fetched for itself, and the rule the handlers follow when an attempt failed in a
way that asking again may fix."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from .config import FetchConfig
from .fetch.page import Rendering
from .models import Completion, Entry, FetchOutcome, Resource


@dataclass(slots=True)
class PageResult:
    """A completion on its way to the committer, with what the archive needs."""

    completion: Completion
    outcome: FetchOutcome | None = None
    """The response to archive (None when nothing was received)."""
    decoded: bytes | None = None
    """The decoded body, for the mirror."""
    rendering: Rendering | None = None
    """What the browser made of the page, when it was rendered: its requests' responses are archived too."""


@dataclass(slots=True)
class SiteFiles:
    """Responses the crawl fetched for itself (robots.txt, sitemaps) on their way to the archive, which keeps
    them as the evidence of what the crawl was allowed and told; they are no URL of the frontier."""

    outcomes: list[FetchOutcome]
    archived: list[Resource] = field(default_factory=list)
    """Their records, as the archive thread wrote them."""


Result = PageResult | SiteFiles
"""What the archiver takes, a batch at a time."""


@dataclass(slots=True)
class Archived:
    """A batch as the archive thread left it for the committer: what the commit writes, and no body, so a
    batch waiting for the database holds its pages' findings but not their bytes."""

    pages: list[Completion]
    site_files: list[Resource]
    checkpoint: dict[str, int]
    """Each WARC file's end after the batch's records."""

    @classmethod
    def of(cls, batch: list[Result], checkpoint: dict[str, int]) -> Archived:
        pages = [result.completion for result in batch if isinstance(result, PageResult)]
        site_files = [file for result in batch if isinstance(result, SiteFiles) for file in result.archived]
        return cls(pages, site_files, checkpoint)


def retry_or_fail(fetch: FetchConfig, entry: Entry, reason: str, retry_after: float | None = None) -> Completion:
    """Retry later with exponential backoff and jitter while the attempt and wait budgets last."""
    attempt = entry.attempts + 1
    waited = fetch.backoff * (2**entry.attempts - 1)
    wait = retry_after if retry_after is not None else fetch.backoff * 2**entry.attempts * random.uniform(0.75, 1.25)
    if attempt >= fetch.max_attempts or waited + wait > fetch.max_retry_wait:
        return Completion(entry=entry, verdict="failed", reason=f"{reason} (after {attempt} attempts)")
    return Completion(entry=entry, verdict="retry", reason=reason, not_before=time.time() + wait)
