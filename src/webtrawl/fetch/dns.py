"""Name resolution for the fetcher: one TTL cache shared by all fetches, `--resolve` pins, and the guard
that keeps a crawl out of private networks.

aiohttp asks `Resolver.resolve` for the addresses of every new connection and connects to exactly what it
returns, so the guard judges the addresses actually used: there is no second lookup a name could answer
differently (DNS rebinding). Hosts written as IP literals never reach a resolver; the fetcher asks
`AddressGuard.check_host` about those itself.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

from ..request_options import IPNetwork, Pin

logger = logging.getLogger(__name__)

DEFAULT_TTL = 300.0
"""Seconds a lookup is reused: getaddrinfo does not tell a record's TTL, so one fixed value stands in."""
NEGATIVE_TTL = 60.0
"""Seconds a name that does not exist is remembered as such (never longer than the TTL)."""
MAX_NAMES = 100_000
"""Names the cache holds; the least recently used go first."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Lookup = Callable[[str, int], Awaitable[list[tuple[Any, ...]]]]
"""(name, family) → getaddrinfo-style tuples; `loop.getaddrinfo` by default."""

_LINK_LOCAL_V4 = ipaddress.IPv4Network("169.254.0.0/16")
_LINK_LOCAL_V6 = ipaddress.IPv6Network("fe80::/10")
_LINK_LOCAL = (_LINK_LOCAL_V4, _LINK_LOCAL_V6)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NOT_FOUND = {getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA", "EAI_ADDRFAMILY") if hasattr(socket, name)}
_NUMERIC = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
_ADDRCONFIG = getattr(socket, "AI_ADDRCONFIG", 0)
_MAX_VERDICTS = 10_000


class ResolveError(OSError):
    """A name could not be resolved, or all its addresses are refused by the guard.

    An OSError, so aiohttp hands it on inside its ClientConnectorDNSError; `reason` is what the URL's
    record says ("dns: name not found", "blocked: private address 10.1.2.3").
    """

    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


def gai_reason(exc: socket.gaierror) -> tuple[str, bool]:
    """A short reason for a failed getaddrinfo, and whether asking again later may succeed."""
    code = exc.errno
    if code in _NOT_FOUND:
        return "dns: name not found", False
    if code == socket.EAI_AGAIN:
        return "dns: temporary failure", True
    if code == socket.EAI_FAIL:
        return "dns: server failure", False
    return f"dns: {exc.strerror or exc}", True


class AddressGuard:
    """Which addresses a crawl may connect to: public ones, and the private ones it was told about.

    Blocked: every address that is not globally routable (loopback, RFC 1918, CGNAT, ULA, link-local,
    unspecified, reserved, documentation ranges) and multicast, also when embedded in an IPv6 address
    (IPv4-mapped, 6to4, NAT64). Allowed anyway: addresses given with `allow` (the seeds', the proxy's)
    and addresses inside `networks`; link-local ones (169.254.169.254 serves cloud credentials) only
    through a network that is itself link-local, never through a wide one such as 0.0.0.0/0.
    """

    def __init__(self, networks: Iterable[IPNetwork] = ()) -> None:
        self._networks = tuple(networks)
        self._allowed: set[IPAddress] = set()
        self._verdicts: dict[str, str | None] = {}

    def allow(self, address: str) -> None:
        """Let `address` through whatever it is (the user named it)."""
        self._allowed.add(ipaddress.ip_address(address))
        self._verdicts.clear()

    def check(self, address: str) -> str | None:
        """None if `address` may be connected to, else why not. Raises ValueError if it is not an IP address."""
        verdict = self._verdicts.get(address, "?")
        if verdict != "?":
            return verdict
        verdict = self._judge(ipaddress.ip_address(address), address)
        if len(self._verdicts) >= _MAX_VERDICTS:
            self._verdicts.clear()
        self._verdicts[address] = verdict
        return verdict

    def check_host(self, host: str) -> str | None:
        """Like `check` for a URL's host, which is None when the host is a name (the resolver judges those)."""
        if not host or not (host[-1].isdigit() or ":" in host):
            return None  # a name: no top-level domain ends in a digit
        try:
            return self.check(host)
        except ValueError:
            return None

    def _judge(self, ip: IPAddress, text: str) -> str | None:
        if ip in self._allowed:
            return None
        inner = _embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
        candidates = (ip,) if inner is None else (ip, inner)
        if all(c.is_global and not c.is_multicast for c in candidates):
            return None
        for net in self._networks:
            for c in candidates:
                if c in net and (not _is_link_local(c) or _within_link_local(net)):
                    return None
        return f"blocked: private address {text}"


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _is_link_local(ip: IPAddress) -> bool:
    return any(ip in ll for ll in _LINK_LOCAL if ll.version == ip.version)


