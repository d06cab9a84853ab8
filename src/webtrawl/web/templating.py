"""The dashboard's Jinja2 templates (`web/templates/`), and what every page is rendered with: the site, the
number and time formats, and links to the page itself with some parameters changed."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.resources import files
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import Response
from fastapi.templating import Jinja2Templates

from .site import Site

templates = Jinja2Templates(directory=str(files(__package__) / "templates"))
"""Autoescaping is on for .html templates: every crawled string is escaped."""


def site_of(request: Request) -> Site:
    site: Site = request.app.state.site
    return site


def link(request: Request, **changes: str | None) -> str:
    """This page's path and query with some parameters changed (None removes one); the token never travels."""
    params: dict[str, str | None] = {k: v for k, v in request.query_params.items() if k != "token"}
    params.update(changes)
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{request.url.path}?{query}" if query else request.url.path


def render(request: Request, name: str, *, status_code: int = 200, **context: Any) -> Response:
    context.update(site=site_of(request), fmt=Format, link=lambda **changes: link(request, **changes))
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

    @staticmethod
    def counted(n: int | None, one: str, many: str) -> str:
        """ "1 page", "1,234 pages"; "" for a count not known."""
        return "" if n is None else f"{n:,} {one if n == 1 else many}"
