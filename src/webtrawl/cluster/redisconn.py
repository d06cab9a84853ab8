"""The one way to reach a distributed crawl's Redis: the right client for a server or a Cluster, checked before use.

A crawl kept in Redis depends on two server settings: an evicting `maxmemory-policy` silently drops URLs (so it
is refused), and a server that keeps nothing on disk forgets the whole crawl when it restarts (so it is warned
about). Redis errors are turned into ours here, so callers never see a redis-py exception from connecting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeAlias, TypeVar
from urllib.parse import urlsplit

import redis
import redis.cluster
from redis.asyncio import Redis, SSLConnection
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import (
    ClusterDownError,
    OutOfMemoryError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..errors import ConfigError, CrawlGone, RedisUnavailable

Client: TypeAlias = Redis | RedisCluster
_C = TypeVar("_C", Redis, RedisCluster)
T = TypeVar("T")
log = logging.getLogger(__name__)

SCHEMES = ("redis", "rediss")
CONNECT_TIMEOUT = 3.0
# Longer than any blocking read the distributed mode issues, so a quiet connection is not taken for a dead one.
SOCKET_TIMEOUT = 10.0
# Backoff caps of 0.1 + 0.2 + 0.4 + 0.8 s ride out a blip or a failover yet give up within seconds; the jitter
# keeps many nodes that lost Redis at once from reconnecting in lockstep.
RETRIES = 4
SETTINGS = ("maxmemory-policy", "appendonly", "save")


async def connect(url: str, *, wait: bool = False) -> Client:
    """A client for the Redis (standalone or Cluster) at `url`, after one round trip proved it answers.

    Raises ConfigError for a URL that is not redis:// or rediss://, RedisUnavailable when the server cannot be
    reached or refuses the first command; with `wait`, a server that cannot be reached is waited for instead
    (`joining`).
    """
    scheme = urlsplit(url).scheme
    if scheme not in SCHEMES:
        raise ConfigError(f"Redis URL {redact(url)!r} must start with redis:// or rediss:// (got {scheme or 'none'!r})")
    try:
        return await joining("connecting", lambda: _connect(url), wait=wait)
    except RedisError as exc:
        raise _unavailable(url, exc) from exc


async def _connect(url: str) -> Client:
    client = _build(Redis, url)
    try:
        clustered = (await client.info("cluster")).get("cluster_enabled") == 1
    except RedisError:
        await client.aclose()
        raise
    if not clustered:
        return client
    await client.aclose()
    cluster = _build(RedisCluster, url)
    try:
        await cluster.initialize()
    except RedisError:
        await cluster.aclose()
        raise
    return cluster


async def check_server(client: Client) -> list[str]:
    """Warnings about the server's durability; ConfigError if it may evict keys (on a Cluster: any master).

    Managed services often disable CONFIG; then the settings are unknown and the warning says so.
    """
    nodes: Sequence[Redis | ClusterNode] = client.get_primaries() if isinstance(client, RedisCluster) else [client]
    warnings = []
    for node in nodes:
        where = _address(node)
        try:
            settings = await _settings(client, node)
        except ResponseError as exc:
            warnings.append(f"could not check the settings of Redis at {where} (CONFIG GET refused: {exc}); {_ASK}")
            continue
        except RedisError as exc:
            raise _unavailable(where, exc) from exc
        warning = _judge(where, settings)
        if warning:
            warnings.append(warning)
    return warnings


_ASK = "make sure it runs with maxmemory-policy noeviction and appendonly yes"


def _judge(where: str, settings: dict[str, str]) -> str | None:
    if any(name not in settings for name in SETTINGS):
        missing = ", ".join(name for name in SETTINGS if name not in settings)
        return f"could not check the settings of Redis at {where} (CONFIG GET does not report {missing}); {_ASK}"
    policy = settings["maxmemory-policy"]
    if policy != "noeviction":
        raise ConfigError(
            f"Redis at {where} evicts keys (maxmemory-policy {policy}): a crawl would lose URLs; "
            "set maxmemory-policy noeviction"
        )
    if settings["appendonly"] == "no" and not settings["save"].strip():
        return (
            f"Redis at {where} keeps nothing on disk (appendonly no, no save points): a restart of Redis loses "
            "the crawl; set appendonly yes (appendfsync everysec) to keep it"
        )
    return None


async def _settings(client: Client, node: Redis | ClusterNode) -> dict[str, str]:
    """The settings one server reports, decoded; one name per CONFIG GET, as Redis before 7 takes only one."""
    found: dict[str, str] = {}
    for name in SETTINGS:
        if isinstance(client, RedisCluster):
            reply = await client.config_get(name, target_nodes=node)
        else:
            reply = await client.config_get(name)
        # redis-py types the reply as decoded `str | None`; with decode_responses=False it holds bytes, never None
        found.update({_text(key): _text(value) for key, value in reply.items()})  # type: ignore[arg-type]
    return found


async def open_clients(url: str, *, attached: bool = False) -> tuple[Any, Any]:
    """An asyncio client (`connect`) and a blocking one for threads (the heartbeat's, the node table's reads).

    The server is checked and its warnings logged, unless `attached` (the node a coordinator started, `ownnode`,
    on the Redis it had just checked): then an unreachable Redis is waited for instead (`joining`).
    """
    client = await connect(url, wait=attached)
    if not attached:
        for warning in await check_server(client):
            log.warning("%s", warning)
    kind = redis.cluster.RedisCluster if isinstance(client, RedisCluster) else redis.Redis
    return client, kind.from_url(url, socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=CONNECT_TIMEOUT)


def _build(kind: type[_C], url: str) -> _C:
    options: dict[str, Any] = {
        "decode_responses": False,
        "socket_connect_timeout": CONNECT_TIMEOUT,
        "socket_timeout": SOCKET_TIMEOUT,
        "socket_keepalive": True,
        "retry": Retry(ExponentialWithJitterBackoff(cap=1.0, base=0.05), RETRIES),
    }
    try:
        return kind.from_url(url, **options)
    except (ValueError, RedisClusterException) as exc:
        raise ConfigError(f"Redis URL {redact(url)!r} is not usable: {exc}") from exc


def _address(node: Redis | ClusterNode) -> str:
    """The server's URL for messages, without credentials."""
    host: str | None
    port: str | int | None
    connection_class: type[AbstractConnection]  # a pool's may be any kind; a ClusterNode's is a Connection
    if isinstance(node, ClusterNode):
        host, port, connection_class = node.host, node.port, node.connection_class
    else:
        kwargs = node.connection_pool.connection_kwargs
        host, port, connection_class = kwargs.get("host"), kwargs.get("port"), node.connection_pool.connection_class
    scheme = "rediss" if issubclass(connection_class, SSLConnection) else "redis"
    return f"{scheme}://{host}:{port}"


