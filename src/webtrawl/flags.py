"""The crawl command's flags (`CRAWL_OPTIONS`), and how they become a `CrawlConfig` (over a `--config` file)
and a Redis `Layout`.

Kept apart from the commands so that the one table below, `FLAG_FIELDS`, is the whole map from a flag to
the config field it sets, and the flags are declared beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .cluster.bloom import first_capacity
from .config import (
    CrawlConfig,
)
from .errors import ConfigError
from .units import DURATION, SIZE

if TYPE_CHECKING:
    from .cluster.layout import Layout


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
    "connect_timeout": ("fetch", "connect_timeout", _same),
    "timeout": ("fetch", "read_timeout", _same),
    "total_timeout": ("fetch", "total_timeout", _same),
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
    "add_seeds": (None, "add_seeds", _same),
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
    click.option("--out", "-o", type=click.Path(path_type=Path), help="Crawl directory (created when missing)."),
    click.option("--name", default="default", show_default=True, help="Crawl name (several crawls may share --out)."),
    click.option(
        "--config",
        "config_file",
        type=click.Path(path_type=Path, dir_okay=False),
        metavar="FILE.toml",
        help="Settings file: any flag below as a key (max-depth = 2), seeds too; flags given here win.",
    ),
    click.option(
        "--add-seeds",
        is_flag=True,
        help="Resuming: add the seeds given to the crawl in --out (its scope grows to their hosts).",
    ),
    click.option("--max-pages", type=int, help="Stop after this many pages in the whole crawl."),
    click.option("--max-depth", type=int, help="Do not follow links deeper than this."),
    click.option("--max-time", type=DURATION, metavar="DURATION", help="Stop this run after this long (90s, 2h)."),
    click.option("--concurrency", type=int, default=32, show_default=True, help="Fetches in flight."),
    click.option("--per-host", type=int, default=2, show_default=True, help="Fetches in flight per host."),
    click.option(
        "--delay",
        type=DURATION,
        default="500ms",
        show_default=True,
        metavar="DURATION",
        help="Time between request starts on one host.",
    ),
    click.option("--per-ip", type=int, help="Fetches in flight per IP address, across host names (default: no limit)."),
    click.option("--adaptive", is_flag=True, help="Each host's delay follows its response times; 429/503 back it off."),
    click.option(
        "--min-delay",
        type=DURATION,
        default="0s",
        show_default=True,
        metavar="DURATION",
        help="Smallest delay with --adaptive.",
    ),
    click.option(
        "--max-delay",
        type=DURATION,
        default="1m",
        show_default=True,
        metavar="DURATION",
        help="Largest delay with --adaptive.",
    ),
    click.option(
        "--max-crawl-delay",
        type=DURATION,
        default="30s",
        show_default=True,
        metavar="DURATION",
        help="robots.txt Crawl-delay is obeyed up to this.",
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
    click.option("--max-url-length", type=int, default=2048, show_default=True, help="Drop longer URLs (characters)."),
    click.option(
        "--max-query-params", type=int, default=10, show_default=True, help="Drop URLs with more query parameters."
    ),
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
    click.option(
        "--user-agent",
        metavar="TEXT",
        help="User-Agent header [webtrawl/VERSION]. Crawling others' sites, name yourself and a contact: "
        "'mybot/1.0 (+https://example.org/bot; bot@example.org)'.",
    ),
    click.option(
        "--max-size",
        type=SIZE,
        default="10MB",
        show_default=True,
        metavar="SIZE",
        help="Largest body, received and decoded (500KB, 10MB); a longer one is cut and marked truncated.",
    ),
    click.option("--fetch-non-html", is_flag=True, help="Download bodies of non-HTML responses too."),
    click.option(
        "--connect-timeout",
        type=DURATION,
        default="10s",
        show_default=True,
        metavar="DURATION",
        help="Longest wait for a connection (TLS included).",
    ),
    click.option(
        "--timeout",
        type=DURATION,
        default="30s",
        show_default=True,
        metavar="DURATION",
        help="Read timeout: the longest silence between two pieces of a response.",
    ),
    click.option(
        "--total-timeout",
        type=DURATION,
        default="1m",
        show_default=True,
        metavar="DURATION",
        help="Longest a whole request may take, however it trickles in.",
    ),
    click.option(
        "--resolve",
        multiple=True,
        metavar="HOST:[PORT:]ADDR",
        help="Connect to ADDR for HOST, as curl does (repeatable); the guard lets these through.",
    ),
    click.option(
        "--dns-ttl",
        type=DURATION,
        default="5m",
        show_default=True,
        metavar="DURATION",
        help="How long a DNS answer is reused.",
    ),
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
    click.option(
        "--warc-size",
        type=SIZE,
        default="1GB",
        show_default=True,
        metavar="SIZE",
        help="Size at which a new WARC file begins.",
    ),
    click.option("--mirror", is_flag=True, help="Also write plain files named from the URL, as wget does."),
    click.option(
        "--media",
        "media_kinds",
        metavar="audio[,video]",
        help="Also collect these media into DIR/media/ (found on pages, resolved, downloaded with resume).",
    ),
    click.option(
        "--media-max-size", type=SIZE, metavar="SIZE", help="Largest media file or stream [2GB; 0: no limit]."
    ),
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
    click.option(
        "--render-timeout",
        type=DURATION,
        metavar="DURATION",
        help="How long a page's rendering may take, behaviours included [30s].",
    ),
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
    click.option("--verbose", "-v", is_flag=True, help="Log details to stderr, every request included."),
    click.option(
        "--log-format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="Log lines as text, or as one JSON object each; json also prints the end report as JSON on stdout.",
    ),
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
        "--dedup",
        type=click.Choice(["bloom", "exact"]),
        default="bloom",
        show_default=True,
        help="With --redis: how a URL already seen is known: a Bloom filter (small; rare false positives, counted) "
        "or an exact set.",
    ),
    click.option(
        "--expected-urls", type=int, default=10_000_000, show_default=True, help="With --redis: sizes the Bloom filter."
    ),
    click.option(
        "--fp-rate", type=float, default=1e-4, show_default=True, help="With --redis: Bloom false-positive rate."
    ),
    click.option(
        "--lease-ttl",
        type=DURATION,
        default="15s",
        show_default=True,
        metavar="DURATION",
        help="With --redis: how long a partition lease lasts (at least 3s).",
    ),
    click.option(
        "--refetch-lost",
        is_flag=True,
        help="With --redis: when Redis lost the crawl and some of its shards cannot be read here, rebuild it "
        "without them (their pages are fetched again where the other shards link them).",
    ),
]
"""The crawl command's flags, beside the table of the config fields they set (`FLAG_FIELDS`)."""


