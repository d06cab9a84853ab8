"""The dashboard's JSON shapes: what `/api/…` answers, and what the pages are rendered from.

Each page and its JSON come from the same model, so they cannot disagree.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, computed_field


class _Model(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class _Capture(_Model):
    """A capture, with the addresses of its details and its archived copy."""

    id: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def detail(self) -> str:
        return f"/page/{self.id}"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def archive(self) -> str:
        return f"/archive/{self.id}"


class PageOut(_Capture):
    url: str
    title: str
    status: int | None
    content_type: str
    size: int
    depth: int | None
    fetched_at: float
    error: str | None
    thumbnail: bool


class PagesOut(_Model):
    rows: list[PageOut]
    next: str | None
    """The cursor of the next page (`after`), None on the last."""
    next_url: str | None
    previous: str | None
    """The cursor of the page before (`before`), None on the first."""
    previous_url: str | None
    partial: bool
    """A filtered page that stopped reading after a quarter of a second with fewer rows than `limit` (the
    filter matches few captures): `next_url` reads on from there."""
    total: int | None
    """Captures matching the filters, all pages together; null when counting them took too long."""
    unreachable_shards: list[str] = []
    """Shards of the crawl (host:path) this machine cannot read: what their nodes fetched is not among these."""


class SegmentOut(_Model):
    text: str
    match: bool


class HitOut(_Model):
    page: PageOut
    score: float | None
    """bm25, lower is better; null when the search is not ranked."""
    title: list[SegmentOut]
    snippet: list[SegmentOut]


class SearchOut(_Model):
    q: str
    hits: list[HitOut]
    next: str | None
    next_url: str | None
    unindexed: int
    partial: bool = False
    """Fewer hits than `limit` because the page ran out of time, not of matches: `next_url` reads on."""
    ranked: bool = True
    """False when the words match more than 100,000 captures: hits come in capture order, not by relevance."""
    error: str | None = None
    """Why the query could not be read (then `hits` is empty)."""
    total: int | None = None
    """Captures matching, all pages together; null when counting them took too long (or on an error)."""
    unreachable_shards: list[str] = []
    """Shards of the crawl (host:path) this machine cannot read: what their nodes fetched is not among these."""


class DueOut(_Model):
    now: int
    within_hour: int
    within_day: int
    later: int
    next_at: float | None


class OverviewOut(_Model):
    state: str
    done: int
    waiting: int
    running: int
    failed: int
    waiting_by_depth: dict[int, int]
    captures: int
    bytes: int
    statuses: dict[int, int]
    failures: dict[str, int]
    drops: dict[str, int]
    started_at: float
    last_fetch_at: float | None
    elapsed: float
    pages_per_second: float
    unindexed: int
    due: DueOut
    """Ended URLs by when their revisit is due."""


class LinkOut(_Model):
    url: str
    capture_id: int | None
    state: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def detail(self) -> str | None:
        return None if self.capture_id is None else f"/page/{self.capture_id}"


class CaptureRef(_Model):
    id: int
    fetched_at: float
    status: int | None


class RepeatedOut(_Capture):
    """The capture whose content an unchanged capture repeats."""

    fetched_at: float
    status: int | None
    warc_file: str | None
    node: str | None
    warc_here: bool
    """Whether its WARC file is in this crawl directory: the unchanged capture's archived copy is read from it."""


class RequestOut(_Model):
    """A request a rendered page made: sent (and archived), or refused with why."""

    method: str
    """"" for one refused: the crawl keeps a refused URL's reason only."""
    url: str
    status: int | None
    content_type: str
    record_bytes: int | None
    """The length of its response's WARC record, as stored (compressed)."""
    refused: str | None


class DetailOut(_Model):
    page: PageOut
    kind: str | None
    state: str | None
    reason: str | None
    referrer: LinkOut | None
    redirects: list[str]
    location: LinkOut | None
    request_headers: list[tuple[str, str]]
    response_headers: list[tuple[str, str]]
    ip: str | None
    ttfb: float | None
    elapsed: float | None
    truncated: str | None
    etag: str | None
    last_modified: str | None
    payload_digest: str | None
    warc_file: str | None
    warc_offset: int | None
    warc_length: int | None
    node: str | None
    warc_here: bool
    """Whether the WARC file is in this crawl directory (a distributed crawl's node may keep it on its disk)."""
    unchanged: bool
    """A re-fetch that brought nothing new (a 304, or the same payload digest): its WARC record is a revisit
    record, and its archived copy is that of `repeats`."""
    repeats: RepeatedOut | None
    """For an unchanged capture, the earlier capture whose content it repeats (null when the crawl has none)."""
    captures: list[CaptureRef]
    out_links: list[LinkOut]
    out_total: int
    in_links: list[LinkOut]
    in_total: int
    requests: list[RequestOut]
    """A rendered page's requests, in the order they ended, then those refused (empty for a page not rendered)."""


class LinksOut(_Model):
    """One page of a capture's in-links or out-links."""

    rows: list[LinkOut]
    total: int
    next: str | None
    """The cursor of the next page (`after`), None on the last."""
    next_url: str | None


class FailedOut(_Model):
    url: str
    reason: str
    attempts: int
    depth: int
    updated_at: float
    """When it failed."""
    capture_id: int | None
    referrer: str | None
    """The page that linked it first (null for a seed, or a URL a sitemap gave)."""
    referrer_capture_id: int | None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def detail(self) -> str | None:
        return None if self.capture_id is None else f"/page/{self.capture_id}"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def referrer_detail(self) -> str | None:
        return None if self.referrer_capture_id is None else f"/page/{self.referrer_capture_id}"


class DroppedOut(_Model):
    url: str
    reason: str
    referrer: str | None
    """The page that linked it."""
    referrer_capture_id: int | None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def referrer_detail(self) -> str | None:
        return None if self.referrer_capture_id is None else f"/page/{self.referrer_capture_id}"


class _Problems(_Model):
    next: str | None
    """The cursor of the next page (`after`), None on the last."""
    next_url: str | None
    reason: str
    """The reason filtered on ("" for all)."""
    total: int
    """URLs in the list with this filter, all pages together."""
    reasons: dict[str, int]
    """Every reason and how many URLs it holds, most first."""


class FailedListOut(_Problems):
    rows: list[FailedOut]


class DroppedListOut(_Problems):
    rows: list[DroppedOut]
