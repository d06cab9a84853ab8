"""The dashboard application: `create_app(Site)` builds it; `webtrawl serve DIR` runs it with uvicorn.

Routes live in modules by what they show: `browse` (overview, pages, search, page detail, and their JSON
API), `problems` (failed and dropped URLs), `archive` (archived copies), `live` (events, metrics, control).
Templates share `base.html`. Around them all: `token` (when set), `headers` (no framing, HEAD as GET).
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from .. import __version__
from .headers import HeadAsGet, NoFraming
from .site import Site
from .token import require_token

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
        require_token(app, site.token)
    app.add_middleware(NoFraming)  # outside the token check: a 401 is not framed either
    app.add_middleware(HeadAsGet)
    return app