def _unavailable(url: str, exc: RedisError) -> RedisUnavailable:
    return RedisUnavailable(f"Redis at {redact(url)} cannot be used: {str(exc) or type(exc).__name__}")


def redact(url: str) -> str:
    """`url` with its password masked: messages reach logs and terminals."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username or ''}:***@{host}").geturl()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


UNREACHABLE = (ConnectionError, TimeoutError, RedisConnectionError, RedisTimeoutError, ClusterDownError, TryAgainError)
"""Errors that mean Redis is away for now (down, restarting, loading its AOF, failing over), not a bug."""
FULL = OutOfMemoryError
"""Redis at its `maxmemory` (with `noeviction`, as a crawl requires) refuses writes until it has room again.

Waiting is safe: Redis refuses a script at its first write, so a refused script changed nothing.
"""
MAX_PAUSE = 5.0
GONE_REPLY = "CRAWLGONE "
"""How a partition script refuses a call for a crawl this Redis does not hold, followed by the crawl's name
(`cluster/lua/common.lua`)."""


def crawl_gone(name: str) -> CrawlGone:
    return CrawlGone(
        f"crawl {name!r} is no longer in Redis: Redis lost it (it restarted with nothing on disk, or was "
        "flushed). Run the coordinator's command again: it rebuilds the crawl in Redis from its index"
    )


@contextlib.asynccontextmanager
async def advising_when_gone(client: Client) -> AsyncIterator[None]:
    """A `CrawlGone` raised inside says what would keep the crawl next time, as the server's settings tell:
    enabling AOF is advice only for a server without it (one with it was flushed, or lost its files)."""
    try:
        yield
    except (CrawlGone, BaseExceptionGroup) as exc:
        gone: BaseException = exc
        if isinstance(exc, BaseExceptionGroup):  # the crawl's tasks run in groups: only CrawlGone inside
            matched, other = exc.split(CrawlGone)
            if matched is None or other is not None:
                raise
            gone = matched
            while isinstance(gone, BaseExceptionGroup):
                gone = gone.exceptions[0]
        raise CrawlGone(f"{gone}. {await _durability_advice(client)}") from None


async def _durability_advice(client: Client) -> str:
    nodes: Sequence[Redis | ClusterNode] = client.get_primaries() if isinstance(client, RedisCluster) else [client]
    try:
        kept = [(await _settings(client, node)).get("appendonly") == "yes" for node in nodes]
    except RedisError:
        kept = [False]
    if all(kept):
        return "Redis keeps its data on disk (appendonly yes): it was flushed (FLUSHALL, FLUSHDB) or lost its files"
    return "Run Redis with appendonly yes to keep a crawl across restarts"


async def persist(what: str, call: Callable[[], Awaitable[T]]) -> T:
    """`await call()` until Redis answers: a Redis that restarts pauses the crawl instead of ending it.

    The first failure is logged with what was being done, and the recovery too; the waits grow to `MAX_PAUSE`.
    `call` must do its whole work again on each attempt: for a pipeline, pass `pipelined(...)` in a lambda,
    never a built pipeline's `execute`. A partition that refuses the call because it holds no such crawl is
    `CrawlGone`.
    """
    pause, failing = 0.2, False
    while True:
        try:
            result = await call()
        except (*UNREACHABLE, FULL) as exc:
            if not failing:
                if isinstance(exc, FULL):
                    log.warning(
                        "Redis is full (maxmemory) while %s: the crawl waits until it has room; "
                        "raise its maxmemory or free memory (%s)",
                        what,
                        exc,
                    )
                else:
                    log.warning("Redis unreachable while %s (%s); retrying every few seconds", what, exc)
                failing = True
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE)
            continue
        except ResponseError as exc:  # after the subclasses above, which mean "wait"
            if str(exc).startswith(GONE_REPLY):
                raise crawl_gone(str(exc).removeprefix(GONE_REPLY)) from None
            raise
        if failing:
            log.warning("Redis answers again (%s)", what)
        return result


async def joining(what: str, call: Callable[[], Awaitable[T]], *, wait: bool) -> T:
    """`await call()` for a process's first calls to Redis, as it joins a crawl: once, for a process the user
    started (Redis unreachable then is most often a wrong URL, theirs to fix); with `wait`, until Redis
    answers (`persist`), for the node a coordinator started (`ownnode`) on the Redis it had just used, where
    it can only be an outage, which the coordinator waits out too."""
    return await (persist(what, call) if wait else call())


async def pipelined(client: Client, fill: Callable[[Any], object], *, transaction: bool = False) -> list[Any]:
    """The replies of the commands `fill` queues on a new pipeline.

    redis-py empties a pipeline when `execute` ends, failed or not: a retry of the same pipeline would send
    nothing and return no replies. Building it anew on each call is what makes it safe to `persist`.
    """
    pipe = client.pipeline(transaction=transaction)
    fill(pipe)
    return await pipe.execute()


CANCEL_AGAIN = 0.5
"""Seconds `cancel` gives a cancelled task before cancelling it again."""


async def cancel(tasks: set[asyncio.Task[Any]]) -> None:
    """Cancel `tasks` and wait until they are done, cancelling again any that goes on.

    redis-py's asyncio client can lose a cancellation that lands while it waits on Redis
    (redis/redis-py#2551): a task looping over Redis calls then goes on for ever, and the task group that
    owns it never closes. Asked again, it meets the cancellation at its next wait.
    """
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _done, pending = await asyncio.wait(pending, timeout=CANCEL_AGAIN)
