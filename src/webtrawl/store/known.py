"""What a crawl read as its sources knows of URLs named by fingerprint: the dashboard's lists name the pages
they link to (a page's links, a failure's capture, a drop's referrer), and the URL may be known in several
shards, each its own part: the one whose page linked it has it waiting, the one that fetched it done, another
may have dropped it. One query a source for a whole list of them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from .shards import Sources


@dataclass(frozen=True, slots=True)
class Known:
    url: str | None
    state: int | None
    """Its furthest state in any source (`models.State`), None where no source holds it as a URL."""
    dropped: str | None
    """Why a source dropped it, if one did."""
    capture_id: int | None
    """Its latest capture across the sources, as `Sources.capture_id` names it."""


UNKNOWN = Known(None, None, None, None)


def known(sources: Sources, fps: Iterable[int]) -> dict[int, Known]:
    """Each fingerprint of `fps` that some source knows, as the sources together know it."""
    wanted = sorted(set(fps))
    if not wanted:
        return {}
    found: dict[int, Known] = {}
    latest: dict[int, tuple[float, int]] = {}
    """(fetched at, crawl-wide id) of each one's latest capture."""
    for source in sources.all:
        for fp, url, state, reason, local, at in source.conn.execute(
            "SELECT j.value, COALESCE(u.url, d.url), u.state, d.reason, c.id, c.fetched_at FROM json_each(?2) j "
            "LEFT JOIN urls u ON u.crawl_id = ?1 AND u.fp = j.value "
            "LEFT JOIN dropped d ON d.crawl_id = ?1 AND d.fp = j.value "
            "LEFT JOIN captures c ON c.id = (SELECT id FROM captures WHERE crawl_id = ?1 AND fp = j.value "
            "ORDER BY fetched_at DESC, id DESC LIMIT 1)",
            (source.crawl_id, json.dumps(wanted)),
        ):
            if url is None and local is None:
                continue
            was = found.get(fp, UNKNOWN)
            if local is not None:
                latest[fp] = max(latest.get(fp, (at, 0)), (at, sources.capture_id(source, local)))
            found[fp] = Known(
                url=was.url or url,
                state=state if was.state is None else was.state if state is None else max(was.state, state),
                dropped=was.dropped or reason,
                capture_id=latest[fp][1] if fp in latest else None,
            )
    return found
