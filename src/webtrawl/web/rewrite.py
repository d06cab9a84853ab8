"""An archived page's URLs rewritten into the archive, and the archive's addresses.

A copy's links, images, styles, scripts, forms and refreshes lead to the archived copy nearest in time to the
page's own (`archive_address`), or to a page that says the crawl has none (`not_archived_address`); what is
no address (a fragment, `javascript:`, `data:` …) stays as it is. The dashboard's token, when it has one,
rides along in every address (`without_token` takes it off again).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import suppress
from urllib.parse import quote

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ..errors import InvalidURL
from ..parse.html import refresh_url, srcset_urls
from ..urls import normalize


def archive_address(stamp: str, url: str, token: str | None = None) -> str:
    """Where the copy of normalized `url` nearest to `stamp` is served.

    With a token, the address carries it: a sandboxed copy has an opaque origin, so its requests (for
    images, styles, other pages) are cross-site and the browser withholds the dashboard's SameSite cookie.
    The token goes last in the query, where `archived_url` takes it off again.
    """
    if not token:
        return f"/archive/url/{stamp}/{url}"
    return f"/archive/url/{stamp}/{url}{'&' if '?' in url else '?'}token={quote(token, safe='')}"


def not_archived_address(url: str, token: str | None = None) -> str:
    """Where a link to `url`, of which the crawl has no copy, leads instead."""
    return f"/archive/not-archived?url={quote(url, safe='')}" + (f"&token={quote(token, safe='')}" if token else "")


def without_token(query: str, token: str | None) -> str:
    """The query of an archived URL without the token `archive_address` appended."""
    param = f"token={quote(token, safe='')}" if token else ""
    if param and query == param:
        return ""
    return query.removesuffix("&" + param) if param else query


_KEPT = ("#", "javascript:", "data:", "mailto:", "tel:", "about:")
"""Hrefs left as they are: in-page anchors, and schemes that reach no web server (scripts never run)."""
_URL_ATTRS = frozenset({"href", "src", "action", "formaction", "poster", "background", "xlink:href"})
_ELEMENTS = (
    "[href],[src],[srcset],[imagesrcset],[action],[formaction],[poster],[background],[ping],[style],"
    "object[data],iframe[srcdoc],style,meta[http-equiv],svg *"
)
"""Elements that may carry a URL; `svg *` finds `xlink:href`, which attribute selectors cannot name."""
_CSS_URL = re.compile(
    r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^\s'")]+))\s*\)|@import\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE
)
_FRAGMENT_SAFE = "/?:@!$&'()*+,;=-._~%"


class Rewriter:
    """Points the URLs of one archived document into the archive, at the time it was captured.

    A URL the crawl has a copy of becomes `/archive/url/{stamp}/{url}`; any other (uncaptured, out of
    scope, unparseable, an unknown scheme) becomes the not-archived page, so no link leads to the live web.
    `archived` answers whether a normalized URL has a copy; each URL is asked once. With a `token`, every
    address carries it (see `archive_address`).
    """

    def __init__(self, stamp: str, archived: Callable[[str], bool], token: str | None = None) -> None:
        self._stamp = stamp
        self._archived = archived
        self._token = token
        self._known: dict[str, bool] = {}

    def address(self, href: str, base: str) -> str:
        stripped = href.strip()
        if stripped[:11].lower().startswith(_KEPT):
            return href
        try:
            url = normalize(stripped, base)
        except InvalidURL:
            return not_archived_address(stripped, self._token)
        known = self._known.get(url)
        if known is None:
            known = self._known[url] = self._archived(url)
        if not known:
            return not_archived_address(url, self._token)
        fragment = stripped.partition("#")[2]
        address = archive_address(self._stamp, url, self._token)
        return address + ("#" + quote(fragment, safe=_FRAGMENT_SAFE) if fragment else "")

    def html(self, text: str, url: str) -> str:
        tree = LexborHTMLParser(text)
        base = url
        if (node := tree.css_first("base[href]")) is not None:
            with suppress(InvalidURL):  # a base that does not parse is ignored, as browsers do
                base = normalize((node.attributes["href"] or "").strip(), url)
        done: set[int] = set()  # selectors overlap: an element is returned once per selector it matches
        for node in tree.css(_ELEMENTS):
            if node.mem_id not in done:
                done.add(node.mem_id)
                self._element(node, base)
        return tree.html or ""

    def _element(self, node: LexborNode, base: str) -> None:
        attrs, tag = node.attrs, node.tag
        for name, value in node.attributes.items():
            if value is None:
                continue
            if tag == "base" and name == "href":
                # Kept a base (not a link): anything left relative resolves inside the archive.
                attrs[name] = f"/archive/url/{self._stamp}/{base}"
            elif name in _URL_ATTRS or (name == "data" and tag == "object"):
                attrs[name] = self.address(value, base)
            elif name == "srcset" or name == "imagesrcset":
                attrs[name] = self._srcset(value, base)
            elif name == "style":
                attrs[name] = self.css(value, base)
            elif name == "srcdoc":
                attrs[name] = self.html(value, base)
            elif name == "ping":  # a POST to each listed URL on every click
                del attrs[name]
            elif name == "content" and _is_refresh(node) and (target := refresh_url(value)):
                at = value.rfind(target)
                attrs[name] = value[:at] + self.address(target, base) + value[at + len(target) :]
        if tag == "style" and (child := node.first_child) is not None:
            child.replace_with(self.css(node.text(), base))

    def _srcset(self, srcset: str, base: str) -> str:
        parts, at = [], 0
        for candidate in srcset_urls(srcset):
            found = srcset.find(candidate, at)
            parts += [srcset[at:found], self.address(candidate, base)]
            at = found + len(candidate)
        return "".join(parts) + srcset[at:]

    def css(self, text: str, base: str) -> str:
        """CSS with its `url()`s and `@import`s rewritten, each to a quoted string."""

        def swap(match: re.Match[str]) -> str:
            index = match.lastindex or 0
            href = match.group(index)
            address = self.address(href, base)
            if address == href:
                return match.group(0)
            quoted = '"' + address.replace("\\", "%5C").replace('"', "%22") + '"'
            return f"url({quoted})" if index <= 3 else f"@import {quoted}"

        return _CSS_URL.sub(swap, text)


def _is_refresh(node: LexborNode) -> bool:
    return (node.attributes.get("http-equiv") or "").strip().lower() == "refresh"
