"""Crawl settings: keyword-only dataclasses, one per component, validated when built.

A setting is either part of the crawl's *identity* (seeds, scope rules, normalization: changing them
changes which URLs the crawl contains, so a resume with different values is refused) or a *tunable*
(concurrency, delay, limits: free to change between runs).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import __version__
from .errors import ConfigError
from .parse.simhash import NEAR_DISTANCE
from .request_options import MAX_TTL, MIN_TTL, check_proxy, parse_auth, parse_header, parse_network, parse_pin

ScopeMode = Literal["host", "domain", "prefix", "any"]

DEFAULT_USER_AGENT = f"webtrawl/{__version__}"
"""The crawler's own name; an operator crawling others' sites adds theirs and a contact (`--user-agent`)."""

# Extensions of files that are not pages: never fetched as pages (the original design skipped images,
# audio and executables). With page requisites on, images, fonts, CSS and scripts are fetched as such.
REQUISITE_EXTENSIONS = frozenset(
    [
        "jpg",
        "jpeg",
        "png",
        "gif",
        "webp",
        "bmp",
        "ico",
        "svg",
        "avif",
        "woff",
        "woff2",
        "ttf",
        "otf",
        "eot",
        "css",
        "js",
        "mjs",
    ]
)
BINARY_EXTENSIONS = REQUISITE_EXTENSIONS | frozenset(
    [
        "tif",
        "tiff",
        "heic",
        "psd",
        "map",
        "mp3",
        "m4a",
        "aac",
        "ogg",
        "oga",
        "opus",
        "flac",
        "wav",
        "wma",
        "mid",
        "midi",
        "mp4",
        "m4v",
        "webm",
        "mkv",
        "avi",
        "mov",
        "wmv",
        "flv",
        "mpg",
        "mpeg",
        "3gp",
        "zip",
        "rar",
        "7z",
        "gz",
        "tgz",
        "bz2",
        "xz",
        "zst",
        "tar",
        "iso",
        "dmg",
        "exe",
        "msi",
        "bin",
        "dll",
        "so",
        "deb",
        "rpm",
        "apk",
        "jar",
        "pdf",
        "doc",
        "docx",
        "xls",
        "xlsx",
        "ppt",
        "pptx",
        "odt",
        "ods",
    ]
)


def _positive(name: str, value: float | None, *, allow_none: bool = False, allow_zero: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ConfigError(f"{name} must be a number, not {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{name} must be {'≥' if allow_zero else '>'} 0, not {value}")


@dataclass(frozen=True, kw_only=True)
class ScopeConfig:
    """Which URLs the crawl may visit. Part of the crawl's identity."""

    mode: ScopeMode = "host"
    allow: tuple[str, ...] = ()
    """Regexes; when given, a URL must match one of them."""
    deny: tuple[str, ...] = ()
    """Regexes; a URL matching any of them is dropped."""
    max_url_length: int = 2048
    max_depth: int | None = None
    max_query_params: int = 10
    max_repeated_segments: int = 3
    """A path segment occurring more than this many times marks a trap (`/a/b/a/b/a/b/a/`)."""
    max_meaningless_symbols: int | None = None
    """When set, a last path segment with more non-alphanumeric symbols than this is dropped."""
    page_requisites: bool = False
    follow_nofollow: bool = False
    max_urls_per_host: int | None = 1_000_000
    """New URLs one host (scheme, name and port) may bring into the frontier; None (or 0): no limit. A last
    guard against generators the other rules miss: a million pages is days of polite fetching."""
    max_urls_per_template: int | None = 10_000
    """New URLs one template (the URL with digit runs collapsed and query values dropped) may bring in;
    None (or 0): no limit. An endless calendar or a faceted search is one template; a real site rarely has more
    than this many pages of one numbered shape, and a trap costs at most this many fetches."""
    sitemaps: bool = True
    """Read each host's sitemaps (listed in robots.txt, else /sitemap.xml) and add their URLs at depth 1."""
    max_sitemap_urls: int = 50_000
    """URLs taken from one host's sitemaps at most (one sitemap file may list 50,000)."""

    def __post_init__(self) -> None:
        if self.mode not in ("host", "domain", "prefix", "any"):
            raise ConfigError(f"scope must be one of host, domain, prefix, any; not {self.mode!r}")
        for pattern in (*self.allow, *self.deny):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"bad regular expression {pattern!r}: {exc}") from None
        _positive("max-url-length", self.max_url_length)
        _positive("max-depth", self.max_depth, allow_none=True, allow_zero=True)
        _positive("max-query-params", self.max_query_params, allow_zero=True)
        _positive("max-repeated-segments", self.max_repeated_segments)
        _positive("max-meaningless-symbols", self.max_meaningless_symbols, allow_none=True, allow_zero=True)
        for budget in ("max_urls_per_host", "max_urls_per_template"):
            _positive(budget.replace("_", "-"), getattr(self, budget), allow_none=True, allow_zero=True)
            if getattr(self, budget) == 0:  # TOML has no None: 0 says "no limit", as on the command line
                object.__setattr__(self, budget, None)
        _positive("max-sitemap-urls", self.max_sitemap_urls)


