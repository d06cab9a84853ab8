"""The awkward corners of the test site, each linked from "/" or from a shallow tree page.

| path(s)                               | what it tests                                                     |
|---------------------------------------|-------------------------------------------------------------------|
| /docs → 301 /docs/ (+ intro/, guide/) | directory redirect; relative links resolve against the final URL  |
| /old-page → 302 /moved/               | a moved page, reachable only through the redirect                 |
| /old-home → 301 /                     | a redirect to a page already fetched                              |
| /hop/1 → /hop/2 → /hop/3 → /chain-end/| a chain of three redirects (302, 303, 307)                        |
| /away → 302 http://localhost:PORT/    | a redirect to another host key: out of scope                      |
| http://localhost:PORT/, example.invalid| links to other hosts: out of scope                               |
| /missing/0/ … /missing/2/             | broken links (404)                                                |
| /broken/                              | always 500                                                        |
| /files/*.png, *.pdf                   | binary extensions: never fetched                                  |
| /files/notes.txt, /files/data.json    | fetched, not parsed; they name /from-text/, which no page links  |
| /private/, /private/ledger/           | disallowed by robots.txt, linked from normal pages                |
| /privateer/                           | allowed: robots rules are path prefixes, and /private/ is not one |
| /sponsored/                           | only reachable through a rel=nofollow link                        |
| /meta-nofollow/ → /hidden/one/, two/  | meta robots nofollow; the only way to the /hidden/ pages          |
| /based/ → /base-target/child/         | `<base href>`: "child/" resolves against the base, not the page   |
| /trap/x/x/…                           | relative "x/" grows the path forever; stopped by repeated segments |
| /calendar/2026/01/                    | previous/next month forever (only when the calendar is on)        |
| mailto:, javascript:, tel:            | links that are not http                                           |
"""

from __future__ import annotations

import base64
import json

from .build import Builder, Draft
from .routes import Route

CALENDAR_START = "/calendar/2026/01/"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


def add_specials(b: Builder, hosts: list[Draft], *, other_origin: str, calendar: bool) -> None:
    """Draft the special pages and routes; link them from "/" or a random page in `hosts`."""
    root = b.drafts["/"]

    def host() -> Draft:
        return b.rng.choice(hosts) if hosts else root

    root.link(b.href("docs", "/docs"))
    b.redirect("/docs", 301, "/docs/", "/docs/")
    b.draft("/docs/", gzip=True).link(b.href("intro/", "/docs/intro/")).link(b.href("guide/", "/docs/guide/"))
    b.draft("/docs/intro/").link(b.href("../", "/docs/")).link(b.href("../guide/#top", "/docs/guide/"))
    b.draft("/docs/guide/").link(b.href("../../", "/"))

    host().link(b.href("/old-page", "/old-page"))
    b.redirect("/old-page", 302, b.origin + "/moved/", "/moved/")
    b.draft("/moved/", chunked=True).link(b.href("/", "/"))
    host().link(b.href("/old-home", "/old-home"))
    b.redirect("/old-home", 301, "/", "/")
    host().link(b.href("/hop/1", "/hop/1"))
    b.redirect("/hop/1", 302, "/hop/2", "/hop/2")
    b.redirect("/hop/2", 303, b.origin + "/hop/3", "/hop/3")
    b.redirect("/hop/3", 307, "../chain-end/", "/chain-end/")
    b.draft("/chain-end/", gzip=True, chunked=True).link(b.href("/", "/"))

    host().link(b.href("/away", "/away"))
    b.redirect("/away", 302, other_origin + "/", other_origin + "/")
    root.link(b.href(other_origin + "/", other_origin + "/"))
    root.link(b.href("http://example.invalid/", "http://example.invalid/"))

    for k in range(3):
        host().link(b.href(f"/missing/{k}/", f"/missing/{k}/"))
    host().link(b.href("/broken/", "/broken/"))
    b.routes["/broken/"] = Route(500, body=b"<!doctype html><title>Error</title><h1>500 Server Error</h1>\n")

    files = host()
    for name in ("logo.png", "report.pdf", "notes.txt", "data.json"):
        files.link(b.href(f"/files/{name}", f"/files/{name}"))
    b.routes["/files/logo.png"] = Route(200, "image/png", PNG)
    b.routes["/files/report.pdf"] = Route(200, "application/pdf", PDF)
    notes = 'Notes, not a page. This is not a link: <a href="/from-text/">from text</a>.\n'
    b.routes["/files/notes.txt"] = Route(200, "text/plain; charset=utf-8", notes.encode(), gzip=True)
    data = json.dumps({"title": "Data", "see": "/from-text/", "pages": len(b.drafts)}).encode()
    b.routes["/files/data.json"] = Route(200, "application/json", data, chunked=True)
    b.draft("/from-text/").link(b.href("/", "/"))

    root.link(b.href("/private/", "/private/"))
    host().link(b.href("/private/ledger/", "/private/ledger/"))
    b.draft("/private/").link(b.href("ledger/", "/private/ledger/")).link(b.href("/", "/"))
    b.draft("/private/ledger/").link(b.href("../", "/private/"))
    host().link(b.href("/privateer/", "/privateer/"))
    b.draft("/privateer/").link(b.href("/", "/"))

    host().link(b.href("/sponsored/", "/sponsored/", nofollow=True))
    b.draft("/sponsored/").link(b.href("/", "/"))
    host().link(b.href("/meta-nofollow/", "/meta-nofollow/"))
    hidden = b.draft("/meta-nofollow/", meta_nofollow=True)
    hidden.link(b.href("/hidden/one/", "/hidden/one/")).link(b.href("/hidden/two/", "/hidden/two/"))
    b.draft("/hidden/one/").link(b.href("../two/", "/hidden/two/"))
    b.draft("/hidden/two/").link(b.href("../one/", "/hidden/one/"))

    host().link(b.href("/based/", "/based/"))
    b.draft("/based/", base="/base-target/").link(b.href("child/", "/base-target/child/"))
    b.draft("/base-target/child/").link(b.href("../../", "/"))

    host().link(b.href("/trap/", "/trap/"))
    if calendar:
        root.link(b.href(CALENDAR_START[1:], CALENDAR_START))
    for written in ("mailto:webmaster@example.invalid", "javascript:void(0)", "tel:+15550100"):
        root.link(b.href(written, written))
    root.link(b.href(b.origin, "/"))