def _within_link_local(net: IPNetwork) -> bool:
    """Whether `net` lies inside the link-local range of its IP version (`subnet_of` compares like with like)."""
    if isinstance(net, ipaddress.IPv4Network):
        return net.subnet_of(_LINK_LOCAL_V4)
    return net.subnet_of(_LINK_LOCAL_V6)


class Resolver(AbstractResolver):
    """aiohttp's resolver for a crawl: cached lookups, pinned names, and the guard on what comes back.

    A name is looked up once per TTL however many fetches need it (concurrent askers share one lookup);
    a name that does not exist is remembered for a minute; a temporary failure is not remembered.
    Pinned names skip both the lookup and the guard: the user chose their addresses.
    """

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_TTL,
        pins: Iterable[Pin] = (),
        guard: AddressGuard | None = None,
        max_names: int = MAX_NAMES,
        clock: Callable[[], float] = time.monotonic,
        lookup: Lookup | None = None,
    ) -> None:
        self._ttl = ttl
        self._negative_ttl = min(ttl, NEGATIVE_TTL)
        pins = list(pins)
        self._pins = {(pin.host, pin.port): pin.addresses for pin in pins if not pin.host.startswith("*.")}
        self._wildcards = [(pin.host[1:], pin.port, pin.addresses) for pin in pins if pin.host.startswith("*.")]
        self.guard = guard
        self._max_names = max_names
        self._clock = clock
        self._lookup = lookup
        # (name, family) → (expiry, addresses), or (expiry, reason) for a name that does not resolve
        self._cache: OrderedDict[tuple[str, int], tuple[float, tuple[tuple[int, str], ...] | str]] = OrderedDict()
        self._pending: dict[tuple[str, int], asyncio.Task[tuple[tuple[int, str], ...]]] = {}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        name = host.lower()
        if self._pins or self._wildcards:
            pinned = self._pinned(name, port)
            if pinned is not None:
                return [_result(host, port, address) for address in pinned]
        addresses = await self.lookup(name, family)
        guard = self.guard
        if guard is None:
            return [_result(host, port, address) for _family, address in addresses]
        results = [_result(host, port, address) for _family, address in addresses if guard.check(address) is None]
        if not results:
            raise ResolveError(guard.check(addresses[0][1]) or "blocked", retryable=False)
        return results

    async def lookup(self, name: str, family: int = socket.AF_UNSPEC) -> tuple[tuple[int, str], ...]:
        """The (family, address) pairs of `name`, from the cache when fresh; not judged by the guard."""
        key = (name, family)
        entry = self._cache.get(key)
        if entry is not None:
            expires, value = entry
            if expires > self._clock():
                self._cache.move_to_end(key)
                if isinstance(value, str):
                    raise ResolveError(value, retryable=False)
                return value
            del self._cache[key]
        task = self._pending.get(key)
        if task is None:
            task = asyncio.ensure_future(self._query(name, family))
            self._pending[key] = task
            task.add_done_callback(functools.partial(self._done, key))
        # Shielded: a fetch that is cancelled must not cancel the lookup others are waiting for.
        return await asyncio.shield(task)

    async def allow_hosts(self, hosts: Iterable[str]) -> None:
        """Let the guard through to the current addresses of `hosts` (the seeds', the proxy's).

        A host that cannot be resolved now is skipped; its fetches will fail with the reason.
        """
        guard = self.guard
        if guard is None:
            return
        names = []
        pinned = {host for host, _port in self._pins}
        for host in dict.fromkeys(h.lower().strip("[]") for h in hosts):
            if not host or host in pinned:
                continue
            try:
                guard.allow(host)
            except ValueError:
                names.append(host)
        found = await asyncio.gather(*(self.lookup(name) for name in names), return_exceptions=True)
        for name, addresses in zip(names, found, strict=True):
            if isinstance(addresses, BaseException):
                logger.info("cannot resolve %s to allow its addresses: %s", name, addresses)
                continue
            for _family, address in addresses:
                guard.allow(address)

    def _pinned(self, name: str, port: int | None) -> tuple[str, ...] | None:
        pinned = self._pins.get((name, port)) or self._pins.get((name, None))
        if pinned is None:
            for suffix, pin_port, addresses in self._wildcards:
                if name.endswith(suffix) and pin_port in (None, port):
                    return addresses
        return pinned

    def cached(self, host: str) -> str | None:
        """An address `host` is known to have now (pinned, a literal, or a fresh answer), without a lookup."""
        name = host.lower().strip("[]")
        for (pinned, _port), addresses in self._pins.items():
            if pinned == name:
                return addresses[0]
        for suffix, _port, addresses in self._wildcards:
            if name.endswith(suffix):
                return addresses[0]
        try:
            return str(ipaddress.ip_address(name))
        except ValueError:
            pass
        for family in (socket.AF_UNSPEC, socket.AF_INET, socket.AF_INET6):
            entry = self._cache.get((name, family))
            if entry is not None and entry[0] > self._clock() and not isinstance(entry[1], str):
                return entry[1][0][1]
        return None

    def _done(self, key: tuple[str, int], task: asyncio.Task[Any]) -> None:
        self._pending.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved here: every asker may have been cancelled meanwhile

    async def close(self) -> None:
        """Cancel lookups in flight (aiohttp does not close a resolver it was given: the fetcher does)."""
        tasks = list(self._pending.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _query(self, name: str, family: int) -> tuple[tuple[int, str], ...]:
        try:
            if self._lookup is not None:
                infos = await self._lookup(name, family)
            else:
                infos = await asyncio.get_running_loop().getaddrinfo(
                    name, 0, family=family, type=socket.SOCK_STREAM, flags=_ADDRCONFIG
                )
        except socket.gaierror as exc:
            reason, retryable = gai_reason(exc)
            if not retryable:
                self._store((name, family), self._negative_ttl, reason)
            raise ResolveError(reason, retryable=retryable) from None
        except (UnicodeError, ValueError):  # a name the IDNA codec refuses ("a..b", a 64-byte label)
            self._store((name, family), self._negative_ttl, "dns: invalid name")
            raise ResolveError("dns: invalid name", retryable=False) from None
        addresses = tuple(dict.fromkeys((int(info[0]), str(info[4][0])) for info in infos))
        if not addresses:
            raise ResolveError("dns: name not found", retryable=False)
        self._store((name, family), self._ttl, addresses)
        return addresses

    def _store(self, key: tuple[str, int], ttl: float, value: tuple[tuple[int, str], ...] | str) -> None:
        cache = self._cache
        cache[key] = (self._clock() + ttl, value)
        cache.move_to_end(key)
        while len(cache) > self._max_names:
            cache.popitem(last=False)

    def __len__(self) -> int:
        return len(self._cache)


def _result(host: str, port: int, address: str) -> ResolveResult:
    return {
        "hostname": host,
        "host": address,
        "port": port,
        "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
        "proto": 0,
        "flags": _NUMERIC,
    }