@dataclass(frozen=True, kw_only=True)
class FetchConfig:
    """How requests are made. Tunable."""

    user_agent: str = DEFAULT_USER_AGENT
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    total_timeout: float = 60.0
    max_attempts: int = 4
    """Attempts per URL for retryable failures (connection errors, 5xx, 429), the first one included."""
    max_retry_wait: float = 600.0
    """Total seconds a URL may spend waiting between retries before it is failed."""
    backoff: float = 1.0
    """First retry waits about this long; each later one twice as long, with jitter."""
    max_redirects: int = 10
    max_size: int = 10 * 1024 * 1024
    """Bytes received and bytes decoded, each; a longer body is cut and marked truncated."""
    fetch_non_html: bool = False
    """Download bodies of non-HTML responses (otherwise only their headers are kept)."""
    respect_robots: bool = True
    dns_ttl: float = 300.0
    """Seconds a name's addresses are reused (60–3600): the system resolver does not tell a record's TTL."""
    resolve: tuple[str, ...] = ()
    """`HOST:ADDR` or `HOST:PORT:ADDR`, as curl's --resolve: the name goes to that address, guard or not."""
    block_private: bool = True
    """Refuse loopback, private, link-local and other non-public addresses, except the seeds' own."""
    allow_private: tuple[str, ...] = ()
    """CIDR blocks let through despite `block_private` (link-local only by a block that is itself link-local)."""
    insecure: bool = False
    """Do not verify TLS certificates."""
    headers: tuple[str, ...] = ()
    """`Name: value` lines sent with every request (a name given here replaces the default header)."""
    auth: tuple[str, ...] = ()
    """`HOST[:PORT]:USER:PASS`: HTTP basic credentials sent to that host key only."""
    proxy: str | None = None
    """HTTP proxy URL for every request."""
    cookies: bool = False
    """Keep cookies, each returned only to the host that set it."""

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "read_timeout", "total_timeout", "backoff"):
            _positive(name.replace("_", "-"), getattr(self, name))
        _positive("max-retry-wait", self.max_retry_wait, allow_zero=True)
        _positive("max-attempts", self.max_attempts)
        _positive("max-redirects", self.max_redirects, allow_zero=True)
        _positive("max-size", self.max_size)
        if not self.user_agent.strip():
            raise ConfigError("user-agent must not be empty")
        _positive("dns-ttl", self.dns_ttl)
        if not MIN_TTL <= self.dns_ttl <= MAX_TTL:
            raise ConfigError(f"dns-ttl must be between {MIN_TTL:.0f} and {MAX_TTL:.0f} seconds, not {self.dns_ttl}")
        for pin in self.resolve:
            parse_pin(pin)
        for network in self.allow_private:
            parse_network(network)
        for header in self.headers:
            parse_header(header)
        for auth in self.auth:
            parse_auth(auth)
        if self.proxy is not None:
            check_proxy(self.proxy)


