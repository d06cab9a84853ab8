"""DASH: from an MPD to the tracks of one stream task (the best video and the best audio, as two files).

The MPD is read here with the standard library's XML parser: the Python DASH libraries give the document's
elements but not the segment addresses, and those are the work (`SegmentTemplate` with `$Number$` or
`$Time$` and a `SegmentTimeline`, `SegmentList`, `SegmentBase`, and `BaseURL` at every level). A document
that declares a DTD is refused, so no entity is ever expanded. A live MPD (`type="dynamic"`) is refused:
what it holds depends on the clock, and an on-demand copy is what webtrawl collects. The first period is
taken (multi-period documents are mostly ads stitched around one programme).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urljoin
from xml.etree.ElementTree import Element, ParseError, XMLParser

from ..config import Quality
from .segments import MAX_SEGMENTS, Segment, Stream, StreamError, Track, choose

_TEMPLATE_FIELD = re.compile(r"\$(RepresentationID|Number|Time|Bandwidth)(%0(\d+)d)?\$|\$\$")
_DURATION = re.compile(r"P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?")


@dataclass(frozen=True, slots=True)
class _Choice:
    representation: Element
    adaptation: Element
    kind: str
    bandwidth: int


def read_mpd(body: bytes, url: str, quality: Quality) -> Stream:
    """The stream an MPD fetched from `url` describes; `StreamError` when it describes none."""
    root = _parse(body, url)
    if (root.get("type") or "static") == "dynamic":
        raise StreamError(f"live DASH ({url}, type=dynamic) is not collected")
    period = _child(root, "Period")
    if period is None:
        raise StreamError(f"MPD {url} has no period")
    total = _seconds(period.get("duration")) or _seconds(root.get("mediaPresentationDuration"))
    base = _base(_base(url, root), period)
    choices: dict[str, list[_Choice]] = {"video": [], "audio": []}
    for adaptation in _children(period, "AdaptationSet"):
        for representation in _children(adaptation, "Representation"):
            kind = _kind(adaptation, representation)
            if kind in choices:
                bandwidth = int(representation.get("bandwidth") or 0)
                choices[kind].append(_Choice(representation, adaptation, kind, bandwidth))
    tracks: list[Track] = []
    for kind in ("video", "audio"):
        if not choices[kind]:
            continue
        chosen = choose(choices[kind], lambda c: c.bandwidth, quality)
        segments, init = _segments(chosen, period, _base(_base(base, chosen.adaptation), chosen.representation), total)
        role: Literal["main", "audio"] = "main" if kind == "video" or not choices["video"] else "audio"
        tracks.append(Track(role=role, segments=segments, init=init, extension=_extension(chosen)))
    if not tracks:
        raise StreamError(f"MPD {url} has no audio or video representation")
    return Stream(protocol="dash", tracks=tracks)


def _parse(body: bytes, url: str) -> Element:
    head = body[:8192]
    if b"<!DOCTYPE" in head.upper() or b"<!ENTITY" in body.upper():
        raise StreamError(f"MPD {url} declares a DTD (refused)")
    parser = XMLParser()
    try:
        parser.feed(body)
        root = parser.close()
    except ParseError as exc:
        raise StreamError(f"{url} is not an MPD ({exc})") from None
    if _local(root.tag) != "MPD":
        raise StreamError(f"{url} is not an MPD (its root is <{_local(root.tag)}>)")
    return root


def _segments(choice: _Choice, period: Element, base: str, total: float | None) -> tuple[list[Segment], Segment | None]:
    levels = (choice.representation, choice.adaptation, period)
    template = _merged(levels, "SegmentTemplate")
    if template is not None:
        return _template(template, choice, base, total)
    segment_list = _first(levels, "SegmentList")
    if segment_list is not None:
        return _list(segment_list, base)
    # SegmentBase, or a bare BaseURL: the representation is one file, fetched whole.
    return [Segment(base, total or 0.0)], None


def _template(
    template: dict[str, str | list[Element]], choice: _Choice, base: str, total: float | None
) -> tuple[list[Segment], Segment | None]:
    media = template.get("media")
    if not isinstance(media, str):
        raise StreamError("SegmentTemplate without a media attribute")
    timescale = int(_str(template, "timescale") or 1)
    number = int(_str(template, "startNumber") or 1)
    ident = choice.representation.get("id") or ""

    def address(pattern: str, **values: int) -> str:
        return urljoin(base, _fill(pattern, ident, choice.bandwidth, values))

    times: list[tuple[int, int]] = []  # (start, duration) in timescale units
    timeline = template.get("SegmentTimeline")
    if isinstance(timeline, list) and timeline:
        end = None if total is None else round(total * timescale)
        now = 0
        for s in timeline:
            start = int(s.get("t") or now)
            duration = int(s.get("d") or 0)
            if duration <= 0:
                raise StreamError("SegmentTimeline entry without a duration")
            repeat = int(s.get("r") or 0)
            if repeat < 0:  # until the period ends
                if end is None:
                    raise StreamError("SegmentTimeline repeats to an end the MPD does not give")
                repeat = max(0, math.ceil((end - start) / duration) - 1)
            if len(times) + repeat + 1 > MAX_SEGMENTS:
                raise StreamError(f"the MPD has over the {MAX_SEGMENTS:,} segments a stream may have")
            for _ in range(repeat + 1):
                times.append((start, duration))
                start += duration
            now = start
    else:
        duration = int(_str(template, "duration") or 0)
        if duration <= 0 or total is None:
            raise StreamError("SegmentTemplate without a timeline, or a duration and the stream's length")
        count = math.ceil(total * timescale / duration - 1e-9)
        if count > MAX_SEGMENTS:
            raise StreamError(f"the MPD has {count:,} segments, over the {MAX_SEGMENTS:,} a stream may have")
        times = [(index * duration, duration) for index in range(count)]
    segments = [
        Segment(address(media, Number=number + index, Time=start), duration / timescale, number + index)
        for index, (start, duration) in enumerate(times)
    ]
    initialization = _str(template, "initialization")
    init = Segment(address(initialization)) if initialization else None
    return segments, init


def _list(segment_list: Element, base: str) -> tuple[list[Segment], Segment | None]:
    timescale = int(segment_list.get("timescale") or 1)
    duration = int(segment_list.get("duration") or 0) / timescale
    segments = []
    for index, item in enumerate(_children(segment_list, "SegmentURL")):
        if index >= MAX_SEGMENTS:
            raise StreamError(f"the MPD has over the {MAX_SEGMENTS:,} segments a stream may have")
        address = urljoin(base, item.get("media") or "")
        segments.append(Segment(address, duration, index, _range(item.get("mediaRange"))))
    init = None
    if (initialization := _child(segment_list, "Initialization")) is not None:
        init = Segment(
            urljoin(base, initialization.get("sourceURL") or ""), byterange=_range(initialization.get("range"))
        )
    return segments, init


def _fill(pattern: str, ident: str, bandwidth: int, values: dict[str, int]) -> str:
    def field(match: re.Match[str]) -> str:
        name = match[1]
        if name is None:
            return "$"
        if name == "RepresentationID":
            return ident
        value = bandwidth if name == "Bandwidth" else values.get(name)
        if value is None:
            raise StreamError(f"${name}$ in an initialization template")
        return str(value).rjust(int(match[3]), "0") if match[3] else str(value)

    return _TEMPLATE_FIELD.sub(field, pattern)


def _merged(levels: tuple[Element, ...], name: str) -> dict[str, str | list[Element]] | None:
    """A segment template's attributes, the representation's overriding its adaptation set's and period's."""
    found: dict[str, str | list[Element]] = {}
    present = False
    for level in reversed(levels):
        element = _child(level, name)
        if element is None:
            continue
        present = True
        found.update(element.attrib)
        if (timeline := _child(element, "SegmentTimeline")) is not None:
            found["SegmentTimeline"] = list(_children(timeline, "S"))
    return found if present else None


def _first(levels: tuple[Element, ...], name: str) -> Element | None:
    return next((element for level in levels if (element := _child(level, name)) is not None), None)


def _kind(adaptation: Element, representation: Element) -> str:
    for element in (representation, adaptation):
        mime = element.get("mimeType") or ""
        if mime.startswith(("video/", "audio/")):
            return mime.partition("/")[0]
        if (content := element.get("contentType")) in ("video", "audio"):
            return content
    codecs = (representation.get("codecs") or adaptation.get("codecs") or "").lower()
    if codecs.startswith(("avc", "hvc", "hev", "vp0", "vp9", "av01")):
        return "video"
    if codecs.startswith(("mp4a", "opus", "ac-3", "ec-3", "flac")):
        return "audio"
    return ""


def _extension(choice: _Choice) -> str:
    mime = choice.representation.get("mimeType") or choice.adaptation.get("mimeType") or ""
    if mime.endswith("webm"):
        return "webm"
    return "m4a" if choice.kind == "audio" else "mp4"


def _base(url: str, element: Element) -> str:
    child = _child(element, "BaseURL")
    return urljoin(url, child.text.strip()) if child is not None and child.text else url


def _range(value: str | None) -> tuple[int, int] | None:
    """An MPD range `first-last` as (offset, length)."""
    if not value:
        return None
    first, _, last = value.partition("-")
    try:
        return int(first), int(last) - int(first) + 1
    except ValueError:
        raise StreamError(f"bad byte range {value!r}") from None


def _seconds(value: str | None) -> float | None:
    """An xs:duration (`PT1H2M3.5S`, `P1DT2H`) in seconds."""
    if not value or not (match := _DURATION.fullmatch(value.strip())):
        return None
    days, hours, minutes, seconds = (float(part) if part else 0.0 for part in match.groups())
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def _str(found: dict[str, str | list[Element]], name: str) -> str | None:
    value = found.get(name)
    return value if isinstance(value, str) else None


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _children(element: Element, name: str) -> Iterator[Element]:
    return (child for child in element if _local(child.tag) == name)


def _child(element: Element, name: str) -> Element | None:
    return next(_children(element, name), None)
