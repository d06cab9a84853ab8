"""The text forms of request options a user writes (`--header`, `--auth`, `--proxy`), read and checked.

Checked when the settings are built (`config.FetchConfig`), so a mistake is one line before the crawl
starts, and read again by the fetcher that sends them.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from .errors import ConfigError

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
