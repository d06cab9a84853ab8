"""URL normalization, fingerprints and keys: pure functions on strings, fast enough for every link.

Parsing and resolving follow the WHATWG URL standard (through ada), so a link means here what it means
in a browser: tabs and newlines inside it are removed, leading and trailing spaces and control characters
are stripped, backslashes count as slashes, hosts are lowercased and IDNA-encoded, numeric IPv4 forms
(`0x7f.1`) are canonicalized, default ports dropped and dot segments resolved. On top of that,
`normalize` drops the fragment, an empty query (`?` alone), trailing dots of the host name and session
ids (see `SESSION_PARAMS`): a site that puts a fresh session id into every link would otherwise look like
an endless supply of new URLs. The hex digits of percent escapes are upper-cased (`%7e` is `%7E`, as RFC
3986 §6.2.2.1 says they are equivalent).

Deliberately *not* done, because servers may tell these apart: decoding percent escapes (`/%7E` and `/~`
stay different), reordering or removing other query parameters, removing a trailing
slash (`/a` and `/a/` stay different), removing userinfo (`http://user:pw@host/` is kept as given, so it
is stored and sent as given).

Every function except `normalize` and `surt` takes an already normalized URL and works by slicing the
string, which is only correct for `normalize`'s output: the authority of a normalized URL ends at its
first `/`, and `@`, `/`, `?` and `#` appear in it only as delimiters.
"""

from __future__ import annotations

import functools
import logging
import re

from ada_url import URL, join_url, normalize_url
from xxhash import xxh3_64_intdigest

from .errors import ConfigError, InvalidURL

NORMALIZATION_CHANGES = {2: "session ids are removed", 3: "percent escapes are upper-cased"}
"""What each version of `normalize` changed."""
NORMALIZATION_VERSION: int = max(NORMALIZATION_CHANGES)
"""Bumped whenever `normalize` can return a different string for some input: part of a crawl's identity."""

SESSION_PARAMS = frozenset(["sid", "sessionid", "session_id", "phpsessid", "jsessionid", "cfid", "cftoken"])
"""Query parameter names (compared lower-cased) that carry a session id; `aspsessionid…` too, whatever
follows the prefix (ASP appends random letters), and the `;jsessionid=…` path parameter. `s` is not one:
too many sites use it for a search."""

_JSESSIONID = re.compile(r";jsessionid=[^/;?]*", re.IGNORECASE)
_LOWER_ESCAPE = re.compile(r"%(?:[0-9A-Fa-f][a-f]|[a-f][0-9A-F])")
"""A percent escape with a lower-case hex digit (the parser keeps them as written)."""
_DIGITS = re.compile(r"[0-9]+")

_SIGN_BIT = 1 << 63

log = logging.getLogger(__name__)


