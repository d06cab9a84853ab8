"""Archived copies: every capture served from its WARC record, framed by a banner that says what it is.

- `/archive/{id}`: a dashboard page with a banner (URL, fetch time, status, links to the page's detail
  and to the original) above the copy in a sandboxed iframe.
- `/archive/{id}/raw`: the copy itself. HTML (and CSS) comes back with every URL in it rewritten into the
  archive; anything else as archived, under its own Content-Type.
- `/archive/{id}/source`: the body as received (Content-Encoding undone) as plain text, never rendered.
- `/archive/{id}/thumbnail`: a rendered page's thumbnail (`--screenshots`).
- `/archive/url/{timestamp}/{url}`: the copy of `url` captured nearest to `timestamp` (UTC
  `yyyymmddhhmmss`, or a prefix of it): what rewritten links and images point to. A top-level visit
  (`Sec-Fetch-Dest: document`) is sent to the capture's banner page instead.
- `/archive/not-archived?url=…`: where links to URLs the crawl has no copy of lead: never the live web.

A rendered page's copy is the document as its scripts left it (`urn:dom:URL`), and what it loaded (styles,
images, its calls) is found among the requests it made (`resources`): it replays from the WARC alone.

An unchanged capture (a re-crawl's 304, or a 200 with the same payload digest) is archived as a revisit
record, without the payload: each of these serves the content of the capture it repeats (`original_of`),
under the unchanged capture's own time (its banner says both, and its links resolve at its time).

A distributed crawl is read from every shard as one crawl (`store.shards.Sources`): `{id}` is the capture's
crawl-wide id (`Sources.capture_id`), and what a copy leads to (its images and styles, the pages it links to,
the capture it repeats) is looked up in every shard, since another node may have fetched it. A record is read
in the directory of the shard that indexes it. An embedded crawl is its one source, its ids its own.

Archived bytes are the crawled site's, not ours: they always go out under `COPY_HEADERS`, whose
`sandbox` gives the document an opaque origin with scripts disabled (so nothing in it acts as the
dashboard) and whose fetch directives let it load only from the archive. Each copy is also framed with
`<iframe sandbox>`, and its links are rewritten so that none leads out of the archive. The dashboard may
frame the archive's responses, no other site (`frame-ancestors 'self'`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..errors import InvalidURL, StoreError
from ..models import NOT_DOWNLOADED
from ..parse.decode import sniff_charset, to_text
from ..store.replay import (
    ArchivedCapture,
    ArchivedResponse,
    Found,
    archived_in,
    capture_in,
    made_for,
    nearest_capture_in,
    nearest_resource_in,
    original_in,
    read_made,
    read_response,
    record_path,
)
from ..store.shards import Source, Sources
from ..urls import normalize
from .rewrite import Rewriter, archive_address, without_token
from .site import Site
from .templating import templates

router = APIRouter()
log = logging.getLogger(__name__)

_FRAMED_HERE = {"X-Frame-Options": "SAMEORIGIN"}
"""The archive's responses open in the banner's frame (a copy, then the pages its links lead to), so the
dashboard may frame them; no other site may (`frame-ancestors 'self'` in their policies, and this for
browsers without it). Everything else the dashboard serves may not be framed at all (`headers.NoFraming`)."""
COPY_HEADERS = {
    "Content-Security-Policy": "sandbox; default-src 'none'; img-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; font-src 'self'; media-src 'self'; frame-ancestors 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    **_FRAMED_HERE,
}
"""Sent with every response that carries archived bytes."""
_PAGE_HEADERS = {
    "Content-Security-Policy": "frame-ancestors 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    **_FRAMED_HERE,
}
"""Sent with the archive's own pages: following the link to an original tells its site nothing."""

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", ""})
"""Types served as HTML: the crawler parsed a body without a Content-Type as HTML too."""
_TEXT_SUFFIXES = ("+xml", "/xml", "+json", "/json", "/javascript", "/ecmascript")
_OVER_ESCAPED = re.compile(r"%(7C|5E|60|7B|7D|27)", re.IGNORECASE)
"""Escapes a browser may add to a URL where `normalize` keeps the character (Chromium escapes `|` in
paths): a URL not found as it came is looked up again with them undone, then normalized."""
_STAMP_FILL = "00000101000000"
"""What completes a timestamp prefix: `2026` means 2026-01-01 00:00:00."""


