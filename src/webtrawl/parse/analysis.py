"""Everything read from one fetched HTML page, as one call that any process can run.

The body is decompressed and decoded, parsed into title, text and links (and media), and the text gets its
SimHash. It is one call with a picklable argument and result so that it can run in a worker process
(`guarded`), where its CPU does not hold the crawl's event loop; it reports the CPU it used by stage, since a
worker's clock is not the crawl's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..models import ParsedPage
from .decode import decompress, sniff_charset, to_text
from .html import parse_html
from .media import find_media
from .simhash import simhash


@dataclass(frozen=True, slots=True, kw_only=True)
class PageInput:
    """A fetched HTML response and how to read it."""

    body: bytes
    """As received (possibly compressed)."""
    url: str
    content_encoding: str | None
    content_type: str | None
    max_size: int
    """Most bytes a body may decompress to."""
    requisites: bool
    follow_nofollow: bool
    media: frozenset[str] = frozenset()
    """Media kinds ("audio", "video") to find, if any."""
    keep_text: bool = False
    """Return the decoded HTML (media resolvers read it)."""
    keep_body: bool = False
    """Return the decompressed bytes (the mirror writes them)."""


@dataclass(slots=True)
class Analysis:
    """What was read."""

    page: ParsedPage
    simhash: int | None = None
    text: str | None = None
    body: bytes | None = None
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds by stage ("parse", "hashing") where the call ran."""
    away: bool = False
    """It ran in a worker process (whose CPU the crawl's clocks do not see)."""


def analyze(page: PageInput, max_tags: int | None = None) -> Analysis | None:
    """Read `page`; with `max_tags`, a page with more `<` than that is not parsed (None), since parsing such
    markup can take far longer than its size suggests (see `guarded`)."""
    started = time.thread_time()
    body, _cut = decompress(page.body, page.content_encoding, page.max_size)
    text = to_text(body, sniff_charset(body, page.content_type))
    if max_tags is not None and text.count("<") > max_tags:
        return None
    parsed = parse_html(text, page.url, requisites=page.requisites, follow_nofollow=page.follow_nofollow)
    if page.media:
        parsed.media = find_media(text, page.url, page.media)
    parsed_at = time.thread_time()
    fingerprint = simhash(parsed.text)
    return Analysis(
        parsed,
        fingerprint,
        text if page.keep_text else None,
        body if page.keep_body else None,
        {"parse": parsed_at - started, "hashing": time.thread_time() - parsed_at},
    )
