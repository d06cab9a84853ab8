"""The crawl command's flags (`CRAWL_OPTIONS`), and how they become a `CrawlConfig` (over a `--config` file)
and a Redis `Layout`.

Kept apart from the commands so that the one table below, `FLAG_FIELDS`, is the whole map from a flag to
the config field it sets, and the flags are declared beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import click
from click.core import ParameterSource

from .cluster.bloom import first_capacity
from .cluster.frontier import Layout
from .cluster.node import HEARTBEAT
from .config import (
    CrawlConfig,
    FetchConfig,
    MediaConfig,
    PolitenessConfig,
    RenderConfig,
    RevisitConfig,
    ScopeConfig,
)
from .errors import ConfigError


class Duration(click.ParamType):
    """Seconds, or a number with a unit: 90s, 15m, 6h, 30d."""

    name = "duration"
    _UNITS: ClassVar[dict[str, int]] = {"s": 1, "m": 60, "h": 3600, "d": 86400}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, int | float):
            return float(value)
        text = str(value).strip().lower()
        unit = self._UNITS.get(text[-1:], None)
        try:
            seconds = float(text[:-1] if unit else text) * (unit or 1)
        except ValueError:
            self.fail(f"{value!r} is not a duration (a number of seconds, or with s, m, h or d: 6h)", param, ctx)
        if seconds < 0:
            self.fail(f"{value!r} is negative", param, ctx)
        return seconds


DURATION = Duration()


def _same(value: Any) -> Any:
    return value


# Each crawl flag: the config part it belongs to (None: CrawlConfig itself), its field, and how the flag's
# value becomes the field's.
FLAG_FIELDS: dict[str, tuple[str | None, str, Callable[[Any], Any]]] = {
    "scope_mode": ("scope", "mode", _same),
    "allow": ("scope", "allow", _same),
    "deny": ("scope", "deny", _same),
    "max_url_length": ("scope", "max_url_length", _same),
    "max_depth": ("scope", "max_depth", _same),
    "max_query_params": ("scope", "max_query_params", _same),
    "max_repeated_segments": ("scope", "max_repeated_segments", _same),
    "max_meaningless_symbols": ("scope", "max_meaningless_symbols", _same),
    "page_requisites": ("scope", "page_requisites", _same),
    "ignore_nofollow": ("scope", "follow_nofollow", _same),
    "max_urls_per_host": ("scope", "max_urls_per_host", lambda n: n or None),
    "max_urls_per_template": ("scope", "max_urls_per_template", lambda n: n or None),
    "sitemaps": ("scope", "sitemaps", _same),
    "max_sitemap_urls": ("scope", "max_sitemap_urls", _same),
    "max_size": ("fetch", "max_size", _same),
    "fetch_non_html": ("fetch", "fetch_non_html", _same),
    "timeout": ("fetch", "read_timeout", _same),
    "retries": ("fetch", "max_attempts", lambda n: n + 1),
    "ignore_robots": ("fetch", "respect_robots", lambda ignore: not ignore),
    "user_agent": ("fetch", "user_agent", _same),
    "dns_ttl": ("fetch", "dns_ttl", _same),
    "resolve": ("fetch", "resolve", _same),
    "block_private": ("fetch", "block_private", _same),
    "allow_private": ("fetch", "allow_private", _same),
    "insecure": ("fetch", "insecure", _same),
    "header": ("fetch", "headers", _same),
    "auth": ("fetch", "auth", _same),
    "proxy": ("fetch", "proxy", _same),
    "cookies": ("fetch", "cookies", _same),
    "per_host": ("politeness", "per_host", _same),
    "per_ip": ("politeness", "per_ip", _same),
    "delay": ("politeness", "delay", _same),
    "adaptive": ("politeness", "adaptive", _same),
    "min_delay": ("politeness", "min_delay", _same),
    "max_delay": ("politeness", "max_delay", _same),
    "max_crawl_delay": ("politeness", "max_crawl_delay", _same),
    "concurrency": (None, "concurrency", _same),
    "max_pages": (None, "max_pages", _same),
    "max_time": (None, "max_time", _same),
    "warc_size": (None, "warc_size", _same),
    "mirror": (None, "mirror", _same),
    "recrawl": ("revisit", "recrawl", _same),
    "every": ("revisit", "every", _same),
    "min_interval": ("revisit", "min_interval", _same),
    "max_interval": ("revisit", "max_interval", _same),
    "order": (None, "order", _same),
    "skip_near_duplicates": (None, "skip_near_duplicates", _same),
    "near_distance": (None, "near_distance", _same),
    "media_kinds": ("media", "kinds", lambda kinds: tuple(k.strip() for k in kinds.split(",") if k.strip())),
    "media_max_size": ("media", "max_size", lambda n: n or None),
    "media_concurrency": ("media", "concurrency", _same),
    "resolvers": ("media", "resolvers", _same),
    "media_quality": ("media", "quality", _same),
    "media_max_duration": ("media", "max_duration", _same),
    "media_remux": ("media", "remux", _same),
    "render": ("render", "mode", _same),
    "render_match": ("render", "match", _same),
    "render_timeout": ("render", "timeout", _same),
    "render_concurrency": ("render", "concurrency", _same),
    "behavior": ("render", "behavior", lambda path: _read_script(path)),
    "screenshots": ("render", "screenshots", _same),
}


def _read_script(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read --behavior {path}: {exc}") from None


CRAWL_OPTIONS = [
    click.option("--out", "-o", type=click.Path(path_type=Path), required=True, help="Crawl directory."),
    click.option("--name", default="default", show_default=True, help="Crawl name (several crawls may share --out)."),
    click.option("--config", "config_file", type=click.Path(path_type=Path), help="TOML file with settings."),
    click.option("--max-pages", type=int, help="Stop after this many pages in the whole crawl."),
    click.option("--max-depth", type=int, help="Do not follow links deeper than this."),
    click.option("--max-time", type=float, help="Stop this run after this many seconds."),
    click.option("--concurrency", type=int, default=32, show_default=True, help="Fetches in flight."),
    click.option("--per-host", type=int, default=2, show_default=True, help="Fetches in flight per host."),
    click.option(
        "--delay", type=float, default=0.5, show_default=True, help="Seconds between request starts on one host."
    ),
    click.option("--per-ip", type=int, help="Fetches in flight per IP address, across host names (default: no limit)."),
    click.option("--adaptive", is_flag=True, help="Each host's delay follows its response times; 429/503 back it off."),
    click.option("--min-delay", type=float, default=0.0, show_default=True, help="Smallest delay with --adaptive."),
    click.option("--max-delay", type=float, default=60.0, show_default=True, help="Largest delay with --adaptive."),
    click.option(
        "--max-crawl-delay",
        type=float,
        default=30.0,
        show_default=True,
        help="robots.txt Crawl-delay is obeyed up to this many seconds.",
    ),
    click.option(
        "--scope",
        "scope_mode",
        type=click.Choice(["host", "domain", "prefix", "any"]),
        default="host",
        show_default=True,
        help="Which URLs the crawl may visit.",
    ),
    click.option("--allow", multiple=True, help="Regex a URL must match (repeatable)."),
    click.option("--deny", multiple=True, help="Regex that excludes a URL (repeatable)."),
    click.option("--max-url-length", type=int, default=2048, show_default=True),
    click.option("--max-query-params", type=int, default=10, show_default=True),
    click.option(
        "--max-repeated-segments",
        type=int,
        default=3,
        show_default=True,
        help="Trap guard: a path segment may repeat at most this often.",
    ),
    click.option(
        "--max-meaningless-symbols",
        type=int,
        help="Drop URLs whose last path segment has more symbols than this (off by default).",
    ),
    click.option(
        "--max-urls-per-host",
        type=click.IntRange(min=0),
        default=1_000_000,
        show_default=True,
        help="Trap guard: new URLs one host may add (0: no limit); the rest are dropped as host-budget.",
    ),
    click.option(
        "--max-urls-per-template",
        type=click.IntRange(min=0),
        default=10_000,
        show_default=True,
        help="Trap guard: new URLs per template, i.e. host + path with digits collapsed + query names (0: no limit).",
    ),
    click.option(
        "--sitemaps/--no-sitemaps",
        default=True,
        show_default=True,
        help="Add the URLs of each host's sitemaps (from robots.txt, else /sitemap.xml) at depth 1.",
    ),
    click.option(
        "--max-sitemap-urls", type=click.IntRange(min=1), default=50_000, show_default=True, help="URLs per host."
    ),
    click.option("--page-requisites", is_flag=True, help="Also fetch CSS, images, scripts and fonts pages need."),
    click.option("--ignore-nofollow", is_flag=True, help="Follow rel=nofollow links and nofollow pages."),
    click.option("--ignore-robots", is_flag=True, help="Do not fetch or obey robots.txt."),
    click.option("--user-agent", help="User-Agent header (default names webtrawl and its version)."),
    click.option(
        "--max-size",
        type=int,
        default=10 * 1024 * 1024,
        show_default=True,
        help="Bytes per body, received and decoded.",
    ),
    click.option("--fetch-non-html", is_flag=True, help="Download bodies of non-HTML responses too."),
    click.option("--timeout", type=float, default=30.0, show_default=True, help="Read timeout, seconds."),
    click.option(
        "--resolve",
        multiple=True,
        metavar="HOST:[PORT:]ADDR",
        help="Connect to ADDR for HOST, as curl does (repeatable); the guard lets these through.",
    ),
    click.option("--dns-ttl", type=float, default=300.0, show_default=True, help="Seconds a DNS answer is reused."),
    click.option(
        "--block-private/--no-block-private",
        default=True,
        show_default=True,
        help="Refuse loopback, private and link-local addresses other than the seeds' own.",
    ),
    click.option("--allow-private", multiple=True, metavar="CIDR", help="Let these addresses through (repeatable)."),
    click.option("--insecure", is_flag=True, help="Do not verify TLS certificates."),
    click.option("--header", multiple=True, metavar="'NAME: VALUE'", help="Send this header on every request."),
    click.option(
        "--auth", multiple=True, metavar="HOST[:PORT]:USER:PASS", help="HTTP basic auth, sent to that host only."
    ),
    click.option("--proxy", metavar="URL", help="Send every request through this HTTP proxy."),
    click.option("--cookies", is_flag=True, help="Keep cookies, each sent back only to the host that set it."),
    click.option("--retries", type=int, default=3, show_default=True, help="Retries of a URL after a failure."),
    click.option("--warc-size", type=int, default=1024**3, show_default=True, help="Bytes per WARC file."),
    click.option("--mirror", is_flag=True, help="Also write plain files named from the URL, as wget does."),
    click.option(
        "--media",
        "media_kinds",
        metavar="audio[,video]",
        help="Also collect these media into DIR/media/ (found on pages, resolved, downloaded with resume).",
    ),
    click.option("--media-max-size", type=int, help="Bytes per media file (default 2 GiB; 0: no limit)."),
    click.option("--media-concurrency", type=int, help="Media downloads in flight (default 4), besides page fetches."),
    click.option(
        "--media-quality",
        metavar="best|worst|BANDWIDTH",
        help="Which variant of an HLS or DASH stream: the best (default), the worst, or the best at most this "
        "many bits per second (800k, 2M).",
    ),
    click.option(
        "--media-max-duration",
        type=DURATION,
        metavar="DURATION",
        help="How much of a live stream is recorded before it is cut (default 1h; s/m/h/d).",
    ),
    click.option(
        "--media-remux", is_flag=True, default=None, help="Rewrite joined streams into .mp4/.m4a with ffmpeg."
    ),
    click.option(
        "--resolver",
        "resolvers",
        multiple=True,
        metavar="NAME",
        help="Use only these media resolvers (repeatable; 'generic' is the built-in one; default: all installed).",
    ),
    click.option(
        "--render",
        type=click.Choice(["all", "auto", "off"]),
        is_flag=False,
        flag_value="all",
        help="Render HTML pages in headless Chromium: every one (--render), or only those built by script "
        "(--render auto). Needs pip install 'webtrawl[browser]'.",
    ),
    click.option("--render-match", metavar="REGEX", help="Render only the pages whose URL matches (implies --render)."),
    click.option("--render-timeout", type=float, help="Seconds a page's rendering may take, behaviours included [30]."),
    click.option("--render-concurrency", type=int, help="Pages rendered at once [2]."),
    click.option(
        "--behavior",
        type=click.Path(path_type=Path, dir_okay=False),
        metavar="FILE.js",
        help="Run this script in every rendered page, after the built-in behaviours (an async function's body).",
    ),
    click.option("--screenshots", is_flag=True, help="Keep a thumbnail of each rendered page in the archive."),
    click.option("--recrawl", is_flag=True, help="Fetch again, conditionally, the pages whose revisit is due."),
    click.option(
        "--every", type=DURATION, metavar="DURATION", help="With --recrawl: keep going, a pass every 6h (s/m/h/d)."
    ),
    click.option(
        "--min-interval", type=DURATION, metavar="DURATION", help="Shortest revisit interval, and the first [1h]."
    ),
    click.option("--max-interval", type=DURATION, metavar="DURATION", help="Longest revisit interval [30d]."),
    click.option(
        "--order",
        type=click.Choice(["bfs", "importance"]),
        help="Within a depth: arrival order (bfs, the default) or most linked-to first (importance, OPIC).",
    ),
    click.option("--skip-near-duplicates", is_flag=True, help="Do not follow links of near-duplicate pages (SimHash)."),
    click.option("--near-distance", type=int, help="SimHash bits two near-duplicates may differ in [3]."),
    click.option("--quiet", "-q", is_flag=True, help="No progress display; only the final summary line."),
    click.option("--verbose", "-v", is_flag=True, help="Log details to stderr."),
    click.option(
        "--redis", "redis_url", metavar="URL", help="Run distributed: this process coordinates the crawl in Redis."
    ),
    click.option(
        "--partition-by",
        type=click.Choice(["host", "url"]),
        default="host",
        show_default=True,
        help="With --redis: split by host (many sites), or by URL (one big site over every node; its limits shared).",
    ),
    click.option("--no-fetch", is_flag=True, help="With --redis: coordinate only; workers fetch."),
    click.option(
        "--partitions", type=int, default=64, show_default=True, help="With --redis: partitions (fixed at creation)."
    ),
    click.option(
        "--dedup", type=click.Choice(["bloom", "exact"]), default="bloom", show_default=True, help="With --redis."
    ),
    click.option(
        "--expected-urls", type=int, default=10_000_000, show_default=True, help="With --redis: sizes the Bloom filter."
    ),
    click.option(
        "--fp-rate", type=float, default=1e-4, show_default=True, help="With --redis: Bloom false-positive rate."
    ),
    click.option(
        "--lease-ttl",
        type=float,
        default=15.0,
        show_default=True,
        help="With --redis: seconds a partition lease lasts (at least 3).",
    ),
]
"""The crawl command's flags, beside the table of the config fields they set (`FLAG_FIELDS`)."""