@router.get("/archive/{capture_id:int}")
def archived_page(request: Request, capture_id: int) -> Response:
    site: Site = request.app.state.site
    with site.sources() as sources:
        found = _capture(request, sources, capture_id)
        if isinstance(found, Response):
            return found
        holder = _holder(request, sources, found)
        if isinstance(holder, Response):
            return holder
        if _record_file(site, holder.source, holder.capture.warc_file or "") is None:
            return _missing(request, sources, holder, found)
        capture = _named(sources, found)
        context = {"site": site, "capture": capture, "fetched": _when(capture.fetched_at), "stamp": _stamp(capture)}
        if holder is not found:
            context.update(original=_named(sources, holder), original_fetched=_when(holder.capture.fetched_at))
    return templates.TemplateResponse(request, "archive_copy.html", context, headers=_PAGE_HEADERS)


@router.get("/archive/{capture_id:int}/raw")
def archived_copy(request: Request, capture_id: int) -> Response:
    site: Site = request.app.state.site
    with site.sources() as sources:
        found = _capture(request, sources, capture_id)
        return found if isinstance(found, Response) else _copy(request, sources, found)


@router.get("/archive/{capture_id:int}/source")
def archived_source(request: Request, capture_id: int) -> Response:
    """The body as received, Content-Encoding undone: text as UTF-8 plain text, anything else as a download."""
    site: Site = request.app.state.site
    with site.sources() as sources:
        found = _capture(request, sources, capture_id)
        response = found if isinstance(found, Response) else _read(request, sources, found)
    if isinstance(response, Response):
        return response
    declared = response.header("Content-Type") or ""
    mime = declared.partition(";")[0].strip().lower()
    if mime in _HTML_TYPES or mime.startswith("text/") or mime.endswith(_TEXT_SUFFIXES):
        text = to_text(response.body, sniff_charset(response.body, declared))
        return Response(text.encode(), media_type="text/plain; charset=utf-8", headers=COPY_HEADERS)
    headers = {**COPY_HEADERS, "Content-Disposition": "attachment"}
    return Response(response.body, media_type="application/octet-stream", headers=headers)


@router.get("/archive/{capture_id:int}/thumbnail")
def archived_thumbnail(request: Request, capture_id: int) -> Response:
    """The thumbnail of a rendered page (`--screenshots`), as archived."""
    site: Site = request.app.state.site
    with site.sources() as sources:
        found = _capture(request, sources, capture_id)
        if isinstance(found, Response):
            return found
        made = _made(request, found, "thumbnail")
        if made is None:
            text = "This capture was not rendered with --screenshots."
            return _message(request, 404, "No thumbnail", text, _named(sources, found))
    return Response(made, media_type="image/jpeg", headers=COPY_HEADERS)


@router.get("/archive/url/{timestamp}/{target:path}")
def archived_url(request: Request, timestamp: str, target: str) -> Response:
    """The copy of the URL after the timestamp, read from the raw path so its percent escapes are kept."""
    when = _parse_stamp(timestamp)
    if when is None:
        return _message(request, 404, "Not a timestamp", f"{timestamp!r} is not a UTC time as yyyymmddhhmmss.")
    raw_path = request.scope.get("raw_path") or request.url.path.encode()
    # A proxy may have merged the slashes of "http://".
    url = re.sub(r"^(https?:)/+", r"\1//", raw_path.decode("latin-1").split("/", 4)[4])
    site: Site = request.app.state.site
    if query := without_token(request.url.query, site.token):
        url = f"{url}?{query}"
    try:
        url = normalize(url)
    except InvalidURL:
        return _not_archived(request, url)
    with site.sources() as sources:
        found = nearest_capture_in(sources.all, url, when)
        if found is None and _OVER_ESCAPED.search(url):
            unescaped = normalize(_OVER_ESCAPED.sub(lambda match: chr(int(match[1], 16)), url))
            found = nearest_capture_in(sources.all, unescaped, when)
        if found is None:  # a request a rendered page made
            found = nearest_resource_in(sources.all, url, when)
        if found is None:
            return _not_archived(request, url)
        vary = {"Vary": "Sec-Fetch-Dest"}
        if request.headers.get("sec-fetch-dest") == "document" and found.capture.id > 0:
            return _redirect(f"/archive/{_named(sources, found).id}", {**_PAGE_HEADERS, **vary})
        response = _copy(request, sources, found)
    response.headers.update(vary)
    return response


