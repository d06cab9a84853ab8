"""Read an HTML page: its links, title, visible text and robots directives.

One CSS query with a combined selector walks the tree once (in C) and hands back, in document order,
every element that can carry a link or a directive; the elements are dispatched on their tag in Python.
Raw hrefs are gathered first and resolved afterwards, because the first `<base href>` governs every link
in the document, even those before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from selectolax.lexbor import LexborHTMLParser, LexborNode

from ..errors import InvalidURL
from ..models import Link, LinkKind, ParsedPage
from ..urls import normalize

_Add = Callable[[tuple[str, LinkKind]], None]

MAX_TITLE = 1000
MAX_TEXT = 200_000

_PAGE_SELECTOR = "base[href],a[href],area[href],link[href],frame[src],meta[content],title"
_HIDDEN_TAGS = ("script", "style", "noscript", "iframe", "noembed", "noframes")
_HIDDEN_SELECTOR = ",".join(_HIDDEN_TAGS)
"""Elements whose contents a reader never sees (an iframe's is fallback markup); removed before the text
is taken. Iframes are among them, so their `src` is read here too."""
_REQUISITE_SELECTOR = "img,source,video[poster],input[src],[style]"
# Selectors may overlap (an `a` with a style attribute is returned twice); a repeat only repeats raw
# hrefs, which the resolution step drops, and removing a hidden element twice is harmless.
_SELECTOR = f"{_PAGE_SELECTOR},{_HIDDEN_SELECTOR}"
_SELECTOR_WITH_REQUISITES = f"{_SELECTOR},{_REQUISITE_SELECTOR}"

_LINK_RELS = frozenset({"alternate", "next", "prev", "canonical"})
_REQUISITE_RELS = frozenset(
    {"stylesheet", "icon", "apple-touch-icon", "apple-touch-icon-precomposed", "mask-icon", "manifest",
     "preload", "modulepreload"}
)  # fmt: skip

# A srcset candidate: a URL, then (unless the URL ends in commas) descriptors up to a comma that is not
# inside parentheses.
_SRCSET = re.compile(r"[\s,]*([^\s,]\S*)(?:(?<=,)|[^,(]*(?:\([^)]*\)?[^,(]*)*,?)")
_CSS_URL = re.compile(
    r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^\s'")]+))\s*\)|@import\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE
)
_REFRESH = re.compile(r"\s*(?:\d[\d.]*|\.[\d.]*)(?=[\s;,]|$)\s*[;,]?\s*(?:url\s*=\s*)?(.*)", re.IGNORECASE | re.DOTALL)
_ROBOTS_SPLIT = re.compile(r"[\s,]+")


@dataclass(slots=True)
class _Scan:
    """What one walk over the tree found, before any URL is resolved."""

    hrefs: list[tuple[str, LinkKind]] = field(default_factory=list)
    hidden: list[LexborNode] = field(default_factory=list)
    base: str | None = None
    canonical: str | None = None
    title: str | None = None
    nofollow: bool = False
    noindex: bool = False


def parse_html(text: str, url: str, *, requisites: bool = False, follow_nofollow: bool = False) -> ParsedPage:
    """Parse a page fetched from `url` (already normalized).

    Links come back absolute, normalized, deduplicated, in document order; those that are not http(s)
    (javascript:, mailto:, data:, …) or do not parse are left out. `requisites` adds what the page needs
    to be displayed (images, scripts, stylesheets, CSS `url()`s) with kind "requisite". A `rel=nofollow`
    link, and every non-requisite link of a page whose robots meta says nofollow, is left out unless
    `follow_nofollow`. A page whose robots meta says noindex gets no text.
    """
    tree = LexborHTMLParser(text)
    scan = _scan(tree, requisites, follow_nofollow)
    base = _absolute(scan.base, url) or url
    page = ParsedPage(nofollow=scan.nofollow, noindex=scan.noindex, canonical=_absolute(scan.canonical, base))
    page.links = _resolve(scan.hrefs, base, skip_links=scan.nofollow and not follow_nofollow)
    if scan.title:
        page.title = collapse_whitespace(scan.title, MAX_TITLE)
    if not scan.noindex and tree.body is not None:
        for node in scan.hidden:
            node.decompose()
        page.text = collapse_whitespace(tree.body.text(separator=" ", strip=True, skip_empty=True), MAX_TEXT)
    return page


def _scan(tree: LexborHTMLParser, requisites: bool, follow_nofollow: bool) -> _Scan:
    scan = _Scan()
    add = scan.hrefs.append
    for node in tree.css(_SELECTOR_WITH_REQUISITES if requisites else _SELECTOR):
        tag = node.tag
        attrs = node.attributes
        if tag == "a" or tag == "area":
            href = attrs.get("href")
            if href and (follow_nofollow or not _has_token(attrs.get("rel"), "nofollow")):
                add((href, "link"))
        elif tag == "link":
            if href := attrs.get("href"):
                _link_element(href, attrs.get("rel"), requisites, scan)
        elif tag == "meta":
            _meta(attrs, scan)
        elif tag in _HIDDEN_TAGS:
            scan.hidden.append(node)
            if tag == "iframe":
                if src := attrs.get("src"):
                    add((src, "link"))
            elif requisites and tag == "script":
                if src := attrs.get("src"):
                    add((src, "requisite"))
            elif requisites and tag == "style":
                _css_urls(node.text(), add)
        elif tag == "frame":
            if src := attrs.get("src"):
                add((src, "link"))
        elif tag == "title":
            if scan.title is None and not _in_svg(node):
                scan.title = node.text()
        elif tag == "base":
            if scan.base is None and (href := attrs.get("href")):
                scan.base = href
        elif requisites and tag is not None:  # a selector matches elements only, and every element has a tag
            _requisites(tag, attrs, add)
        if requisites and (style := attrs.get("style")) and "(" in style:
            _css_urls(style, add)
    return scan


def _link_element(href: str, rel: str | None, requisites: bool, scan: _Scan) -> None:
    """A `<link>`: a page (next, alternate, canonical …) or, with requisites, something the page uses."""
    rels = set((rel or "").lower().split())
    if not rels.isdisjoint(_REQUISITE_RELS):  # "alternate stylesheet" is a stylesheet, not a page
        if requisites:
            scan.hrefs.append((href, "requisite"))
    elif not rels.isdisjoint(_LINK_RELS):
        scan.hrefs.append((href, "link"))
        if "canonical" in rels and scan.canonical is None:
            scan.canonical = href


def _meta(attrs: dict[str, str | None], scan: _Scan) -> None:
    content = attrs.get("content") or ""
    name = (attrs.get("name") or "").strip().lower()
    if name == "robots":
        directives = set(_ROBOTS_SPLIT.split(content.lower()))
        if "none" in directives:
            directives |= {"nofollow", "noindex"}
        scan.nofollow = scan.nofollow or "nofollow" in directives
        scan.noindex = scan.noindex or "noindex" in directives
    elif (attrs.get("http-equiv") or "").strip().lower() == "refresh" and (target := refresh_url(content)):
        scan.hrefs.append((target, "link"))


def _requisites(tag: str, attrs: dict[str, str | None], add: _Add) -> None:
    if tag == "img" or tag == "source":
        if src := attrs.get("src"):
            add((src, "requisite"))
        if srcset := attrs.get("srcset"):
            for candidate in srcset_urls(srcset):
                add((candidate, "requisite"))
    elif tag == "video":
        if poster := attrs.get("poster"):
            add((poster, "requisite"))
    elif tag == "input" and (src := attrs.get("src")) and _has_token(attrs.get("type"), "image"):
        add((src, "requisite"))


_STRIPPED = "".join(map(chr, range(33)))
"""What the URL standard strips from both ends of an href (C0 controls and space)."""
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
"""A scheme, as the URL standard reads one at the start of an href."""


def _resolution_base(href: str, base: str) -> str | None:
    """The shortest base that resolves `href` exactly as `base` does, so resolutions can be shared.

    Most links of a site repeat on every page (navigation, footers), and resolving is the largest cost
    of parsing: an absolute link needs no base, a path-absolute one only the origin, any other relative
    one the base's directory; only `?query` and `#fragment` links need the whole base.
    """
    stripped = href.lstrip(_STRIPPED)
    if "\t" in stripped or "\n" in stripped or "\r" in stripped:  # the parser drops them anywhere
        stripped = stripped.translate(_TAB_OR_NEWLINE)
    if stripped[:1] in ("?", "#", ""):
        return base
    scheme_end = base.find("//") + 2
    if stripped[:1] == "/" and stripped[:2] != "//":
        return base[: base.find("/", scheme_end) + 1]
    if stripped[:8].lower().startswith(("http://", "https://")):
        return None
    if _SCHEME.match(stripped):  # `http:?q=1` is relative to the whole page when the scheme is the page's
        return base
    query = base.find("?", scheme_end)
    return base[: base.rfind("/", scheme_end, None if query < 0 else query) + 1]


@lru_cache(maxsize=1 << 14)
def _normalize_shared(href: str, base: str | None) -> str:
    return normalize(href, base)


def _resolve(hrefs: list[tuple[str, LinkKind]], base: str, *, skip_links: bool) -> list[Link]:
    links: list[Link] = []
    tried: set[str] = set()
    seen: set[str] = set()
    for href, kind in hrefs:
        if href in tried or (skip_links and kind == "link"):
            continue
        tried.add(href)
        try:
            absolute = _normalize_shared(href, _resolution_base(href, base))
        except InvalidURL:
            continue
        if absolute not in seen:
            seen.add(absolute)
            links.append(Link(absolute, kind))
    return links


def _absolute(href: str | None, base: str) -> str | None:
    if href is None:
        return None
    try:
        return normalize(href, base)
    except InvalidURL:
        return None


def _has_token(value: str | None, token: str) -> bool:
    return value is not None and token in value.lower().split()


def _in_svg(node: LexborNode) -> bool:
    """An SVG `<title>` labels a drawing, not the page."""
    parent = node.parent
    while parent is not None:
        tag = parent.tag
        if tag == "svg":
            return True
        if tag == "head" or tag == "body":
            return False
        parent = parent.parent
    return False


def _css_urls(css: str, add: _Add) -> None:
    for match in _CSS_URL.finditer(css):
        if value := match.group(match.lastindex or 0).strip():
            add((value, "requisite"))


def srcset_urls(srcset: str) -> list[str]:
    """The candidate URLs of a `srcset` attribute, parsed as the HTML standard says.

    URLs may contain commas (`a,b.jpg 2x`); a candidate ends at the first comma after its URL that is
    not inside the parentheses of a descriptor, or at a URL's trailing commas.
    """
    return [match.group(1).rstrip(",") for match in _SRCSET.finditer(srcset)]


def refresh_url(content: str) -> str | None:
    """The target of `<meta http-equiv=refresh content="5; url='…'">`, or None (a plain reload, or invalid).

    Follows the HTML standard: a delay, then `;` or `,` and an optional `url=`, then the URL, which may
    be quoted (the quote ends it).
    """
    match = _REFRESH.match(content)
    if match is None:
        return None
    target = match.group(1)
    if target[:1] in ("'", '"'):
        quote, target = target[0], target[1:]
        target = target.split(quote, 1)[0]
    return target.strip() or None


def collapse_whitespace(text: str, limit: int) -> str:
    """`text` with each run of whitespace turned into one space, stripped, cut at `limit` characters.

    Text from the tree comes with its pieces already stripped, so most of it needs no work: that case is
    checked with a few fast substring scans, and only otherwise is the text split into words and joined.
    Only a head of the text is worked on when that is enough to fill `limit`.
    """
    head = text[: 2 * limit]
    out = _collapse(head)
    if len(out) < limit and len(head) < len(text):
        out = _collapse(text)
    return out[:limit].rstrip()


def _collapse(text: str) -> str:
    if "  " in text or "\n" in text or "\t" in text or "\r" in text or "\xa0" in text or "\f" in text:
        return " ".join(text.split())
    return text.strip()