@dataclass(frozen=True, kw_only=True)
class PolitenessConfig:
    """How hard each host is pressed. Tunable."""

    per_host: int = 2
    per_ip: int | None = None
    """Requests in flight to one IP address at most, whatever host names share it (None: no limit)."""
    """Requests in flight to one host at most."""
    delay: float = 0.5
    """Seconds between the starts of two requests to one host (robots.txt Crawl-delay can raise it)."""
    max_crawl_delay: float = 30.0
    """robots.txt Crawl-delay is obeyed up to this many seconds."""
    adaptive: bool = False
    """Let each host's delay follow its response times and back off on 429/503 and errors."""
    min_delay: float = 0.0
    max_delay: float = 60.0
    adaptive_factor: float = 2.0
    """With `adaptive`, the delay tends to this multiple of the host's last response time."""
    robots_ttl: float = 24 * 3600.0
    """Seconds robots.txt rules are trusted before they are fetched again."""

    def __post_init__(self) -> None:
        _positive("per-host", self.per_host)
        _positive("per-ip", self.per_ip, allow_none=True)
        _positive("delay", self.delay, allow_zero=True)
        _positive("max-crawl-delay", self.max_crawl_delay, allow_zero=True)
        _positive("min-delay", self.min_delay, allow_zero=True)
        _positive("max-delay", self.max_delay, allow_zero=True)
        _positive("adaptive-factor", self.adaptive_factor)
        _positive("robots-ttl", self.robots_ttl)
        if self.min_delay > self.max_delay:
            raise ConfigError(f"min-delay ({self.min_delay}) must not exceed max-delay ({self.max_delay})")


@dataclass(frozen=True, kw_only=True)
class RevisitConfig:
    """When fetched pages are due again (`--recrawl`): an adaptive interval per URL (see `revisits`)."""

    recrawl: bool = False
    """Re-queue the URLs that are due when the run starts, and fetch them conditionally."""
    every: float | None = None
    """Seconds between two re-crawl passes of a run that keeps going (`--every 6h`); None: one pass."""
    min_interval: float = 3600.0
    """The shortest revisit interval, and the first one a URL gets."""
    max_interval: float = 30 * 86400.0

    def __post_init__(self) -> None:
        _positive("every", self.every, allow_none=True)
        _positive("min-interval", self.min_interval, allow_zero=True)
        _positive("max-interval", self.max_interval, allow_zero=True)
        if self.min_interval > self.max_interval:
            raise ConfigError(
                f"min-interval ({self.min_interval:g} s) must not exceed max-interval ({self.max_interval:g} s)"
            )
        if self.every is not None and not self.recrawl:
            raise ConfigError("--every repeats re-crawls: give --recrawl with it")


Order = Literal["bfs", "importance"]

MEDIA_KINDS = ("audio", "video")


@dataclass(frozen=True, kw_only=True)
class MediaConfig:
    """Media harvesting (`--media audio,video`): which kinds, how big, how many downloads at once.

    Downloads have their own slots: a long download holds a media slot, never a page slot, so the pages of
    a host keep their pace beside it (each download still starts at that host's pace).
    """

    kinds: tuple[str, ...] = ()
    """Empty: media are not collected."""
    max_size: int | None = 2 * 1024**3
    """Bytes: a larger file fails with "too large" before or while it downloads."""
    concurrency: int = 4
    per_host: int = 2
    resolvers: tuple[str, ...] = ()
    """Only these resolvers (by name; "generic" included) may claim media; empty: every one installed."""
    quality: str | int = "best"
    """Which variant of a stream: `best`, `worst`, or the highest bandwidth at most this (bits per second;
    `800k` and `2M` are read too)."""
    max_duration: float = 3600.0
    """Seconds of a live stream (an HLS playlist without ENDLIST) recorded before it is cut."""
    remux: bool = False
    """Rewrite a joined stream into MP4 (`.mp4`, or `.m4a` for audio) with ffmpeg, where it is installed."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(MEDIA_KINDS))
        if unknown:
            raise ConfigError(f"unknown media kind(s) {', '.join(unknown)}: choose from {', '.join(MEDIA_KINDS)}")
        _positive("media-max-size", self.max_size, allow_none=True)
        _positive("media-concurrency", self.concurrency)
        _positive("media-per-host", self.per_host)
        _positive("media-max-duration", self.max_duration)
        self.stream_quality  # noqa: B018 (validates)

    @property
    def stream_quality(self) -> Quality:
        quality = self.quality
        if isinstance(quality, int) and not isinstance(quality, bool) and quality > 0:
            return quality
        text = str(quality).strip().lower()
        if text in ("best", "worst"):
            return "best" if text == "best" else "worst"
        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([km]?)(?:bps|bit/s|b/s)?", text)
        if match is None or float(match[1]) <= 0:
            raise ConfigError(f"--media-quality {quality!r} must be best, worst or a bandwidth such as 800k or 2M")
        return round(float(match[1]) * {"": 1, "k": 1000, "m": 1000_000}[match[2]])


Quality = Literal["best", "worst"] | int
"""A stream variant: the highest bandwidth, the lowest, or the highest at most this many bits per second."""

RenderMode = Literal["off", "all", "auto"]


@dataclass(frozen=True, kw_only=True)
class RenderConfig:
    """Rendering pages in headless Chromium (`--render`). Tunable: a crawl may start rendering on resume.

    Which pages: every HTML page ("all"), or those whose served HTML looks built by script ("auto", see
    `render.auto`); `match`, when given, narrows either to the URLs it matches (alone it means "all").
    """

    mode: RenderMode = "off"
    match: str | None = None
    """A regex a URL must match (`re.search`) to be rendered."""
    timeout: float = 30.0
    """Seconds one page's rendering may take, every behaviour included; what is there then is kept."""
    concurrency: int = 2
    """Pages rendered at once (each a browser tab)."""
    behavior: str | None = None
    """JavaScript run in every rendered page after the built-in behaviours: the text of `--behavior FILE`, kept
    in the settings so every node of a distributed crawl runs the same script."""
    screenshots: bool = False
    """Keep a thumbnail of each rendered page in the archive."""
    recycle_every: int = 50
    """Pages one browser context renders before it is closed and a new one opened (bounded memory)."""

    def __post_init__(self) -> None:
        if self.mode not in ("off", "all", "auto"):
            raise ConfigError(f"render mode {self.mode!r} must be off, all or auto")
        if self.match is not None:
            try:
                re.compile(self.match)
            except re.error as exc:
                raise ConfigError(f"--render-match {self.match!r} is not a regular expression: {exc}") from None
        _positive("render-timeout", self.timeout)
        _positive("render-concurrency", self.concurrency)
        _positive("render-recycle", self.recycle_every)

    @property
    def enabled(self) -> bool:
        return self.mode != "off"