@router.get("/archive/not-archived")
def not_archived(request: Request, url: str = "") -> Response:
    return _not_archived(request, url)


def _capture(request: Request, sources: Sources, capture_id: int) -> Found | Response:
    """Capture `capture_id` (as `Sources.capture_id` names it) if it has a record, else the page that says why
    there is no copy."""
    found = capture_in(sources, capture_id)
    if found is None:
        return _message(request, 404, "No such capture", f"This crawl has no capture {capture_id}.")
    capture = found.capture
    if capture.warc_file is None:
        if capture.truncated == NOT_DOWNLOADED:
            why = "The body was not downloaded: not an HTML page (--fetch-non-html downloads every type)."
        else:
            why = f"The fetch got no response ({capture.error})." if capture.error else "Nothing was archived."
        return _message(request, 404, "No archived copy", why, _named(sources, found))
    return found


def _named(sources: Sources, found: Found) -> ArchivedCapture:
    """`found`'s capture under the id the dashboard's addresses name it by (`Sources.capture_id`): its pages
    link to it. A resource (its id negated: never addressed by id) stays as it is."""
    capture = found.capture
    return replace(capture, id=sources.capture_id(found.source, capture.id)) if capture.id > 0 else capture


def _record_file(site: Site, source: Source, name: str) -> Path | None:
    """WARC file `name` of a record `source` indexes: in the source's directory, or else in the directory of
    a readable shard (a shard folded in with its database alone)."""
    return record_path(source.directory, name) or site.record_path(name)


def _copy(request: Request, sources: Sources, found: Found) -> Response:
    """The archived response of `found`, its URLs rewritten into the archive, under `COPY_HEADERS`."""
    response = _read(request, sources, found)
    if isinstance(response, Response):
        return response
    site: Site = request.app.state.site
    capture = found.capture
    if 300 <= response.status < 400 and (location := capture.location or _location(response, capture.url)):
        # Followed inside the archive: the live Location would leave it.
        return _redirect(archive_address(_stamp(capture), location, site.token), COPY_HEADERS)
    declared = response.header("Content-Type") or ""
    mime = declared.partition(";")[0].strip().lower()
    holder = _holder(request, sources, found)
    shown = holder if isinstance(holder, Found) else found
    if mime in _HTML_TYPES and (rendered := _made(request, shown, "dom")) is not None:
        # A rendered page replays as the browser left it: its scripts never run in the archive.
        response, declared = ArchivedResponse(response.status, response.headers, rendered), "text/html; charset=utf-8"
    if mime not in _HTML_TYPES and mime != "text/css":
        content_type = {"Content-Type": declared or "application/octet-stream"}
        return Response(response.body, headers={**COPY_HEADERS, **content_type})
    text = to_text(response.body, sniff_charset(response.body, declared))
    # A link is archived when any source has its URL: another node may have fetched it.
    rewriter = Rewriter(_stamp(capture), lambda url: archived_in(sources.all, url), site.token)
    if mime == "text/css":
        rewritten, media_type = rewriter.css(text, capture.url), "text/css; charset=utf-8"
    else:
        rewritten, media_type = rewriter.html(text, capture.url), "text/html; charset=utf-8"
    return Response(rewritten.encode(), media_type=media_type, headers=COPY_HEADERS)


def _location(response: ArchivedResponse, url: str) -> str | None:
    """Where an archived redirect leads, normalized; None when it says nowhere usable."""
    try:
        return normalize(response.header("Location") or "", url) if response.header("Location") else None
    except InvalidURL:
        return None


def _made(request: Request, found: Found, kind: str) -> bytes | None:
    """The record webtrawl made for a rendered page (`dom`, `thumbnail`), or None when there is none to read.
    It is in the page's own source: the node that rendered the page wrote it."""
    site: Site = request.app.state.site
    source, capture = found.source, found.capture
    made = made_for(source.conn, source.crawl_id, capture, kind)
    path = _record_file(site, source, made[0]) if made else None
    if made is None or path is None:
        return None
    try:
        return read_made(path, made[1], made[2], f"urn:{kind}:{capture.url}")
    except StoreError as exc:
        log.warning("cannot read the %s of %s fetched %s: %s", kind, capture.url, _when(capture.fetched_at), exc)
        return None


