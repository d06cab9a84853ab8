"""Durations and sizes as people write them (`90s`, `500ms`, `6h`; `10MB`, `1GiB`), for flags, settings files
and the Python API alike, and back into words for help texts and reports."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import click


class Duration(click.ParamType):
    """Seconds, or a number with a unit: 500ms, 90s, 15m, 6h, 30d."""

    name = "duration"
    _UNITS: ClassVar[dict[str, float]] = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    _FORM = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(ms|s|m|h|d)?\s*", re.IGNORECASE)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a duration", param, ctx)
        if isinstance(value, int | float):
            seconds = float(value)
        else:
            match = self._FORM.fullmatch(str(value))
            if match is None:
                self.fail(
                    f"{value!r} is not a duration (seconds, or a number with ms, s, m, h or d: 500ms, 6h)", param, ctx
                )
            seconds = float(match[1]) * self._UNITS[(match[2] or "s").lower()]
        if seconds < 0:
            self.fail(f"{value!r} is negative", param, ctx)
        return seconds


class Size(click.ParamType):
    """Bytes, or a number with a unit: 500KB, 10MB, 1GiB (KB and KiB alike are 1,024 bytes, as people mean
    them for files)."""

    name = "size"
    _UNITS: ClassVar[dict[str, int]] = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
    _FORM = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*(?:([kmgt])(?:i?b)?|(b))?\s*", re.IGNORECASE)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a size", param, ctx)
        if isinstance(value, int):
            size = value
        else:
            match = self._FORM.fullmatch(str(value))
            if match is None:
                self.fail(f"{value!r} is not a size (bytes, or a number with KB, MB, GB or TB: 10MB)", param, ctx)
            size = int(float(match[1]) * self._UNITS[(match[2] or "").lower()])
        if size < 0:
            self.fail(f"{value!r} is negative", param, ctx)
        return size


DURATION = Duration()
SIZE = Size()


def size_words(n: float) -> str:
    """`n` bytes in the largest unit that keeps it at least 1: "10 MiB", "1.5 GiB", "512 B"."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:g} {unit}" if unit == "B" else f"{round(n, 1):g} {unit}"
        n /= 1024
    return f"{round(n, 1):g} TiB"


def duration_words(seconds: float) -> str:
    """`seconds` as it would be written in a flag: "500ms", "30s", "15m", "6h", "2d"."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds * 1000:g}ms" if seconds < 1 else f"{seconds:g}s"
