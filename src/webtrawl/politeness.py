"""Per-host politeness: how many requests a host may have in flight, and when the next may start.

The frontier asks `free_slots` when it hands URLs out, so a host that is busy, delayed or still waiting
for its robots.txt is simply skipped and never holds a fetch slot another host could use. The crawler
calls `reserve` for every URL it is given, `release` when the response is read, and `cancel` for a URL
it dropped without a request (robots.txt said no), which gives the slot and the delay back.

robots.txt follows Google's rules: an unreachable one (5xx, network error) means "disallow everything
for now", so the host waits and robots.txt is asked again with backoff; when the retry budget is spent the
rules stay "unreachable" and the host's URLs fail with that reason, so the crawl still ends. Rules expire
(`robots_ttl`) and are fetched again, the old ones applying meanwhile.

State is bounded: beyond `max_hosts`, idle hosts least recently used are forgotten (their robots.txt is
fetched again if they come back), so a crawl of many hosts does not grow without limit.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from .config import PolitenessConfig
from .fetch.robots import RobotsRules

IP_RECHECK = 0.05
"""Seconds after which a host held back only by its address's limit is asked again."""
MAX_HOSTS = 50_000
"""Hosts whose state is kept in memory; idle ones beyond this are forgotten, least recently used first."""


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
    rules_until: float = float("inf")
    """Monotonic time the rules expire."""
    robots_attempts: int = 0
    robots_after: float = 0.0
    """Monotonic time before which robots.txt is not asked again (after an unreachable one)."""
    ip: str | None = None
    """The address the host's last response came from (per-IP limits apply once it is known)."""
    ip_held: int = 0
    """Requests in flight counted against `ip`."""


