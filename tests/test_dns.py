"""The resolver: its cache (hits, TTL, LRU bound, shared lookups), pins, and the reasons failures get.

Lookups go to the system resolver (getaddrinfo) through a counter, so a test can see which answers
came from the cache; a temporary failure, which no local name produces on demand, is raised by hand.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from webtrawl.config import FetchConfig
from webtrawl.errors import ConfigError
from webtrawl.fetch.dns import AddressGuard, ResolveError, Resolver, gai_reason
from webtrawl.request_options import Pin, parse_network, parse_pin


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountingLookup:
    """getaddrinfo, counted per name; names in `fake` answer with that address instead."""

    def __init__(self, fake: dict[str, str] | None = None, error: socket.gaierror | None = None) -> None:
        self.calls: list[str] = []
        self.fake = fake or {}
        self.error = error
        self.delay = 0.0

    async def __call__(self, name: str, family: int) -> list[tuple[Any, ...]]:
        self.calls.append(name)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        if name in self.fake:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (self.fake[name], 0))]
        loop = asyncio.get_running_loop()
        return await loop.getaddrinfo(name, 0, family=family, type=socket.SOCK_STREAM)


def make(lookup: CountingLookup, **kwargs: Any) -> tuple[Resolver, Clock]:
    clock = Clock()
    return Resolver(clock=clock, lookup=lookup, **kwargs), clock


def hosts(results: list[Any]) -> list[str]:
    return [r["host"] for r in results]


async def test_cache_hit_and_miss() -> None:
    lookup = CountingLookup()
    resolver, _clock = make(lookup)
    first = await resolver.resolve("localhost", 80)
    second = await resolver.resolve("LOCALHOST", 443)
    assert "127.0.0.1" in hosts(first)
    assert hosts(first) == hosts(second)
    assert [r["port"] for r in second] == [443] * len(second)
    assert all(r["hostname"] == "LOCALHOST" for r in second)
    assert lookup.calls == ["localhost"]


async def test_ttl_expiry() -> None:
    lookup = CountingLookup(fake={"a.example": "192.0.2.1"})
    resolver, clock = make(lookup, ttl=300)
    await resolver.resolve("a.example", 80)
    clock.now += 299
    await resolver.resolve("a.example", 80)
    assert lookup.calls == ["a.example"]
    clock.now += 2
    lookup.fake["a.example"] = "192.0.2.2"
    assert hosts(await resolver.resolve("a.example", 80)) == ["192.0.2.2"]
    assert lookup.calls == ["a.example", "a.example"]


async def test_concurrent_askers_share_one_lookup() -> None:
    lookup = CountingLookup(fake={"a.example": "192.0.2.1"})
    lookup.delay = 0.05
    resolver, _clock = make(lookup)
    results = await asyncio.gather(*(resolver.resolve("a.example", 80) for _ in range(20)))
    assert all(hosts(r) == ["192.0.2.1"] for r in results)
    assert lookup.calls == ["a.example"]


async def test_a_cancelled_asker_does_not_cancel_the_lookup() -> None:
    lookup = CountingLookup(fake={"a.example": "192.0.2.1"})
    lookup.delay = 0.05
    resolver, _clock = make(lookup)
    first = asyncio.create_task(resolver.resolve("a.example", 80))
    second = asyncio.create_task(resolver.resolve("a.example", 80))
    await asyncio.sleep(0.01)
    first.cancel()
    assert hosts(await second) == ["192.0.2.1"]
    assert first.cancelled()


async def test_lru_bound() -> None:
    names = {f"n{i}.example": f"192.0.2.{i}" for i in range(5)}
    lookup = CountingLookup(fake=names)
    resolver, _clock = make(lookup, max_names=3)
    for name in ["n0.example", "n1.example", "n2.example"]:
        await resolver.resolve(name, 80)
    await resolver.resolve("n0.example", 80)  # n0 is now the most recently used
    await resolver.resolve("n3.example", 80)  # evicts n1, the least recently used
    assert len(resolver) == 3
    lookup.calls.clear()
    for name in ["n0.example", "n2.example", "n3.example", "n1.example"]:
        await resolver.resolve(name, 80)
    assert lookup.calls == ["n1.example"]


async def test_name_not_found_is_final_and_remembered() -> None:
    lookup = CountingLookup()
    resolver, clock = make(lookup)
    for _ in range(2):
        with pytest.raises(ResolveError) as caught:
            await resolver.resolve("no-such-host.invalid", 80)
        assert (caught.value.reason, caught.value.retryable) == ("dns: name not found", False)
    assert lookup.calls == ["no-such-host.invalid"]
    clock.now += 61  # remembered for a minute only
    with pytest.raises(ResolveError):
        await resolver.resolve("no-such-host.invalid", 80)
    assert len(lookup.calls) == 2


async def test_temporary_failure_is_retryable_and_not_remembered() -> None:
    lookup = CountingLookup(error=socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"))
    resolver, _clock = make(lookup)
    for _ in range(2):
        with pytest.raises(ResolveError) as caught:
            await resolver.resolve("flaky.example", 80)
        assert (caught.value.reason, caught.value.retryable) == ("dns: temporary failure", True)
    assert len(lookup.calls) == 2


async def test_invalid_name() -> None:
    resolver = Resolver()  # the real lookup path: the IDNA codec refuses an empty label
    with pytest.raises(ResolveError, match="dns: invalid name"):
        await resolver.resolve("a..b", 80)


async def test_pins_skip_lookup_and_guard() -> None:
    lookup = CountingLookup()
    pins = [parse_pin("a.test:127.0.0.2"), parse_pin("B.test:8080:127.0.0.3,[::1]")]
    resolver, _clock = make(lookup, pins=pins, guard=AddressGuard())
    assert hosts(await resolver.resolve("a.test", 80)) == ["127.0.0.2"]
    assert hosts(await resolver.resolve("A.TEST", 443)) == ["127.0.0.2"]
    results = await resolver.resolve("b.test", 8080)
    assert hosts(results) == ["127.0.0.3", "::1"]
    assert [r["family"] for r in results] == [socket.AF_INET, socket.AF_INET6]
    assert lookup.calls == []
    with pytest.raises(ResolveError, match="dns: name not found"):  # pinned for port 8080 only
        await resolver.resolve("b.test", 80)


async def test_guard_filters_what_a_name_resolves_to() -> None:
    lookup = CountingLookup(fake={"inside.example": "10.1.2.3", "outside.example": "192.0.2.10"})
    resolver, _clock = make(lookup, guard=AddressGuard())
    with pytest.raises(ResolveError) as caught:
        await resolver.resolve("inside.example", 80)
    assert (caught.value.reason, caught.value.retryable) == ("blocked: private address 10.1.2.3", False)
    # 192.0.2.0/24 is a documentation range: not global either
    with pytest.raises(ResolveError, match=r"blocked: private address 192\.0\.2\.10"):
        await resolver.resolve("outside.example", 80)
    # mixed answers keep only the allowed addresses
    resolver, _clock = make(CountingLookup(), guard=AddressGuard())
    resolver.guard.allow("127.0.0.1")  # type: ignore[union-attr]
    assert hosts(await resolver.resolve("localhost", 80)) == ["127.0.0.1"]


@pytest.mark.parametrize(
    ("text", "pin"),
    [
        ("a.test:127.0.0.2", Pin("a.test", None, ("127.0.0.2",))),
        ("A.Test:8080:127.0.0.2", Pin("a.test", 8080, ("127.0.0.2",))),
        ("a.test:::1", Pin("a.test", None, ("::1",))),
        ("a.test:[::1]", Pin("a.test", None, ("::1",))),
        ("a.test:443:[::1]", Pin("a.test", 443, ("::1",))),
        ("a.test:80:::1", Pin("a.test", 80, ("::1",))),
        ("a.test:1::2", Pin("a.test", None, ("1::2",))),
        ("a.test:80:127.0.0.2, 127.0.0.3", Pin("a.test", 80, ("127.0.0.2", "127.0.0.3"))),
    ],
)
def test_parse_pin(text: str, pin: Pin) -> None:
    assert parse_pin(text) == pin


@pytest.mark.parametrize(
    "text", ["nocolon", ":127.0.0.1", "a.test:", "a.test:80:", "a.test:example.org", "a b:1.2.3.4", "a.test:99999:::1"]
)
def test_parse_pin_errors(text: str) -> None:
    with pytest.raises(ConfigError, match="resolve entry"):
        parse_pin(text)


def test_parse_network() -> None:
    assert str(parse_network("10.0.0.0/8")) == "10.0.0.0/8"
    assert str(parse_network("10.1.2.3")) == "10.1.2.3/32"
    assert str(parse_network("10.1.2.3/8")) == "10.0.0.0/8"
    for bad in ["999.1.1.1/99", "10.0.0.0/33", "fe80::/129", "ten"]:
        with pytest.raises(ConfigError, match="bad allow-private network"):
            parse_network(bad)


@pytest.mark.parametrize(
    ("code", "reason", "retryable"),
    [
        (socket.EAI_NONAME, "dns: name not found", False),
        (socket.EAI_AGAIN, "dns: temporary failure", True),
        (socket.EAI_FAIL, "dns: server failure", False),
        (socket.EAI_MEMORY, "dns: Memory allocation failure", True),
    ],
)
def test_gai_reason(code: int, reason: str, retryable: bool) -> None:
    message = {socket.EAI_MEMORY: "Memory allocation failure"}.get(code, "whatever")
    assert gai_reason(socket.gaierror(code, message)) == (reason, retryable)


@pytest.mark.parametrize("ttl", [59, 3601, 0])
def test_dns_ttl_must_be_sane(ttl: float) -> None:
    with pytest.raises(ConfigError, match="dns-ttl"):
        FetchConfig(dns_ttl=ttl)


async def test_wildcard_pin_covers_every_name_under_a_domain() -> None:
    from webtrawl.fetch.dns import Resolver
    from webtrawl.request_options import parse_pin

    resolver = Resolver(pins=[parse_pin("*.many.test:127.0.0.9")])
    for name in ("a.many.test", "x.y.many.test"):
        [result] = await resolver.resolve(name, 80)
        assert result["host"] == "127.0.0.9"
        assert resolver.cached(name) == "127.0.0.9"
    assert resolver.cached("many.test.org") is None
    await resolver.close()
