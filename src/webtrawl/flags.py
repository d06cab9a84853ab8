"""How the crawl command's flags become a `CrawlConfig` (over a `--config` file) and a Redis `Layout`.

Kept apart from the commands so that the one table below, `FLAG_FIELDS`, is the whole map from a flag to
the config field it sets.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import click
from click.core import ParameterSource

from .config import CrawlConfig, FetchConfig, MediaConfig, PolitenessConfig, RevisitConfig, ScopeConfig
from .errors import ConfigError
from .frontier.bloom import first_capacity
from .frontier.redis import Layout


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
}


def build_config(
    seeds: tuple[str, ...], out: Path, name: str, config_file: Path | None, flags: dict[str, Any]
) -> CrawlConfig:
    """The crawl's config from the flags, over the `--config` file when there is one.

    With a file, only the flags given on the command line override it: a flag left at its default must not
    hide the file's value.
    """
    if flags["retries"] < 0:
        raise ConfigError("--retries must be ≥ 0")
    ctx = click.get_current_context()
    given = {ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT}
    parts: dict[str, dict[str, Any]] = {"scope": {}, "fetch": {}, "politeness": {}, "media": {}, "revisit": {}}
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
    )


def layout_of(
    config: CrawlConfig, partitions: int, dedup: str, expected_urls: int, fp_rate: float, lease_ttl: float
) -> Layout:
    if partitions < 1 or expected_urls < 1 or not 0 < fp_rate < 1 or lease_ttl < 1:
        raise click.UsageError(
            "--partitions and --expected-urls must be ≥ 1, --fp-rate between 0 and 1, --lease-ttl ≥ 1 s"
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