def crawl_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give the crawl command its flags, in the order `--help` lists them."""
    for option in reversed(CRAWL_OPTIONS):
        command = option(command)
    return command


def build_config(
    seeds: tuple[str, ...], out: Path, name: str, config_file: Path | None, flags: dict[str, Any]
) -> CrawlConfig:
    """The crawl's config from the flags, over the `--config` file when there is one.

    With a file, only the flags given on the command line override it: a flag left at its default must not
    hide the file's value.
    """
    if flags["retries"] < 0:
        raise ConfigError("--retries must be ≥ 0")
    if flags.get("render_match") and flags.get("render") is None:
        flags = {**flags, "render": "all"}  # a pattern of pages to render means rendering them
    ctx = click.get_current_context()
    given = {ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT}
    parts: dict[str, dict[str, Any]] = {
        "scope": {},
        "fetch": {},
        "politeness": {},
        "media": {},
        "revisit": {},
        "render": {},
    }
    settings: dict[str, Any] = {"seeds": seeds, "out": out, "name": name}
    for flag, value in flags.items():
        if (config_file is not None and ctx.get_parameter_source(flag) not in given) or value is None:
            continue
        part, field, convert = FLAG_FIELDS[flag]
        (settings if part is None else parts[part])[field] = convert(value)
    if config_file is not None:
        return CrawlConfig.from_toml(config_file, **settings, **parts)
    return CrawlConfig(
        **settings,
        scope=ScopeConfig(**parts["scope"]),
        fetch=FetchConfig(**parts["fetch"]),
        politeness=PolitenessConfig(**parts["politeness"]),
        media=MediaConfig(**parts["media"]),
        revisit=RevisitConfig(**parts["revisit"]),
        render=RenderConfig(**parts["render"]),
    )


MIN_LEASE_TTL = HEARTBEAT + 1.0
"""Seconds a lease lasts at least: the heartbeat renews it every `HEARTBEAT` seconds."""


def layout_of(
    config: CrawlConfig, partitions: int, dedup: str, expected_urls: int, fp_rate: float, lease_ttl: float
) -> Layout:
    # A lease (and a shared host slot) is renewed at every heartbeat: it must outlast one, with a margin.
    if partitions < 1 or expected_urls < 1 or not 0 < fp_rate < 1 or lease_ttl < MIN_LEASE_TTL:
        raise click.UsageError(
            "--partitions and --expected-urls must be ≥ 1, --fp-rate between 0 and 1, "
            f"--lease-ttl ≥ {MIN_LEASE_TTL:g} s (a heartbeat and a margin)"
        )
    return Layout(
        partitions=partitions,
        dedup=dedup,
        bloom_capacity=first_capacity(expected_urls, partitions),
        bloom_error_rate=fp_rate,
        max_urls_per_host=config.scope.max_urls_per_host,
        max_urls_per_template=config.scope.max_urls_per_template,
        lease_ttl=lease_ttl,
    )