@dataclass(frozen=True, kw_only=True)
class CrawlConfig:
    """Everything one crawl needs; `Crawler(config).run()` takes nothing else."""

    seeds: tuple[str, ...]
    out: Path
    name: str = "default"
    scope: ScopeConfig = field(default_factory=ScopeConfig)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    politeness: PolitenessConfig = field(default_factory=PolitenessConfig)
    media: MediaConfig = field(default_factory=MediaConfig)
    revisit: RevisitConfig = field(default_factory=RevisitConfig)
    render: RenderConfig = field(default_factory=RenderConfig)
    order: Order = "bfs"
    """Hand-out order within a depth: arrival ("bfs"), or most important first ("importance": OPIC cash)."""
    skip_near_duplicates: bool = False
    """Do not follow the links of a page whose text is a near-duplicate of an earlier page's (a trap guard)."""
    near_distance: int = NEAR_DISTANCE
    """Most differing SimHash bits for two pages to count as near-duplicates."""
    concurrency: int = 32
    max_pages: int | None = None
    """Pages fetched by the whole crawl (all runs together), not by this run."""
    max_time: float | None = None
    """Seconds this run may take before it stops handing out URLs."""
    warc_size: int = 1024**3
    mirror: bool = False
    add_seeds: bool = False
    """Resuming with seeds the crawl does not have adds them to it (its scope grows to their hosts), instead of
    refusing them as another crawl's."""

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ConfigError("give at least one seed URL")
        object.__setattr__(self, "out", Path(self.out))
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", self.name):
            raise ConfigError(f"crawl name {self.name!r} must be letters, digits, '.', '_' or '-'")
        _positive("concurrency", self.concurrency)
        _positive("max-pages", self.max_pages, allow_none=True)
        _positive("max-time", self.max_time, allow_none=True)
        _positive("warc-size", self.warc_size)
        if self.order not in ("bfs", "importance"):
            raise ConfigError(f"order {self.order!r} must be bfs or importance")
        if not 0 <= self.near_distance <= 15:
            raise ConfigError(f"near-distance {self.near_distance} must be between 0 and 15")

    def identity(self, normalized_seeds: list[str], normalization_version: int) -> dict[str, Any]:
        """What makes this crawl this crawl: compared on resume."""
        return {
            "seeds": sorted(normalized_seeds),
            "scope": asdict(self.scope),
            "normalization": normalization_version,
        }