class Politeness:
    """The politeness state of the crawl's hosts (in memory: it is cheap to rebuild)."""

    def __init__(
        self,
        config: PolitenessConfig,
        *,
        robots: RobotsRules | None = None,
        robots_attempts: int = 4,
        backoff: float = 1.0,
        max_hosts: int = MAX_HOSTS,
        address_of: Callable[[str], str | None] | None = None,
    ) -> None:
        """`robots`, when given, applies to every host without fetching robots.txt (--ignore-robots).

        `robots_attempts` and `backoff` bound how often an unreachable robots.txt is asked again.
        `address_of` is where per-IP limits learn a host's address before its first response (the DNS cache).
        """
        self._config = config
        self._fixed_rules = robots
        self._robots_attempts = robots_attempts
        self._backoff = backoff
        self._max_hosts = max_hosts
        self._hosts: OrderedDict[str, HostSlot] = OrderedDict()
        self._ip_active: dict[str, int] = {}
        self.robots_wanted: dict[str, None] = {}
        """Hosts with URLs waiting whose robots.txt is wanted now, oldest first: the crawler takes them out
        and fetches their robots.txt (a queue, so taking one costs nothing however many wait)."""
        self._address_of = address_of
        self._readied: dict[str, None] = {}
        """Hosts that may have become ready (a request ended, robots.txt arrived) since `take_ready`."""

    def _slot(self, host: str) -> HostSlot:
        slot = self._hosts.get(host)
        if slot is None:
            slot = self._hosts[host] = HostSlot(delay=self._config.delay, rules=self._fixed_rules)
            if len(self._hosts) > self._max_hosts * 1.1:
                self._forget_idle()
        return slot

    def _forget_idle(self) -> None:
        """Forget idle hosts, least recently used first, down to `max_hosts` (in batches: amortized).

        A forgotten host that still waits for its robots.txt stays in `robots_wanted`; its slot is made
        anew when the rules arrive.
        """
        excess = len(self._hosts) - self._max_hosts
        for host, slot in list(self._hosts.items()):
            if excess <= 0:
                break
            if slot.active == 0:
                del self._hosts[host]
                excess -= 1

    def free_slots(self, host: str, now: float) -> int:
        """How many URLs of `host` may start now; a host without robots.txt rules is asked for them."""
        slot = self._slot(host)
        self._hosts.move_to_end(host)
        if slot.rules is None or now >= slot.rules_until:
            if now >= slot.robots_after:
                self.robots_wanted[host] = None
            if slot.rules is None:
                return 0
        if now < slot.next_start:
            return 0
        free = self._config.per_host - slot.active
        if self._config.per_ip is not None:
            if slot.ip is None and self._address_of is not None:
                slot.ip = self._address_of(host)
            if slot.ip is not None:
                free = min(free, self._config.per_ip - self._ip_active.get(slot.ip, 0))
        if free <= 0:
            return 0
        # With a delay, requests start one at a time, `delay` apart.
        return 1 if slot.delay > 0 else free

    def wait(self, host: str, now: float) -> float | None:
        """For a host with no free slot now: when to ask again, or None to wait until `take_ready` names it."""
        slot = self._slot(host)
        if slot.rules is None:
            return slot.robots_after if now < slot.robots_after else None
        if now < slot.next_start:
            return slot.next_start
        if slot.active >= self._config.per_host:
            return None
        return now + IP_RECHECK  # held back by its address's limit: other hosts' requests must end first

    def take_ready(self) -> list[str]:
        """The hosts that may have become ready since the last call, oldest first. The frontier parks hosts
        that are not ready and wakes these before it hands URLs out (a queue it drains, rather than a
        callback into it: politeness is built before the frontier that reads it)."""
        hosts = list(self._readied)
        self._readied.clear()
        return hosts

    def next_start(self, host: str) -> float:
        """Monotonic time at which `host` may next start a request (if it has a free slot then)."""
        slot = self._slot(host)
        return slot.next_start if slot.rules is not None else max(slot.next_start, slot.robots_after)

    def reserve(self, host: str, now: float | None = None) -> None:
        slot = self._slot(host)
        now = time.monotonic() if now is None else now
        slot.active += 1
        if slot.ip is not None:
            slot.ip_held += 1
            self._ip_active[slot.ip] = self._ip_active.get(slot.ip, 0) + 1
        slot.previous_start = slot.next_start
        slot.next_start = now + slot.delay

    def claimed(self, host: str, reserved: int, handed: int, now: float) -> None:
        """A claim reserved `reserved` slots of `host` and handed out `handed` of them (the frontier had fewer URLs
        ready): the rest are given back, and the requests handed out start now."""
        for _ in range(reserved - handed):
            self.cancel(host)
        if handed:
            self.started(host, now)

    def started(self, host: str, now: float) -> None:
        """The requests reserved for `host` start now: the delay counts from here."""
        slot = self._slot(host)
        slot.next_start = now + slot.delay

    def release(
        self, host: str, *, elapsed: float | None = None, overloaded: bool = False, ip: str | None = None
    ) -> None:
        """A request to `host` ended (from address `ip`, when known).

        With adaptive delays its duration and status steer the host's next delay.
        """
        slot = self._slot(host)
        self._leave(slot)
        if ip is not None and slot.ip_held == 0:  # an address changes only between counted requests
            slot.ip = ip
        self._readied[host] = None
        config = self._config
        if not config.adaptive or elapsed is None:
            return
        floor = self._floor(slot.rules)
        if overloaded:  # 429, 503, errors: at least double, and at least a second
            delay = max(slot.delay * 2, floor, 1.0)
        else:  # follow the server's pace smoothly: a slow answer asks for a longer pause
            delay = max(floor, 0.7 * slot.delay + 0.3 * elapsed * config.adaptive_factor)
        slot.delay = min(config.max_delay, delay)

    def cancel(self, host: str) -> None:
        """Undo a `reserve` for a URL that was dropped without a request."""
        slot = self._slot(host)
        self._leave(slot)
        slot.next_start = slot.previous_start
        self._readied[host] = None

    def _leave(self, slot: HostSlot) -> None:
        slot.active -= 1
        if slot.ip is not None and slot.ip_held > 0:
            slot.ip_held -= 1
            left = self._ip_active[slot.ip] - 1
            if left > 0:
                self._ip_active[slot.ip] = left
            else:
                del self._ip_active[slot.ip]

    def active(self, host: str) -> int:
        """Requests of `host` reserved and not yet ended."""
        slot = self._hosts.get(host)
        return slot.active if slot is not None else 0

    def delay(self, host: str, rules: RobotsRules | None = None) -> float:
        """The host's delay now or, given `rules` not yet set, the delay it will have once they are."""
        slot = self._slot(host)
        if rules is None:
            return slot.delay
        return max(slot.delay, self._floor(rules))

    def rules(self, host: str) -> RobotsRules | None:
        return self._slot(host).rules

    def set_rules(self, host: str, rules: RobotsRules) -> None:
        """Record a host's robots.txt; its Crawl-delay raises the host's delay (up to max-crawl-delay)."""
        try:
            self._set_rules(host, rules)
        finally:
            self._readied[host] = None

    def _set_rules(self, host: str, rules: RobotsRules) -> None:
        slot = self._slot(host)
        self.robots_wanted.pop(host, None)
        now = time.monotonic()
        if rules.unreachable and slot.rules is None:
            slot.robots_attempts += 1
            if slot.robots_attempts < self._robots_attempts:
                pause = self._backoff * 2 ** (slot.robots_attempts - 1) * random.uniform(0.75, 1.25)
                slot.robots_after = now + pause
                return
        elif rules.unreachable:  # an expired copy stays in force while the server is in trouble
            slot.robots_after = now + self._backoff
            return
        slot.rules = rules
        slot.rules_until = now + self._config.robots_ttl
        slot.robots_attempts = 0
        slot.delay = max(slot.delay, self._floor(slot.rules))

    def _floor(self, rules: RobotsRules | None) -> float:
        """The smallest delay for a host: the configured one, raised by robots.txt's Crawl-delay."""
        config = self._config
        floor = config.min_delay if config.adaptive else config.delay
        crawl_delay = rules.crawl_delay if rules is not None else None
        if crawl_delay:
            floor = max(floor, min(crawl_delay, config.max_crawl_delay))
        return floor
