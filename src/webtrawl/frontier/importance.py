"""Importance order (`--order importance`): OPIC, the on-line page importance computation (Abiteboul et al.).

Every URL holds some cash; seeds start with `SEED_CASH`. A completed page shares the cash it had when it
was handed out equally among the pages it links to, adding to theirs. The more (and the more important)
pages link to a URL, the more cash it gathers while it waits, and within a depth the URL with the most cash
goes first. Both frontiers keep the cash with the waiting URL; this module says how it flows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from ..models import Completion, NewURL

SEED_CASH = 1.0


def shares(batch: Iterable[Completion]) -> dict[int, float]:
    """The cash each linked URL receives from a batch of completed pages (a URL linked from several gets
    the sum); media tasks lead nowhere and take no share."""
    cash: dict[int, float] = defaultdict(float)
    for item in batch:
        children = {child.fp for child in item.children if child.kind != "media"}
        if children and item.entry.priority > 0:
            share = item.entry.priority / len(children)
            for fp in children:
                cash[fp] += share
    return cash


def already_seen(batch: Sequence[Completion], cash: Mapping[int, float], fresh: Sequence[NewURL]) -> list[NewURL]:
    """The links of `batch` that take a share of `cash` but are not among the `fresh` ones a seen cache let
    through (they were added before): their share must still reach them where they wait. Each once."""
    new = {url.fp for url in fresh}
    seen: dict[int, NewURL] = {}
    for item in batch:
        for child in item.children:
            if child.fp in cash and child.fp not in new:
                seen.setdefault(child.fp, child)
    return list(seen.values())
