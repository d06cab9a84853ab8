"""The dashboard application: `create_app(Site)` builds it; `webtrawl serve DIR` runs it with uvicorn.

Routes live in modules by what they show: `browse` (overview, pages, search, page detail, and their JSON
API), `problems` (failed and dropped URLs), `archive` (archived copies), `live` (events, metrics, control).
Templates share `base.html`.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from .. import __version__
from .site import Site

TOKEN_COOKIE = "webtrawl_token"
STATIC = files("webtrawl.web") / "static"


def create_app(site: Site) -> FastAPI:
    from . import archive, browse, live, problems

    app = FastAPI(title="webtrawl dashboard", version=__version__)
    app.state.site = site
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.include_router(browse.router)
    app.include_router(problems.router)
    app.include_router(archive.router)
    app.include_router(live.router)

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        """Browsers ask for it whatever the page says: the same icon `base.html` names."""
        return FileResponse(str(STATIC / "favicon.svg"), media_type="image/svg+xml")
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
