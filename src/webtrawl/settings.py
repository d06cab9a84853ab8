"""One vocabulary of crawl settings: the `crawl` command's flags. `--max-depth 2` on the command line is
`max-depth = 2` in a settings file and `max_depth=2` for `webtrawl.crawl`, each value read by the flag's own
type (so `delay = "500ms"` and `max-size = "10MB"` work everywhere), each unknown name refused with the
nearest known ones.

A settings file is TOML. Its keys are flags without their dashes, at the top or in any table (tables only
group: `[crawl]`, `[scope]`, `[fetch]` are alike), plus `seeds` (a list of URLs); see `crawl.toml` in the
repository. A table named after a part of `CrawlConfig` (`[scope]`, `[fetch]`, `[politeness]`, `[media]`,
`[revisit]`, `[render]`) also takes that part's field names (`[fetch] read_timeout = 5`), as files written
for earlier versions do.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

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
from .flags import CRAWL_OPTIONS, FLAG_FIELDS

PARTS: dict[str, type] = {
    "scope": ScopeConfig,
    "fetch": FetchConfig,
    "politeness": PolitenessConfig,
    "media": MediaConfig,
    "revisit": RevisitConfig,
    "render": RenderConfig,
}
"""The parts of a `CrawlConfig`, by field name."""

FILE_ONLY = ("seeds",)
"""Keys a settings file has beyond the flags."""
NOT_IN_FILES = ("config",)
"""Flags a settings file cannot hold."""


def _setting_name(option: click.Option) -> str:
    return next(flag for flag in option.opts if flag.startswith("--")).removeprefix("--")


def _options() -> dict[str, click.Option]:
    """The crawl flags by setting name: the first long flag without its dashes (`--max-depth`: max-depth)."""

    def nothing() -> None: ...

    for option in CRAWL_OPTIONS:
        option(nothing)
    params = getattr(nothing, "__click_params__", [])
    return {_setting_name(param): param for param in params if isinstance(param, click.Option)}


OPTIONS = _options()


@dataclass(slots=True)
class Settings:
    """Settings read from a file or given to `webtrawl.crawl`, not yet a config."""

    values: dict[str, Any]
    """Flag values by the flag's parameter name (`max_depth`, `scope_mode`), converted by its type."""
    fields: dict[tuple[str, str], Any]
    """Config fields set by their own name in a part's table: (part, field) → value."""
    seeds: tuple[str, ...] = ()


def option_named(key: str, where: str) -> click.Option:
    """The flag a setting names, spelled with dashes or underscores; ConfigError names the nearest ones."""
    name = key.strip().replace("_", "-")
    option = OPTIONS.get(name)
    if option is None or name in NOT_IN_FILES:
        known = [known for known in OPTIONS if known not in NOT_IN_FILES]
        near = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(near)}?" if near else ""
        raise ConfigError(
            f"unknown setting {key!r} in {where}{hint} (a setting is a flag of `webtrawl crawl --help` "
            "without its dashes)"
        )
    return option


def converted(option: click.Option, value: Any, where: str) -> Any:
    """`value` read as the flag reads its argument; ConfigError says what the flag wants."""
    try:
        if option.is_bool_flag:  # --cookies, --sitemaps/--no-sitemaps: true or false, nothing else
            if not isinstance(value, bool):
                raise click.BadParameter(f"{value!r} is not true or false")
            return value
        if option.multiple:
            items = [value] if isinstance(value, str) else list(value) if isinstance(value, Iterable) else [value]
            return tuple(option.type.convert(item, option, None) for item in items)
        return option.type.convert(value, option, None)
    except click.BadParameter as exc:
        raise ConfigError(f"{_setting_name(option)} in {where}: {exc.message}") from None


def read_settings(given: Mapping[str, Any], where: str) -> Settings:
    """Settings given by name (the Python API's keyword arguments, a settings file's keys)."""
    settings = Settings(values={}, fields={})
    for key, value in given.items():
        option = option_named(key, where)
        assert option.name is not None
        settings.values[option.name] = converted(option, value, where)
    return settings