HELP_GROUPS: dict[str, tuple[str, ...]] = {
    "Output": ("out", "name", "config_file", "add_seeds", "warc_size", "mirror", "quiet", "verbose", "log_format"),
    "Scope and limits": (
        "scope_mode", "allow", "deny", "max_depth", "max_pages", "max_time", "sitemaps", "max_sitemap_urls",
        "page_requisites", "ignore_nofollow", "order", "skip_near_duplicates", "near_distance", "max_url_length",
        "max_query_params", "max_repeated_segments", "max_meaningless_symbols", "max_urls_per_host",
        "max_urls_per_template",
    ),
    "Politeness": (
        "delay", "per_host", "per_ip", "adaptive", "min_delay", "max_delay", "max_crawl_delay", "ignore_robots",
        "user_agent",
    ),
    "Fetching": (
        "concurrency", "connect_timeout", "timeout", "total_timeout", "retries", "max_size", "fetch_non_html",
        "header", "auth", "cookies", "proxy", "resolve", "dns_ttl", "block_private", "allow_private", "insecure",
    ),
    "Re-crawling": ("recrawl", "every", "min_interval", "max_interval"),
    "Media": (
        "media_kinds", "media_max_size", "media_concurrency", "media_quality", "media_max_duration", "media_remux",
        "resolvers",
    ),
    "Rendering (headless Chromium)": (
        "render", "render_match", "render_timeout", "render_concurrency", "behavior", "screenshots",
    ),
    "Distributed (with --redis)": (
        "redis_url", "partition_by", "no_fetch", "partitions", "dedup", "expected_urls", "fp_rate", "lease_ttl",
        "refetch_lost",
    ),
}  # fmt: skip
"""The sections of `webtrawl crawl --help`, by flag parameter name; flags of no section come last."""


class GroupedCommand(click.Command):
    """A command whose --help lists its options in `HELP_GROUPS` sections instead of one long list."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {param.name: param.get_help_record(ctx) for param in self.get_params(ctx)}
        others = tuple(name for name in records if name not in _GROUPED)
        for title, names in [*HELP_GROUPS.items(), ("Other", others)]:
            rows = [record for name in names if (record := records.get(name)) is not None]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


_GROUPED = {name for names in HELP_GROUPS.values() for name in names}


def crawl_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give the crawl command its flags, in the order `--help` lists them."""
    for option in reversed(CRAWL_OPTIONS):
        command = option(command)
    return command


def layout_of(
    config: CrawlConfig, partitions: int, dedup: str, expected_urls: int, fp_rate: float, lease_ttl: float
) -> Layout:
    # Imported here, as in the CLI: only a distributed crawl needs Redis's client.
    from .cluster.layout import Layout
    from .cluster.node import HEARTBEAT

    # A lease (and a shared host slot) is renewed at every heartbeat: it must outlast one, with a margin.
    shortest = HEARTBEAT + 1.0
    if partitions < 1 or expected_urls < 1 or not 0 < fp_rate < 1 or lease_ttl < shortest:
        raise click.UsageError(
            "--partitions and --expected-urls must be ≥ 1, --fp-rate between 0 and 1, "
            f"--lease-ttl ≥ {shortest:g} s (a heartbeat and a margin)"
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
