"""The URLs a crawl could not or would not fetch, listed with why: the overview's failure and drop counts
lead here.

| page        | JSON            | shows                                                              |
|-------------|-----------------|--------------------------------------------------------------------|
| `/failed`   | `/api/failed`   | failed URLs: reason, attempts, depth, when, the capture if any      |
| `/dropped`  | `/api/dropped`  | dropped URLs: reason and the page that linked them                  |

Both read the crawl as its sources (every readable shard of a distributed crawl, as one: `store.problems`) and
take `reason` (exactly as listed; "" for all), `after` (the `next` cursor) and `limit`. A cursor that
cannot be read is answered like a bad filter of the pages list: a message in the page, 400 from the API.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from ..store.problems import list_dropped, list_failed
from .models import DroppedListOut, DroppedOut, FailedListOut, FailedOut
from .templating import link, render, site_of

router = APIRouter()

PAGE_SIZE = 50
Limit = Annotated[int, Query(ge=1, le=500, description="Rows per page.")]
Reason = Annotated[str, Query(description="only URLs with this reason, exactly as listed")]
After = Annotated[str, Query(description="the `next` cursor of the page before")]


def _after(after: str) -> int | None:
    if not after:
        return None
    try:
        return int(after)
    except ValueError:
        raise ValueError("this page's link is damaged: start from the first page") from None


def _failed(request: Request, reason: str, after: str, limit: int) -> FailedListOut:
    with site_of(request).sources() as sources:
        found = list_failed(sources, reason, after=_after(after), limit=limit)
    following = None if found.next is None else str(found.next)
    return FailedListOut(
        rows=[FailedOut.model_validate(row) for row in found.rows],
        next=following,
        next_url=following and link(request, after=following),
        reason=reason,
        total=found.total,
        reasons=found.reasons,
    )


def _dropped(request: Request, reason: str, after: str, limit: int) -> DroppedListOut:
    with site_of(request).sources() as sources:
        found = list_dropped(sources, reason, after=_after(after), limit=limit)
    following = None if found.next is None else str(found.next)
    return DroppedListOut(
        rows=[DroppedOut.model_validate(row) for row in found.rows],
        next=following,
        next_url=following and link(request, after=following),
        reason=reason,
        total=found.total,
        reasons=found.reasons,
    )


@router.get("/failed", response_class=HTMLResponse, include_in_schema=False)
async def failed_page(request: Request, reason: Reason = "", after: After = "", limit: Limit = PAGE_SIZE) -> Response:
    try:
        found = await run_in_threadpool(_failed, request, reason, after, limit)
    except ValueError as exc:
        return render(request, "browse_failed.html", error=str(exc), reason=reason)
    return render(request, "browse_failed.html", found=found, reason=reason)


@router.get("/api/failed", response_model=FailedListOut, tags=["browse"])
async def failed_api(
    request: Request, reason: Reason = "", after: After = "", limit: Limit = PAGE_SIZE
) -> FailedListOut:
    """Failed URLs in the order they were found, with why they failed; `reasons` counts every reason."""
    try:
        return await run_in_threadpool(_failed, request, reason, after, limit)
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None


@router.get("/dropped", response_class=HTMLResponse, include_in_schema=False)
async def dropped_page(request: Request, reason: Reason = "", after: After = "", limit: Limit = PAGE_SIZE) -> Response:
    try:
        found = await run_in_threadpool(_dropped, request, reason, after, limit)
    except ValueError as exc:
        return render(request, "browse_dropped.html", error=str(exc), reason=reason)
    return render(request, "browse_dropped.html", found=found, reason=reason)


@router.get("/api/dropped", response_model=DroppedListOut, tags=["browse"])
async def dropped_api(
    request: Request, reason: Reason = "", after: After = "", limit: Limit = PAGE_SIZE
) -> DroppedListOut:
    """URLs the crawl refused and never took, with the reason and the page that linked them; `reasons` counts
    every reason."""
    try:
        return await run_in_threadpool(_dropped, request, reason, after, limit)
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None
