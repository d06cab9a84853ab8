"""What the test site serves: one `Route` per path, and the `Href`s inside its pages.

A link carries both the text written in the page and the URL a correct crawler resolves it to, so the
ground truth never parses HTML and a test can check either side.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

HTML = "text/html; charset=utf-8"
ROBOTS_DISALLOW = "/private/"
"""The one rule of the site's robots.txt (for every user agent)."""
NOT_FOUND = b"<!doctype html><title>Not Found</title><h1>404 Not Found</h1>\n"


@dataclass(frozen=True, slots=True)
class Href:
    """A link as written in a page (`href`) and the URL it resolves to (`url`: normalized, no fragment)."""

    href: str
    url: str
    nofollow: bool = False
    """Written with `rel="nofollow noopener"`."""


@dataclass(frozen=True, slots=True)
class Route:
    """What the server answers for one path."""

    status: int
    content_type: str = HTML
    body: bytes = b""
    links: tuple[Href, ...] = ()
    """The links in `body` a crawler parses (empty unless the body is an HTML page)."""
    redirect: Href | None = None
    """For a 3xx: the Location header as sent (`href`) and where it points (`url`)."""
    meta_nofollow: bool = False
    gzip: bool = False
    """Sent with Content-Encoding: gzip when the request accepts gzip."""
    chunked: bool = False
    """Sent with Transfer-Encoding: chunked, in several pieces."""


def render_html(
    title: str, text: str, links: list[Href], *, meta_nofollow: bool = False, base: str | None = None
) -> bytes:
    """A small HTML page: title, a paragraph, then one `<a>` per `Href`, in order."""
    esc = html.escape
    head = [f"<title>{esc(title)}</title>"]
    if meta_nofollow:
        head.append('<meta name="robots" content="nofollow">')
    if base:
        head.append(f'<base href="{esc(base)}">')
    items = [
        f'<li><a href="{esc(link.href)}"{_REL if link.nofollow else ""}>{esc(link.href.strip())}</a></li>\n'
        for link in links
    ]
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n{"".join(head)}\n</head><body>\n'
        f'<h1 id="top">{esc(title)}</h1>\n<p>{esc(text)}</p>\n<ul>\n{"".join(items)}</ul>\n</body></html>\n'
    ).encode()


_REL = ' rel="nofollow noopener"'
