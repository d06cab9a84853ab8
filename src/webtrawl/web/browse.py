"""Browsing a crawl: the overview, the pages list, search and one capture's detail, as pages and as JSON.

| page              | JSON                  | shows                                                   |
|-------------------|-----------------------|---------------------------------------------------------|
| `/`               | `/api/overview`       | URL states, captures, bytes, statuses, failures, drops  |
| `/pages`          | `/api/pages`          | every capture, filtered, sorted, keyset-paginated       |
| `/search?q=…`     | `/api/search?q=…`     | full-text matches, best first, with snippets            |
| `/page/{id}`      | `/api/page/{id}`      | one capture: headers, timings, redirects, links, WARC   |

Each page and its JSON come from the same model, so they cannot disagree. A filter or query a person
typed wrong is answered with a message in the page (200). `/api/pages` answers 400 for a bad filter or
cursor; `/api/search` answers like its page, with no hits and `error` set (a search box passes on whatever
was typed).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, cast, get_args
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, ConfigDict, computed_field
from starlette.concurrency import run_in_threadpool

from ..store import browse as store
from ..store import detail
from ..store.overview import overview
from ..store.replay import record_path
from .site import Site
from .templating import templates

router = APIRouter()

PAGE_SIZE = 50
SEARCH_PAGE_SIZE = 20
Limit = Annotated[int, Query(ge=1, le=500, description="Rows per page.")]


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


# -- overview ----------------------------------------------------------------------------------------


def _overview(request: Request) -> OverviewOut:
    with _site(request).reader() as (conn, crawl_id):
        return OverviewOut.model_validate(overview(conn, crawl_id))


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def overview_page(request: Request) -> Response:
    overview = await run_in_threadpool(_overview, request)
    return _render(request, "browse_overview.html", overview=overview)


@router.get("/api/overview", response_model=OverviewOut, tags=["browse"])
async def overview_api(request: Request) -> OverviewOut:
    """The crawl's totals: URL states, captures and bytes, statuses, failures and drops by reason, queue by depth."""
    return await run_in_threadpool(_overview, request)


# -- pages -------------------------------------------------------------------------------------------

Sort = Literal["fetched", "url", "size", "status"]
Direction = Literal["asc", "desc"]


class _Filters:
    """The filter parameters every list takes, read as typed (a bad value becomes a message, not a 422)."""

    def __init__(
        self,
        status: Annotated[str, Query(description="404, a class like 4xx, or none (no response)")] = "",
        content_type: Annotated[str, Query(alias="type", description="content type, e.g. text/html")] = "",
        host: Annotated[str, Query(description="host, host:port, or an origin (https://host:port)")] = "",
        depth: Annotated[str, Query(description="depth, a whole number")] = "",
    ) -> None:
        self.values = {"status": status, "type": content_type, "host": host, "depth": depth}

    def parse(self) -> store.Filters:
        depth = self.values["depth"].strip()
        if depth and not depth.isdigit():
            raise store.QueryError(f"depth {depth!r} is not a whole number")
        return store.Filters(
            status=self.values["status"],
            content_type=self.values["type"],
            host=self.values["host"],
            depth=int(depth) if depth else None,
        )


def _pages(
    request: Request,
    filters: _Filters,
    sort: Sort,
    direction: Direction,
    after: str | None,
    before: str | None,
    limit: int,
) -> PagesOut:
    with _site(request).reader() as (conn, crawl_id):
        found = store.list_pages(
            conn,
            crawl_id,
            filters.parse(),
            sort=sort,
            descending=direction == "desc",
            after=after,
            before=before,
            limit=limit,
        )
    return PagesOut(
        rows=[PageOut.model_validate(row) for row in found.rows],
        next=found.next,
        next_url=found.next and _link(request, after=found.next, before=None),
        previous=found.previous,
        previous_url=found.previous and _link(request, before=found.previous, after=None),
        partial=found.partial,
    )


@router.get("/pages", response_class=HTMLResponse, include_in_schema=False)
async def pages_page(
    request: Request,
    filters: Annotated[_Filters, Depends()],
    sort: str = "fetched",
    direction: Annotated[str, Query(alias="dir")] = "asc",
    after: str | None = None,
    before: str | None = None,
    limit: Limit = PAGE_SIZE,
) -> Response:
    context: dict[str, Any] = {"filters": filters.values, "sort": sort, "dir": direction}
    try:
        if sort not in get_args(Sort) or direction not in get_args(Direction):
            raise store.QueryError(
                f"cannot sort by {sort!r} {direction!r}: by fetched, url, size or status, asc or desc"
            )
        context["pages"] = await run_in_threadpool(
            _pages, request, filters, cast(Sort, sort), cast(Direction, direction), after, before, limit
        )
    except store.QueryError as exc:
        context["error"] = str(exc)
    context["hosts"] = await run_in_threadpool(_hosts, request)
    return _render(request, "browse_pages.html", **context)


@router.get("/api/pages", response_model=PagesOut, tags=["browse"])
async def pages_api(
    request: Request,
    filters: Annotated[_Filters, Depends()],
    sort: Sort = "fetched",
    direction: Annotated[Direction, Query(alias="dir")] = "asc",
    after: Annotated[str | None, Query(description="the `next` cursor of the page before")] = None,
    before: Annotated[str | None, Query(description="the `previous` cursor of the page after")] = None,
    limit: Limit = PAGE_SIZE,
) -> PagesOut:
    """Every capture (a URL fetched twice is listed twice), one page at a time: follow `next_url` (or
    `previous_url` back)."""
    try:
        return await run_in_threadpool(_pages, request, filters, sort, direction, after, before, limit)
    except store.QueryError as exc:
        raise HTTPException(400, str(exc)) from None


