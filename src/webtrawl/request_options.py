"""The text forms of request options a user writes (`--header`, `--auth`, `--proxy`, `--resolve`,
`--allow-private`, `--dns-ttl`), read and checked.

Checked when the settings are built (`config.FetchConfig`), so a mistake is one line before the crawl
starts, and read again by the fetcher that sends them.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import ConfigError

MIN_TTL, MAX_TTL = 60.0, 3600.0
"""The range a configured DNS TTL must fall in: shorter floods the resolver, longer misses moved sites."""

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def parse_header(text: str) -> tuple[str, str]:
    """`Name: value` → (name, value); the name must be an HTTP token, the value one line."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not _TOKEN.fullmatch(name) or any(c in value for c in "\r\n\0"):
        raise ConfigError(f"bad header {text!r}: expected 'Name: value'")
    return name, value


def parse_auth(text: str) -> tuple[str, str, str]:
    """`HOST[:PORT]:USER:PASS` → (host key, user, password); the password may hold ':'.

    The host key is written as URLs show it: a default port (80, 443) is dropped, IPv6 stays in brackets.
    A number right after the host is read as a port when a user and a password still follow.
    """
    error = ConfigError(f"bad auth for {text.partition(':')[0]!r}: expected HOST[:PORT]:USER:PASS")
    if text.startswith("["):
        end = text.find("]") + 1
        host, rest = text[:end], text[end:]
        if not end or not rest.startswith(":"):
            raise error
        rest = rest[1:]
    else:
        host, _, rest = text.partition(":")
    port, sep, tail = rest.partition(":")
    if sep and port.isdigit() and ":" in tail:
        if port not in ("80", "443"):
            host = f"{host}:{port}"
        rest = tail
    user, sep, password = rest.partition(":")
    if not host or not sep or not user:
        raise error
    return host.lower(), user, password


def check_proxy(url: str) -> None:
    """A proxy address webtrawl can use (http or https, with a host), else `ConfigError`."""
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(f"bad proxy {url!r}: expected a URL like http://HOST:PORT")


@dataclass(frozen=True, slots=True)
class Pin:
    """`--resolve HOST[:PORT]:ADDR[,ADDR…]`: connections to HOST (on PORT, or any port) go to ADDR.

    HOST may be `*.example.test`: every name under that domain (a test resolver for many host names).
    """

    host: str
    port: int | None
    addresses: tuple[str, ...]


def parse_pin(text: str) -> Pin:
    """Read a `--resolve` value the way curl does; ADDR may be IPv6, bare or in brackets."""
    host, sep, rest = text.strip().partition(":")
    error = ConfigError(f"bad resolve entry {text!r}: expected HOST:ADDR or HOST:PORT:ADDR (ADDR an IP address)")
    if not sep or not host or not rest or any(c.isspace() for c in host):
        raise error
    head, sep, tail = rest.partition(":")
    if sep and head.isdigit():
        try:
            port = int(head)
            if not 0 < port < 65536:
                raise ConfigError(f"bad resolve entry {text!r}: port {port} is out of range")
            return Pin(host.lower(), port, _addresses(tail))
        except ValueError:
            pass  # "a.test:1::2": no port, an IPv6 address
    try:
        return Pin(host.lower(), None, _addresses(rest))
    except ValueError:
        raise error from None


def _addresses(text: str) -> tuple[str, ...]:
    return tuple(str(ipaddress.ip_address(part.strip().strip("[]"))) for part in text.split(","))


def parse_network(text: str) -> IPNetwork:
    """Read an `--allow-private` value: a CIDR block or a single address."""
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise ConfigError(f"bad allow-private network {text!r}: expected a CIDR block like 10.0.0.0/8") from None
