"""Budgets against crawler traps: at most so many URLs per host, and per URL template.

A trap is a page generator: an endless calendar, faceted search, a session id in every link. Scope rules
catch the shapes they know; budgets catch the rest by counting. A *template* is a URL with its digit runs
collapsed and its query values dropped (`urls.template`), so `/cal/2026/01/` and `/cal/2031/12/` count
against one budget. A URL over a budget is not added to the frontier; it is recorded as dropped with the
reason `host-budget` or `template-budget`, so the report shows how many the budget cost.

Only URLs that are new to the frontier count, once each: a link found again (or found closer, lowering
its depth) costs nothing. Seeds always get in (and count). Sitemap entries are exempt from the template
budget — a site's own list of its pages is no trap, and `--max-sitemap-urls` bounds it — but not from the
host budget.

The counters live in memory and are rebuilt from the `urls` table when the frontier opens. Per-host
counters are exact (one per host, as the frontier keeps anyway). Per-template counters are bounded: past
`MAX_TEMPLATES` templates, the rarely seen ones are forgotten (see `Budgets._prune`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from xxhash import xxh3_64_intdigest

from ..models import HOST_BUDGET, TEMPLATE_BUDGET, NewURL
from ..urls import template

MAX_TEMPLATES = 200_000
"""Template counters kept at most (about 100 bytes each: ~20 MB). A site of distinct pages (a wiki: each
title its own template) has as many templates as URLs; only repeated shapes need counting."""


class Budgets:
    """The per-host and per-template counters of one frontier, and the decision which new URLs fit.

    `None` as a limit means no limit; with both `None` nothing is counted at all.
    """

    def __init__(self, per_host: int | None, per_template: int | None) -> None:
        self.per_host = per_host
        self.per_template = per_template
        self._hosts: dict[int, int] = {}
        self._templates: dict[int, int] = {}

    @property
    def active(self) -> bool:
        return self.per_host is not None or self.per_template is not None

    @property
    def templates(self) -> int:
        """How many template counters are kept (at most `MAX_TEMPLATES`)."""
        return len(self._templates)

    def load(self, host_counts: Iterable[tuple[int, int]], urls: Iterable[str]) -> None:
        """Rebuild the counters: URLs per host id, and every URL in the frontier (for the templates)."""
        self._hosts = dict(host_counts)
        self._templates = {}
        if self.per_template is None:
            return
        templates = self._templates
        for url in urls:
            key = _key(url)
            templates[key] = templates.get(key, 0) + 1
            if len(templates) > MAX_TEMPLATES:
                self._prune()
                templates = self._templates

    def admit(
        self, urls: Sequence[NewURL], host_ids: Sequence[int], known: Callable[[list[int]], set[int]]
    ) -> tuple[dict[int, str], list[tuple[int, int | None]]]:
        """Decide which of `urls` (with their host ids) fit their budgets.

        Returns the refused ones (index → reason) and, for the admitted ones not counted yet, `(host id,
        template key)` by index order — the caller counts them through `count_new` once it knows which
        were new. `known(fps)` answers which fingerprints are in the frontier already; it is asked only
        about URLs of a host or template this batch could push over its limit, so a batch that fits
        costs no lookup: the counting happens after the insert, for the rows that turned out new.
        """
        per_host, per_template = self.per_host, self.per_template
        keys: Sequence[int | None] = [None] * len(urls)
        tight_hosts: set[int] = set()
        if per_host is not None:
            hosts = self._hosts
            tight_hosts = {h for h, n in Counter(host_ids).items() if hosts.get(h, 0) + n > per_host}
        tight_keys: set[int] = set()
        if per_template is not None:
            templates = self._templates
            template_keys = [_key(url.url) for url in urls]
            tight_keys = {k for k, n in Counter(template_keys).items() if templates.get(k, 0) + n > per_template}
            keys = template_keys
        pending = [(host_ids[i], keys[i]) for i in range(len(urls))]
        refused: dict[int, str] = {}
        if not tight_hosts and not tight_keys:
            return refused, pending
        tight = [i for i in range(len(urls)) if host_ids[i] in tight_hosts or keys[i] in tight_keys]
        already = known([urls[i].fp for i in tight])
        for i in tight:
            url = urls[i]
            if url.fp in already:  # not new: it costs nothing (and a duplicate in this batch neither)
                pending[i] = (-1, None)
                continue
            reason = self._over(host_ids[i], keys[i], url.kind)
            if reason is not None:
                refused[i] = reason
            else:
                self._count(host_ids[i], keys[i])
                already.add(url.fp)
            pending[i] = (-1, None)
        return refused, pending

    def count_new(self, new: Iterable[tuple[int, int | None]]) -> None:
        """Count URLs that were added to the frontier: `(host id, template key)` each."""
        for host_id, key in new:
            if host_id >= 0:
                self._count(host_id, key)
        if len(self._templates) > MAX_TEMPLATES:
            self._prune()

    def _over(self, host_id: int, key: int | None, kind: str) -> str | None:
        if kind == "seed":
            return None
        if self.per_host is not None and self._hosts.get(host_id, 0) >= self.per_host:
            return HOST_BUDGET
        if (
            key is not None
            and self.per_template is not None
            and kind != "sitemap"
            and self._templates.get(key, 0) >= self.per_template
        ):
            return TEMPLATE_BUDGET
        return None

    def _count(self, host_id: int, key: int | None) -> None:
        self._hosts[host_id] = self._hosts.get(host_id, 0) + 1
        if key is not None:
            self._templates[key] = self._templates.get(key, 0) + 1

    def _prune(self) -> None:
        """Forget the templates seen least until at most half of `MAX_TEMPLATES` remain.

        First those seen once, then twice or less, and so on (the bar doubles each round). A template
        forgotten and seen again starts from zero, so it can be undercounted by less than the bar each time;
        to escape its budget for good it must grow by less than that between two prunes, i.e. while at
        least `MAX_TEMPLATES / 2` new templates appear — far too slowly to be a trap worth stopping.
        """
        bar = 2
        while len(self._templates) > MAX_TEMPLATES // 2:
            self._templates = {key: n for key, n in self._templates.items() if n >= bar}
            bar *= 2


def _key(url: str) -> int:
    return xxh3_64_intdigest(template(url).encode())