def _holder(request: Request, sources: Sources, found: Found) -> Found | Response:
    """The capture whose record holds `found`'s content: itself, or for an unchanged capture the one it
    repeats (in whichever source holds it); else the page that says there is none."""
    if not found.capture.unchanged:
        return found
    original = original_in(sources.all, found)
    if original is not None:
        return original
    if found.capture.status == 304:
        why = "the server answered 304 Not Modified, and this crawl has no earlier full capture of this URL"
    else:
        why = "the server sent the same content again, and this crawl has no earlier full capture of it"
    text = f"This capture was unchanged: {why}, so there is no full copy to show."
    return _message(request, 404, "No full copy of this unchanged capture", text, _named(sources, found))


def _read(request: Request, sources: Sources, found: Found) -> ArchivedResponse | Response:
    """The capture's archived response (for an unchanged one, the response it repeats), or the page that
    says why it cannot be had here."""
    holder = _holder(request, sources, found)
    if isinstance(holder, Response):
        return holder
    site: Site = request.app.state.site
    record = holder.capture
    path = _record_file(site, holder.source, record.warc_file or "")
    if path is None:
        return _missing(request, sources, holder, found)
    try:
        return read_response(path, record.warc_offset or 0, record.warc_length or 0, record.url)
    except StoreError as exc:
        original = _named(sources, holder) if holder is not found else None
        return _message(
            request, 500, "The archived copy cannot be read", str(exc), _named(sources, found), original=original
        )


def _redirect(location: str, headers: dict[str, str]) -> Response:
    """A 302 to `location` as given: a normalized URL is already escaped, and escaping it again (as
    RedirectResponse does with `|`, `{`, `}` and `^`) would name another URL."""
    return Response(status_code=302, headers={**headers, "Location": location})


def _missing(request: Request, sources: Sources, holder: Found, found: Found) -> Response:
    """A record whose file this machine cannot read: on a node's own disk, or lost. `holder` holds the
    content of `found`: the capture itself, or the one an unchanged capture repeats."""
    record, capture = _named(sources, holder), _named(sources, found)
    original = record if holder is not found else None
    if record.node is None:
        text = f"The WARC file {record.warc_file} is missing from this crawl's warc/ directory."
        if original is not None:
            text = (
                f"This capture was unchanged: its content is that of the capture fetched {_when(record.fetched_at)}, "
                f"whose WARC file {record.warc_file} is missing from this crawl's warc/ directory. "
                "No full copy is left to show."
            )
        return _message(request, 404, "The archived copy is missing", text, capture, original=original)
    site: Site = request.app.state.site
    context = {"site": site, "capture": record, "fetched": _when(record.fetched_at)}
    if original is not None:
        context.update(revisit=capture, revisit_fetched=_when(capture.fetched_at))
    return templates.TemplateResponse(
        request, "archive_elsewhere.html", context, status_code=404, headers=_PAGE_HEADERS
    )


def _not_archived(request: Request, url: str) -> Response:
    text = "This crawl has no copy of this address. Archived pages never link to the live web."
    return _message(request, 404, "Not archived", text, url=url)


def _message(
    request: Request,
    status: int,
    title: str,
    text: str,
    capture: ArchivedCapture | None = None,
    url: str | None = None,
    *,
    original: ArchivedCapture | None = None,
) -> Response:
    """`original`: the capture an unchanged `capture` repeats, linked from the page."""
    site: Site = request.app.state.site
    context = {"site": site, "title": title, "text": text, "capture": capture, "url": url, "original": original}
    if capture is not None:
        context["fetched"] = _when(capture.fetched_at)
    if original is not None:
        context["original_fetched"] = _when(original.fetched_at)
    return templates.TemplateResponse(
        request, "archive_message.html", context, status_code=status, headers=_PAGE_HEADERS
    )


def _stamp(capture: ArchivedCapture) -> str:
    return datetime.fromtimestamp(capture.fetched_at, UTC).strftime("%Y%m%d%H%M%S")


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _parse_stamp(stamp: str) -> float | None:
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= len(_STAMP_FILL)):
        return None
    try:
        when = datetime.strptime(stamp + _STAMP_FILL[len(stamp) :], "%Y%m%d%H%M%S")
    except ValueError:
        return None
    return when.replace(tzinfo=UTC).timestamp()