def _hosts(request: Request) -> list[str]:
    with _site(request).reader() as (conn, crawl_id):
        return store.hosts(conn, crawl_id)


# -- search ------------------------------------------------------------------------------------------


def _search(request: Request, q: str, filters: _Filters, after: str | None, limit: int) -> SearchOut:
    with _site(request).reader() as (conn, crawl_id):
        try:
            found = store.search(conn, crawl_id, q, filters.parse(), after=after, limit=limit)
        except store.QueryError as exc:
            return SearchOut(q=q, hits=[], next=None, next_url=None, unindexed=0, error=str(exc))
    return SearchOut(
        q=q,
        hits=[HitOut.model_validate(hit) for hit in found.hits],
        next=found.next,
        next_url=found.next and _link(request, after=found.next),
        unindexed=found.unindexed,
        partial=found.partial,
        ranked=found.ranked,
    )


@router.get("/search", response_class=HTMLResponse, include_in_schema=False)
async def search_page(
    request: Request,
    filters: Annotated[_Filters, Depends()],
    q: str = "",
    after: str | None = None,
    limit: Limit = SEARCH_PAGE_SIZE,
) -> Response:
    result = await run_in_threadpool(_search, request, q, filters, after, limit) if q.strip() else None
    hosts = await run_in_threadpool(_hosts, request)
    return _render(request, "browse_search.html", q=q, result=result, filters=filters.values, hosts=hosts)


@router.get("/api/search", response_model=SearchOut, tags=["browse"])
async def search_api(
    request: Request,
    filters: Annotated[_Filters, Depends()],
    q: Annotated[str, Query(description='words, "a phrase", prefix*, AND / OR / NOT, parentheses')],
    after: Annotated[str | None, Query(description="the `next` cursor of the page before")] = None,
    limit: Limit = SEARCH_PAGE_SIZE,
) -> SearchOut:
    """Full-text search over title, URL and text, best first (bm25), with the matched words marked."""
    return await run_in_threadpool(_search, request, q, filters, after, limit)


# -- one capture -------------------------------------------------------------------------------------


def _detail(request: Request, capture_id: int) -> DetailOut:
    site = _site(request)
    with site.reader() as (conn, crawl_id):
        found = detail.detail(conn, crawl_id, capture_id)
    if found is None:
        raise HTTPException(404, f"no capture {capture_id} in this crawl")
    fields = {**asdict(found), "warc_here": _warc_here(site, found.warc_file)}
    if found.repeats is not None:
        fields["repeats"]["warc_here"] = _warc_here(site, found.repeats.warc_file)
    return DetailOut.model_validate(fields)


def _warc_here(site: Site, name: str | None) -> bool:
    return record_path(site.directory, name or "") is not None


@router.get("/page/{capture_id:int}", response_class=HTMLResponse, include_in_schema=False)
async def detail_page(request: Request, capture_id: int) -> Response:
    try:
        found = await run_in_threadpool(_detail, request, capture_id)
    except HTTPException as exc:
        return _render(request, "browse_missing.html", status_code=exc.status_code, message=exc.detail)
    return _render(request, "browse_page.html", capture=found)


@router.get("/api/page/{capture_id:int}", response_model=DetailOut, tags=["browse"])
async def detail_api(request: Request, capture_id: int) -> DetailOut:
    """One capture: request and response headers, timings, redirects, links in and out, where its WARC record is."""
    return await run_in_threadpool(_detail, request, capture_id)


# -- helpers -----------------------------------------------------------------------------------------


def _site(request: Request) -> Site:
    site: Site = request.app.state.site
    return site


def _link(request: Request, **changes: str | None) -> str:
    """This page's path and query with some parameters changed (None removes one); the token never travels."""
    params: dict[str, str | None] = {k: v for k, v in request.query_params.items() if k != "token"}
    params.update(changes)
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{request.url.path}?{query}" if query else request.url.path


def _render(request: Request, name: str, *, status_code: int = 200, **context: Any) -> Response:
    context.update(site=_site(request), fmt=Format, link=lambda **changes: _link(request, **changes))
    return templates.TemplateResponse(request, name, context, status_code=status_code)


class Format:
    """How numbers and times read on the pages (the JSON keeps the raw values)."""

    @staticmethod
    def time(at: float | None) -> str:
        return "" if at is None else datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")

    @staticmethod
    def size(n: int) -> str:
        if n < 1000:
            return f"{n} B"
        value, unit = n / 1000, "kB"
        for bigger in ("MB", "GB", "TB"):
            if value < 1000:
                break
            value, unit = value / 1000, bigger
        return f"{value:.1f} {unit}"

    @staticmethod
    def seconds(s: float | None) -> str:
        if s is None:
            return ""
        if s < 1:
            return f"{s * 1000:.3g} ms"
        if s < 60:
            return f"{s:.3g} s" if s < 10 else f"{s:.0f} s"
        minutes, sec = divmod(int(s), 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours}h {minutes:02d}m {sec:02d}s" if hours else f"{minutes}m {sec:02d}s"

    @staticmethod
    def count(n: int) -> str:
        return f"{n:,}"