def read_file(path: Path) -> Settings:
    """The settings of TOML file `path`; ConfigError for a file that cannot be read or holds a bad setting."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read settings file {path}: {exc}") from None
    settings = Settings(values={}, fields={})
    for key, value in data.items():
        if isinstance(value, dict):
            _read_table(settings, path, key, value)
        else:
            _read_key(settings, path, None, key, value)
    return settings


def _read_table(settings: Settings, path: Path, table: str, values: dict[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, dict):
            raise ConfigError(f"[{table}.{key}] in {path}: tables hold settings, not further tables")
        _read_key(settings, path, table, key, value)


def _read_key(settings: Settings, path: Path, table: str | None, key: str, value: Any) -> None:
    where = f"{path}" if table is None else f"[{table}] of {path}"
    if key in FILE_ONLY:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(seed, str) for seed in value):
            raise ConfigError(f"seeds in {where} must be a list of URLs")
        settings.seeds += tuple(value)
        return
    part = PARTS.get(table or "")
    if part is not None and key in {f.name for f in fields(part)} and key.replace("_", "-") not in OPTIONS:
        settings.fields[table, key] = tuple(value) if isinstance(value, list) else value  # type: ignore[index]
        return
    option = option_named(key, where)
    assert option.name is not None
    settings.values[option.name] = converted(option, value, where)


def build(seeds: tuple[str, ...], values: Mapping[str, Any], named: Mapping[tuple[str, str], Any]) -> CrawlConfig:
    """The config of a crawl from flag values by parameter name (None values left out; flags that are no
    config field, such as `quiet` or `redis_url`, ignored) over config fields set by their own name."""
    if (values.get("retries") or 0) < 0:
        raise ConfigError("retries must be ≥ 0")
    if values.get("render_match") and values.get("render") is None:
        values = {**values, "render": "all"}  # a pattern of pages to render means rendering them
    parts: dict[str, dict[str, Any]] = {part: {} for part in PARTS}
    settings: dict[str, Any] = {"seeds": seeds}
    for (part, field), value in named.items():
        parts[part][field] = value
    for flag, value in values.items():
        if value is None:
            continue
        if flag in ("out", "name"):
            settings[flag] = value
        elif flag in FLAG_FIELDS:
            part_name, field, convert = FLAG_FIELDS[flag]
            (settings if part_name is None else parts[part_name])[field] = convert(value)
    if "out" not in settings:
        raise ConfigError('give the crawl directory: --out DIR (or out = "DIR" in the settings file)')
    built = {name: _part(cls, parts[name]) for name, cls in PARTS.items()}
    return CrawlConfig(**settings, **built)


def from_command_line(
    ctx: click.Context, seeds: tuple[str, ...], flags: dict[str, Any]
) -> tuple[CrawlConfig, dict[str, Any]]:
    """The crawl's config and every flag's value, over the settings file (`--config`) when there is one.
    Seeds on the command line replace the file's."""
    path = flags.get("config_file")
    file = read_file(path) if path is not None else Settings(values={}, fields={})
    sources = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    values = _over_file(flags, file, lambda flag: ctx.get_parameter_source(flag) in sources)
    seeds = seeds or file.seeds
    if not seeds:
        raise ConfigError("give at least one seed URL (on the command line, or seeds = [...] in the settings file)")
    return build(seeds, values, file.fields), values


COMMAND_LINE_ONLY = ("quiet", "verbose", "log_format", "redis_url", "partition_by", "no_fetch", "partitions",
                     "dedup", "expected_urls", "fp_rate", "lease_ttl", "refetch_lost")  # fmt: skip
"""Flags of the command line alone: how it talks to the terminal, and distributed runs (`webtrawl crawl --redis`)."""


def for_api(seeds: tuple[str, ...], given: Mapping[str, Any]) -> CrawlConfig:
    """The config `webtrawl.crawl(*seeds, **given)` describes: settings by flag name (`max_depth=2`,
    `delay="1s"`, `scope="domain"`), `config=` a settings file they override, or whole config parts
    (`scope=ScopeConfig(...)`)."""
    given = dict(given)
    whole = {key: given.pop(key) for key in list(given) if key in PARTS and isinstance(given[key], PARTS[key])}
    path = given.pop("config", None)
    file = read_file(Path(path)) if path is not None else Settings(values={}, fields={})
    settings = read_settings(given, "the arguments of webtrawl.crawl")
    for name in settings.values:
        if name in COMMAND_LINE_ONLY:
            raise ConfigError(f"{name} is a setting of the webtrawl command alone")
    values = _over_file({**_defaults(), **settings.values}, file, lambda flag: flag in settings.values)
    if not seeds and not file.seeds:
        raise ConfigError("give at least one seed URL")
    config = build(seeds or file.seeds, values, file.fields)
    return replace(config, **whole) if whole else config


def _over_file(values: Mapping[str, Any], file: Settings, given: Callable[[str], bool]) -> dict[str, Any]:
    """Each flag's value: the one `given` says was given, else the file's, else its default. A default must
    not hide the file's value, nor a config field the file sets by its own name."""
    merged = {flag: value if given(flag) else file.values.get(flag, value) for flag, value in values.items()}
    for flag, (part, field, _convert) in FLAG_FIELDS.items():
        if (part, field) in file.fields and not given(flag) and flag not in file.values:
            merged[flag] = None
    return merged


def _defaults() -> dict[str, Any]:
    """Every flag's value when the command line gives none, as click makes it."""
    command = click.Command("crawl", params=list(OPTIONS.values()))
    with command.make_context("crawl", [], resilient_parsing=True) as ctx:
        return dict(ctx.params)


def _part(cls: type, values: dict[str, Any]) -> Any:
    try:
        return cls(**values)
    except TypeError as exc:  # a field name a part does not have
        raise ConfigError(f"bad settings: {exc}") from None
