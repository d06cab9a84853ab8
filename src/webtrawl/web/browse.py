"""Browsing a crawl: the overview, the pages list, search and one capture's detail, as pages and as JSON.

| page              | JSON                  | shows                                                   |
|-------------------|-----------------------|---------------------------------------------------------|
| `/`               | `/api/overview`       | URL states, captures, bytes, statuses, failures, drops  |
| `/pages`          | `/api/pages`          | every capture, filtered, sorted, keyset-paginated       |
| `/search?q=…`     | `/api/search?q=…`     | full-text matches, best first, with snippets            |
| `/page/{id}`      | `/api/page/{id}`      | one capture: headers, timings, redirects, links, WARC   |
|                   | `/api/page/{id}/in-links`, `…/out-links` | its links, a page at a time          |

Each page and its JSON come from the same model (`models`), so they cannot disagree. Lists say how many
they hold in all ("1,234 pages"), when that can be counted quickly. The overview's cards are the live
reading's (`live`), the same the page then updates every second. A filter or query a person
typed wrong is answered with a message in the page (200). `/api/pages` answers 400 for a bad filter or
cursor; `/api/search` answers like its page, with no hits and `error` set (a search box passes on whatever
was typed).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal, cast, get_args

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from ..store import browse as store
from ..store import detail, listing
from ..store.links import link_page
from ..store.overview import overview
from .live import live_view
from .models import DetailOut, HitOut, LinkOut, LinksOut, OverviewOut, PageOut, PagesOut, SearchOut
from .site import Site
from .templating import link, render, site_of

router = APIRouter()

PAGE_SIZE = 50
SEARCH_PAGE_SIZE = 20
LINKS_PAGE_SIZE = 50
Limit = Annotated[int, Query(ge=1, le=500, description="Rows per page.")]


# -- overview ----------------------------------------------------------------------------------------


def _overview(request: Request) -> OverviewOut:
    with site_of(request).sources() as sources:
        return OverviewOut.model_validate(overview(sources))


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def overview_page(request: Request) -> Response:
    overview = await run_in_threadpool(_overview, request)
    live = await live_view(request.app).current()
    return render(request, "browse_overview.html", overview=overview, live=live)


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
    with site_of(request).sources() as sources:
        found = listing.list_pages_of(
            sources,
            filters.parse(),
            sort=sort,
            descending=direction == "desc",
            after=after,
            before=before,
            limit=limit,
        )
        total = listing.count_pages_of(sources, filters.parse())
        unreachable = [place.key for place in sources.unreachable]
    return PagesOut(
        rows=[PageOut.model_validate(row) for row in found.rows],
        next=found.next,
        next_url=found.next and link(request, after=found.next, before=None),
        previous=found.previous,
        previous_url=found.previous and link(request, before=found.previous, after=None),
        partial=found.partial,
        total=total,
        unreachable_shards=unreachable,
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
    return render(request, "browse_pages.html", **context)


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
    with site_of(request).sources() as sources:
        return listing.hosts_of(sources)


# -- search ------------------------------------------------------------------------------------------


def _search(request: Request, q: str, filters: _Filters, after: str | None, limit: int) -> SearchOut:
    with site_of(request).sources() as sources:
        try:
            found = listing.search_of(sources, q, filters.parse(), after=after, limit=limit)
        except store.QueryError as exc:
            return SearchOut(q=q, hits=[], next=None, next_url=None, unindexed=0, error=str(exc))
        total = listing.count_matches_of(sources, q, filters.parse())
        unreachable = [place.key for place in sources.unreachable]
    return SearchOut(
        q=q,
        hits=[HitOut.model_validate(hit) for hit in found.hits],
        next=found.next,
        next_url=found.next and link(request, after=found.next),
        unindexed=found.unindexed,
        partial=found.partial,
        ranked=found.ranked,
        total=total,
        unreachable_shards=unreachable,
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
    return render(request, "browse_search.html", q=q, result=result, filters=filters.values, hosts=hosts)


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
    site = site_of(request)
    with site.sources() as sources:
        found = detail.detail(sources, capture_id)
    if found is None:
        raise HTTPException(404, f"no capture {capture_id} in this crawl")
    fields = {**asdict(found), "warc_here": _warc_here(site, found.warc_file)}
    if found.repeats is not None:
        fields["repeats"]["warc_here"] = _warc_here(site, found.repeats.warc_file)
    return DetailOut.model_validate(fields)


def _warc_here(site: Site, name: str | None) -> bool:
    return site.record_path(name or "") is not None


def _links(request: Request, capture_id: int, direction: str, after: int | None, limit: int, cursor: str) -> LinksOut:
    """One page of the capture's links; `cursor` names the query parameter its next page is asked with."""
    with site_of(request).sources() as sources:
        found = link_page(sources, capture_id, direction, after=after, limit=limit)
    if found is None:
        raise HTTPException(404, f"no capture {capture_id} in this crawl")
    following = None if found.next is None else str(found.next)
    return LinksOut(
        rows=[LinkOut.model_validate(row) for row in found.rows],
        total=found.total,
        next=following,
        next_url=following and link(request, **{cursor: following}),
    )


def _cursor(value: str) -> int | None:
    """A link list's cursor as typed in the address: a damaged one starts from the first page."""
    try:
        return int(value)
    except ValueError:
        return None


@router.get("/page/{capture_id:int}", response_class=HTMLResponse, include_in_schema=False)
async def detail_page(request: Request, capture_id: int, in_after: str = "", out_after: str = "") -> Response:
    try:
        found = await run_in_threadpool(_detail, request, capture_id)
        out_links = await run_in_threadpool(
            _links, request, capture_id, "out", _cursor(out_after), LINKS_PAGE_SIZE, "out_after"
        )
        in_links = await run_in_threadpool(
            _links, request, capture_id, "in", _cursor(in_after), LINKS_PAGE_SIZE, "in_after"
        )
    except HTTPException as exc:
        return render(request, "browse_missing.html", status_code=exc.status_code, message=exc.detail)
    return render(request, "browse_page.html", capture=found, out_links=out_links, in_links=in_links)


@router.get("/api/page/{capture_id:int}", response_model=DetailOut, tags=["browse"])
async def detail_api(request: Request, capture_id: int) -> DetailOut:
    """One capture: request and response headers, timings, redirects, links in and out, where its WARC record is."""
    return await run_in_threadpool(_detail, request, capture_id)


@router.get("/api/page/{capture_id:int}/in-links", response_model=LinksOut, tags=["browse"])
async def in_links_api(
    request: Request,
    capture_id: int,
    after: Annotated[int | None, Query(description="the `next` cursor of the page before")] = None,
    limit: Limit = LINKS_PAGE_SIZE,
) -> LinksOut:
    """The pages that link to this capture's URL, a page at a time (follow `next_url`)."""
    return await run_in_threadpool(_links, request, capture_id, "in", after, limit, "after")


@router.get("/api/page/{capture_id:int}/out-links", response_model=LinksOut, tags=["browse"])
async def out_links_api(
    request: Request,
    capture_id: int,
    after: Annotated[int | None, Query(description="the `next` cursor of the page before")] = None,
    limit: Limit = LINKS_PAGE_SIZE,
) -> LinksOut:
    """The URLs this capture links to, a page at a time (follow `next_url`)."""
    return await run_in_threadpool(_links, request, capture_id, "out", after, limit, "after")
