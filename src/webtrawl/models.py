"""The values that travel between the crawl's stages.

They are small and mostly frozen so a stage can hand them on without copying; every backend stores them
by fingerprint (a signed 64-bit integer, see `urls.fingerprint`), never by the raw URL string.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Literal

LinkKind = Literal["seed", "link", "requisite", "redirect", "sitemap", "media"]
"""How a URL was found: given by the user, linked, needed to display a page, a redirect target, listed
in a sitemap, or a media task (see `media.tasks`)."""


MediaKind = Literal["audio", "video", "playlist"]
"""What a media reference points at; a playlist is fetched and read for the media it lists."""


class State(IntEnum):
    """A URL's state in the frontier; stored as this integer."""

    WAITING = 0
    RUNNING = 1
    DONE = 2
    FAILED = 3


HOST_BUDGET = "host-budget"
TEMPLATE_BUDGET = "template-budget"
"""The reasons a URL is refused for a budget (`frontier.budgets`): unlike every other drop reason, each keeps
the URL out of the crawl for good, which the coordinator's index must know as well (`store.ingest`)."""


@dataclass(slots=True, kw_only=True)
class FrontierCounts:
    """How many URLs of a crawl are in each state, and the waiting ones by depth."""

    waiting: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    waiting_by_depth: dict[int, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.waiting + self.running + self.done + self.failed


@dataclass(slots=True, kw_only=True)
class NewURL:
    """A normalized, in-scope URL on its way into the frontier. Not frozen: a page makes dozens, and a frozen
    dataclass's constructor costs 2.5× a plain one's (1.65 µs against 0.65)."""

    url: str
    fp: int
    host: str
    depth: int
    kind: LinkKind = "link"
    referrer_fp: int | None = None
    via: tuple[str, ...] = ()
    """The redirect chain that led here (first URL first); empty unless `kind == "redirect"`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Previous:
    """What the last fetch of a URL left behind: the validators of a conditional re-fetch, the content it
    had (to tell a change), and the revisit interval the schedule had reached."""

    fetched_at: float
    digest: str | None = None
    """The payload digest (as WARC-Payload-Digest writes it) of the last body received."""
    etag: str | None = None
    last_modified: str | None = None
    interval: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """A URL handed out by the frontier; it must come back through `Frontier.complete`."""

    url: str
    fp: int
    host: str
    depth: int
    kind: LinkKind
    referrer_fp: int | None
    attempts: int
    """Fetch attempts already made before this one (0 on the first)."""
    via: tuple[str, ...] = ()
    previous: Previous | None = None
    """Set when the URL was fetched before (a re-crawl): the request is conditional."""
    priority: float = 0.0
    """Its importance when handed out (OPIC cash; 0 unless the crawl orders by importance)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Revisit:
    """An ended URL due again (a re-crawl): its entry carries what its last fetch left (`previous`)."""

    entry: Entry
    ended: Literal["done", "failed"]


@dataclass(slots=True)
class Link:
    """A link found on a page: absolute, normalized, not yet checked against the scope. Not frozen, as
    `NewURL`: a page's links are built in the parse worker and again, unpickled, in the crawl."""

    url: str
    kind: LinkKind = "link"

    def __reduce__(self) -> tuple[type[Link], tuple[str, LinkKind]]:
        # Pickled as a constructor call: 40% smaller than a slotted object's state (a page's links cross
        # from the parse worker).
        return Link, (self.url, self.kind)


@dataclass(frozen=True, slots=True)
class MediaRef:
    """An audio or video file (or a playlist of them) a page points at, found by the generic detector."""

    url: str
    """Absolute and normalized."""
    kind: MediaKind
    found_by: str
    """Where on the page it was found: "link", "audio", "video", "source", "track", "og", "json-ld", "script",
    or "playlist" (listed in a fetched playlist)."""

    def __reduce__(self) -> tuple[type[MediaRef], tuple[str, MediaKind, str]]:
        return MediaRef, (self.url, self.kind, self.found_by)  # as `Link.__reduce__`


@dataclass(slots=True, kw_only=True)
class ParsedPage:
    """What the parser learned from one HTML page."""

    title: str = ""
    text: str = ""
    links: list[Link] = field(default_factory=list)
    nofollow: bool = False
    """`<meta name=robots content=nofollow>`: the page's links are not followed."""
    noindex: bool = False
    """`<meta name=robots content=noindex>`: the page's text is not put in the search index."""
    canonical: str | None = None
    media: list[MediaRef] = field(default_factory=list)
    """Audio, video and playlists the page points at (found only when the crawl collects media)."""


NOT_DOWNLOADED = "not-downloaded"
"""A capture's `truncated` when its body was skipped (see `FetchOutcome.body_skipped`)."""


@dataclass(slots=True, kw_only=True)
class FetchOutcome:
    """What one HTTP request produced: a response (possibly an error status) or an error without one."""

    url: str
    started_at: float
    """Wall-clock time (epoch seconds) the request started."""
    status: int | None = None
    reason: str = ""
    http_version: str = "1.1"
    method: str = "GET"
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    request_body: bytes = b""
    """What a rendered page's script sent with its request (a POST's JSON, a form): archived with it."""
    headers: list[tuple[str, str]] = field(default_factory=list)
    """Response headers as received (names keep their case; values decoded as latin-1)."""
    body: bytes = b""
    """The body as received: content-encoding intact, transfer-encoding removed, cut at the size limit."""
    truncated: str | None = None
    """Why the body is incomplete, as WARC-Truncated says it: "length", "time" or "disconnect"."""
    body_skipped: bool = False
    """The body was not downloaded at all: not a page, and the crawl does not fetch other types."""
    error: str | None = None
    """Why there is no usable response: a short reason recorded with the URL."""
    retryable: bool = False
    retry_after: float | None = None
    ip: str | None = None
    ttfb: float | None = None
    elapsed: float = 0.0
    archived: bool = False
    """Set by the archive thread once the response's records are written (a rendered page's requests are
    served again from memory only then: see `render.cache.ResourceCache`)."""

    def header(self, name: str) -> str | None:
        """The first value of a response header, case-insensitively."""
        lname = name.lower()
        for key, value in self.headers:
            if key.lower() == lname:
                return value
        return None

    @property
    def content_type(self) -> str:
        """The media type without parameters, lower case ('' when absent)."""
        value = self.header("Content-Type") or ""
        return value.split(";", 1)[0].strip().lower()


KeepResponse = Callable[[FetchOutcome], None]
"""Where a response the crawl fetched for itself (a robots.txt, a sitemap) goes to be archived."""


@dataclass(slots=True, kw_only=True)
class WarcLocation:
    """Where a capture's response record sits in the archive."""

    file: str
    offset: int
    length: int
    payload_digest: str | None = None


@dataclass(slots=True, kw_only=True)
class Resource:
    """A record archived with a rendered page: a request the page made, its rendered DOM, its thumbnail."""

    url: str
    """Normalized (how replay looks it up), or `urn:dom:URL` / `urn:thumbnail:URL` for the page's DOM and
    thumbnail."""
    target: str
    """The record's WARC-Target-URI: the URL as the page asked for it."""
    fetched_at: float
    status: int | None
    content_type: str
    warc: WarcLocation
    method: str = "GET"
    """The request's method: a page's script may POST (`store.replaykey`)."""
    request_query: str = ""
    """The request's body as replay tools key it (`store.replaykey.request_query`; "" for a GET)."""


@dataclass(slots=True, kw_only=True)
class Capture:
    """One fetch of one URL as the page index keeps it."""

    fp: int
    url: str
    fetched_at: float
    status: int | None
    content_type: str
    size: int
    truncated: str | None = None
    """Why the body is incomplete ("length", "time", "disconnect", as WARC-Truncated says), or
    "not-downloaded" when it was skipped (see `FetchOutcome.body_skipped`)."""
    title: str = ""
    text: str = ""
    location: str | None = None
    """The resolved redirect target of a 3xx response."""
    redirects: tuple[str, ...] = ()
    """URLs that redirected to this one, first first."""
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    etag: str | None = None
    last_modified: str | None = None
    ip: str | None = None
    ttfb: float | None = None
    elapsed: float = 0.0
    warc: WarcLocation | None = None
    error: str | None = None
    """Why this fetch failed: the network error, `HTTP n` for an error status, or why the page could not be
    read (its HTML too complex to parse in time)."""
    payload_digest: str | None = None
    """SHA-1 of the body as received (as WARC-Payload-Digest writes it), for change and duplicate checks."""
    unchanged: bool = False
    """A re-fetch that brought the same content (a 304, or the same digest): archived as a revisit record."""
    simhash: int | None = None
    """SimHash of the page's text, for near-duplicates (None when the text is too short to judge)."""
    duplicate_of: int | None = None
    """Fingerprint of the first URL whose content had the same digest."""
    near_duplicate_of: int | None = None
    """Fingerprint of an earlier page whose text is within the near-duplicate distance."""
    resources: list[Resource] = field(default_factory=list)
    """What was archived with the page when it was rendered (see `Resource`)."""


@dataclass(slots=True, kw_only=True)
class MediaFile:
    """One media task's result: the file collected for it (or why none was), for the index."""

    task: str
    """The resolver's stable name for the media: `resolver:id`, unchanged by signed or rotating addresses."""
    page_url: str
    """The page the media was found on."""
    url: str | None = None
    """The address the file was finally downloaded from (the last one resolved)."""
    kind: str = ""
    content_type: str = ""
    path: str | None = None
    """The file, relative to the crawl directory; None for a duplicate (see `duplicate_of`) or a failure."""
    size: int = 0
    """Bytes collected for the task: a stream's separate audio file included."""
    sha256: str | None = None
    """Of the file at `path`."""
    duplicate_of: str | None = None
    """The task whose file has the same content: this one is recorded but not stored twice."""
    title: str | None = None
    artist: str | None = None
    album: str | None = None
    duration: float | None = None
    fetched_at: float = 0.0
    resumes: int = 0
    """Times the download went on from bytes an earlier attempt (or run) had kept."""
    error: str | None = None
    """Why the task failed for good (it is also the frontier entry's reason)."""
    stream: str | None = None
    """`hls` or `dash` when the file was joined from a stream's segments (`segments` of them)."""
    segments: int = 0
    audio_path: str | None = None
    """A stream's separate audio file (a DASH audio representation, an HLS audio rendition), unless
    `--media-remux` muxed it into `path`."""


Verdict = Literal["done", "failed", "retry"]


@dataclass(slots=True, kw_only=True)
class Completion:
    """The result of handling one `Entry`, committed to the frontier in one batch with others."""

    entry: Entry
    verdict: Verdict
    reason: str | None = None
    """For "failed" and "retry": why, in a few words."""
    not_before: float | None = None
    """For "retry": the wall-clock time before which the URL is not handed out again."""
    capture: Capture | None = None
    children: list[NewURL] = field(default_factory=list)
    """In-scope links of the page (already seen ones too: they become link edges)."""
    drops: list[tuple[str, str]] = field(default_factory=list)
    """Links the scope refused: (url, reason)."""
    gained_host: str | None = None
    """A host key the crawl's scope gained with this result (a seed redirected to it): recorded with the
    result, so a resumed crawl, and every node of a distributed one, has it in scope too."""
    media: MediaFile | None = None
    """For a media task (an entry of kind "media"): the file it collected."""
    interval: float | None = None
    """The URL's revisit interval from now on (seconds), and when it is next due (epoch seconds)."""
    due: float | None = None
