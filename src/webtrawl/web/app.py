"""The dashboard application: `create_app(Site)` builds it; `webtrawl serve DIR` runs it with uvicorn.

Routes live in modules by what they show: `browse` (overview, pages, search, page detail, and their JSON
API), `archive` (archived copies), `live` (events, metrics, control). Templates share `base.html`.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from .. import __version__
from .site import Site

TOKEN_COOKIE = "webtrawl_token"


def create_app(site: Site) -> FastAPI:
    from . import archive, browse, live

    app = FastAPI(title="webtrawl dashboard", version=__version__)
    app.state.site = site
    app.mount("/static", StaticFiles(directory=str(files("webtrawl.web") / "static")), name="static")
    app.include_router(browse.router)
    app.include_router(archive.router)
    app.include_router(live.router)
    if site.token:
        _require_token(app, site.token)
    return app


def _require_token(app: FastAPI, token: str) -> None:
    """Every request carries the token: `?token=` once (it is then kept in a cookie), the cookie, or a
    `Authorization: Bearer` header."""

    @app.middleware("http")
    async def check(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        given = (
            request.query_params.get("token")
            or request.cookies.get(TOKEN_COOKIE)
            or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        )
        if not given or not hmac.compare_digest(given, token):
            return JSONResponse({"error": "a valid token is required"}, status_code=401)
        response: Response = await call_next(request)
        if request.query_params.get("token"):
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        return response
