"""Per-host politeness: how many requests a host may have in flight, and when the next may start.

The frontier asks `free_slots` when it hands URLs out, so a host that is busy, delayed or still waiting
for its robots.txt is simply skipped and never holds a fetch slot another host could use. The crawler
calls `reserve` for every URL it is given, `release` when the response is read, and `cancel` for a URL
it dropped without a request (robots.txt said no), which gives the slot and the delay back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..config import PolitenessConfig
from .robots import RobotsRules


@dataclass(slots=True)
class HostSlot:
    """One host's politeness state."""

    delay: float
    active: int = 0
    next_start: float = 0.0
    """Monotonic time before which no new request to this host may start."""
    previous_start: float = 0.0
    rules: RobotsRules | None = None
    """robots.txt rules; None until fetched (the host is not ready before)."""


class Politeness:
    """The politeness state of every host of the crawl (in memory: it is cheap to rebuild)."""

    def __init__(self, config: PolitenessConfig, *, robots: RobotsRules | None = None) -> None:
        """`robots`, when given, applies to every host without fetching robots.txt (--ignore-robots)."""
        self._config = config
        self._fixed_rules = robots
        self._hosts: dict[str, HostSlot] = {}
        self.robots_wanted: set[str] = set()
        """Hosts with URLs waiting whose robots.txt is not known yet: the crawler fetches it."""

    def _slot(self, host: str) -> HostSlot:
        slot = self._hosts.get(host)
        if slot is None:
            slot = self._hosts[host] = HostSlot(delay=self._config.delay, rules=self._fixed_rules)
        return slot

    def free_slots(self, host: str, now: float) -> int:
        """How many URLs of `host` may start now; a host without robots.txt rules is asked for them."""
        slot = self._slot(host)
        if slot.rules is None:
            self.robots_wanted.add(host)
            return 0
        if now < slot.next_start:
            return 0
        free = self._config.per_host - slot.active
        if free <= 0:
            return 0
        # With a delay, requests start one at a time, `delay` apart.
        return 1 if slot.delay > 0 else free

    def next_start(self, host: str) -> float:
        """Monotonic time at which `host` may next start a request (if it has a free slot then)."""
        return self._slot(host).next_start

    def reserve(self, host: str, now: float | None = None) -> None:
        slot = self._slot(host)
        now = time.monotonic() if now is None else now
        slot.active += 1
        slot.previous_start = slot.next_start
        slot.next_start = now + slot.delay

    def release(self, host: str) -> None:
        self._slot(host).active -= 1

    def cancel(self, host: str) -> None:
        """Undo a `reserve` for a URL that was dropped without a request."""
        slot = self._slot(host)
        slot.active -= 1
        slot.next_start = slot.previous_start

    def rules(self, host: str) -> RobotsRules | None:
        return self._slot(host).rules

    def set_rules(self, host: str, rules: RobotsRules) -> None:
        """Record a host's robots.txt; its Crawl-delay raises the host's delay (up to max-crawl-delay)."""
        slot = self._slot(host)
        slot.rules = rules
        if rules.crawl_delay:
            slot.delay = max(self._config.delay, min(rules.crawl_delay, self._config.max_crawl_delay))
        self.robots_wanted.discard(host)