_BARE_HOST = re.compile(r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?(?:[/?#]|$)")
"""A seed typed without its scheme: a host (a name, an IPv4 or a bracketed IPv6 address), perhaps a port
and a path."""


def normalize_seeds(seeds: tuple[str, ...]) -> list[str]:
    """The seeds normalized, each once, in their order; a bad one is the user's mistake (`ConfigError`).

    A seed typed without its scheme (`127.0.0.1:8711`, `example.org/docs`) is taken as `http://`, as wget
    and curl take it, with a note (a site that wants https redirects there)."""
    normalized = []
    for seed in seeds:
        if "://" not in seed and _BARE_HOST.match(seed):
            log.warning("taking seed %s as http://%s (a URL without its scheme, as wget and curl read it)", seed, seed)
            seed = f"http://{seed}"
        try:
            normalized.append(normalize(seed))
        except InvalidURL as exc:
            typo = "://" not in seed and str(exc) == "malformed URL"
            hint = f" (a seed URL starts with its scheme: https://{seed.lstrip('/')})" if typo else ""
            raise ConfigError(f"bad seed URL {seed!r}: {exc}{hint}") from None
    return list(dict.fromkeys(normalized))


def normalize(url: str, base: str | None = None) -> str:
    """The canonical absolute form of `url` (resolved against `base` as a browser would).

    Raises `InvalidURL` for anything that is not an http(s) URL: "malformed URL" when it cannot be parsed
    (or resolved), "unsupported scheme 'mailto'" and the like for other schemes. The result is stable:
    `normalize(normalize(x)) == normalize(x)`.
    """
    try:
        href = normalize_url(url) if base is None else join_url(base, url)
    except ValueError:
        raise InvalidURL("malformed URL") from None
    if not href.startswith(("http://", "https://")):
        raise InvalidURL(f"unsupported scheme {href.partition(':')[0]!r}")
    # The first '#' ends the URL proper: before the fragment, '#' is always percent-encoded.
    if "#" in href:
        href = href[: href.index("#")]
    # Likewise the first '?' starts the query; a lone one at the end is an empty query.
    if href[-1] == "?" and href.index("?") == len(href) - 1:
        href = href[:-1]
    if "%" in href:
        href = _LOWER_ESCAPE.sub(_upper, href)
    if ";" in href:
        href = _strip_jsessionid(href)
    query_at = href.find("?")
    if query_at >= 0:
        # Every session name contains "sid", "sess" or "cf": most queries pass these three searches.
        lower = href[query_at:].lower()
        if "sid" in lower or "sess" in lower or "cf" in lower:
            href = _strip_session_params(href, query_at)
    # The host ends before the path's first '/' (searching from index 8 skips "http://" and "https://",
    # as a host has at least one character). ".:" anywhere hints at "host.:port"; the slow path checks.
    if href[href.find("/", 8) - 1] == "." or ".:" in href:
        href = _strip_host_dots(href)
    return href


def _upper(escape: re.Match[str]) -> str:
    return escape[0].upper()


def _strip_jsessionid(href: str) -> str:
    """`href` without `;jsessionid=…` path parameters (Java servlets put the session id there)."""
    query_at = href.find("?")
    path_end = query_at if query_at >= 0 else len(href)
    stripped = _JSESSIONID.sub("", href[:path_end])
    if len(stripped) == path_end:
        return href
    # Removing a path parameter can leave dot segments (`/a/..;jsessionid=1/b`): parse again.
    try:
        return normalize_url(stripped + href[path_end:])
    except ValueError:
        raise InvalidURL("malformed URL") from None


def _strip_session_params(href: str, query_at: int) -> str:
    """`href` without session-id query parameters; the others keep their order and spelling.

    A query left empty goes, as `?` alone does.
    """
    params = href[query_at + 1 :].split("&")
    kept = [param for param in params if not _is_session_param(param)]
    if len(kept) == len(params):
        return href
    query = "&".join(kept)
    return href[: query_at + 1] + query if query else href[:query_at]


def _is_session_param(param: str) -> bool:
    name = param.partition("=")[0].lower()
    return name in SESSION_PARAMS or name.startswith("aspsessionid")


def _strip_host_dots(href: str) -> str:
    """`href` with trailing dots removed from its host name (`example.com.` names `example.com`).

    Setting the host through the parser, not by editing the string, keeps the result canonical:
    `0x7f.1.` must become `127.0.0.1`, as `0x7f.1` would.
    """
    parsed = URL(href)
    hostname = parsed.hostname
    stripped = hostname.rstrip(".")
    if stripped == hostname:  # the hint came from the userinfo or the path
        return href
    if not stripped:
        raise InvalidURL("malformed URL")
    try:
        parsed.hostname = stripped
    except ValueError:
        raise InvalidURL("malformed URL") from None
    return parsed.href


def fingerprint(url: str) -> int:
    """A stable signed 64-bit hash of a normalized URL (fits an SQLite INTEGER); the key for dedup."""
    return (xxh3_64_intdigest(url.encode()) ^ _SIGN_BIT) - _SIGN_BIT


def host_key(url: str) -> str:
    """`host` or `host:port` (port only when not the default) of a normalized URL, without userinfo.

    Politeness, scope and partitions are decided per host key.
    """
    end = url.find("/", 8)  # as in `normalize`: the first '/' from index 8 on starts the path
    if end < 0:
        end = len(url)
    host = url[8 if url[4] == "s" else 7 : end]
    return host[host.rindex("@") + 1 :] if "@" in host else host


def origin(url: str) -> str:
    """`scheme://host[:port]` of a normalized URL: where its robots.txt lives."""
    return url[: url.find("://") + 3] + host_key(url)


@functools.lru_cache(maxsize=4096)
def identity(url: str) -> tuple[int, str]:
    """`fingerprint(url)` and `origin(url)` of a link, remembered for the last 4,096 URLs: the links every
    page of a site repeats (navigation, footers) are hashed and sliced once, not on every page (0.1 µs a
    link instead of 0.8)."""
    return fingerprint(url), origin(url)


def template(url: str) -> str:
    """The shape of a normalized URL: its origin, its path with every run of digits as `#`, and its query's
    parameter names (sorted, each once, digits collapsed too) without their values.

    `http://h/cal/2026/01/?view=month&d=3` and `http://h/cal/2031/12/?d=9&view=week` share the template
    `http://h/cal/#/#/?d&view`: an endless calendar, or any other page generator, shows up as one template
    with ever more URLs. The origin is kept as it is (127.0.0.1 and 127.0.0.2 are two hosts).
    """
    start = url.find("/", 8)  # as in `normalize`: the path starts at the first '/' from index 8 on
    if start < 0:
        return url
    query_at = url.find("?", start)
    if query_at < 0:
        return url[:start] + _DIGITS.sub("#", url[start:])
    names = sorted({param.partition("=")[0] for param in url[query_at + 1 :].split("&") if param})
    return url[:start] + _DIGITS.sub("#", f"{url[start:query_at]}?{'&'.join(names)}")


def partition_of(host: str, partitions: int) -> int:
    """The partition (0 … partitions-1) a host key belongs to; stable across processes and machines.

    Any string can be partitioned this way; with `--partition-by url` the caller passes whole URLs.
    """
    return xxh3_64_intdigest(host.encode()) % partitions


def surt(url: str) -> str:
    """The SURT key CDXJ indexes sort by: `http://www.Example.com/A/?b=2&a=1` → `com,example)/a?a=1&b=2`.

    Follows the `surt` package's defaults (host reversed with commas, leading `www`/`www<digits>` label
    dropped, userinfo dropped, path and query lowercased, trailing slash removed, query arguments sorted)
    except that percent escapes are kept as `normalize` leaves them and only the session ids `normalize`
    knows (`SESSION_PARAMS`) are removed.
    """
    url = normalize(url)
    start = url.find("://") + 3
    slash = url.find("/", start)
    host = host_key(url)
    if host.startswith("["):  # IPv6: no labels to reverse
        bracket = host.index("]") + 1
        host, port = host[:bracket], host[bracket:]
    else:
        host, colon, port = host.partition(":")
        port = colon + port
        host = ",".join(reversed(_drop_www(host).split(".")))
    path, _, query = url[slash:].lower().partition("?")
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    key = f"{host}{port}){path}"
    if query:
        pairs = sorted(tuple(arg.split("=", 1)) for arg in query.split("&"))
        key += "?" + "&".join("=".join(pair) for pair in pairs)
    return key


def _drop_www(host: str) -> str:
    """`host` without a leading `www.` or `www<digits>.` label (`www2.example.com` → `example.com`)."""
    if not host.startswith("www"):
        return host
    end = 3
    while end < len(host) and host[end].isdigit():
        end += 1
    if host[end : end + 1] == ".":
        return host[end + 1 :]
    return host
