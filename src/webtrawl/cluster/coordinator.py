"""The coordinator of a distributed crawl: creates or rejoins it and decides when it is over.

One coordinator runs per crawl at a time (a lease key renewed every 2 s; a second one is refused). It
- records the crawl's settings and layout in Redis when it creates the crawl, and checks them when it
  rejoins, so every node crawls with the same scope and politeness;
- declares the crawl finished when two scans a grace period apart both see nothing waiting or running
  in any partition and an unchanged activity counter (children are added before their page completes,
  so an empty frontier that stays empty is a finished crawl).
It does no work per page: each node indexes what it fetches in its own shard (`cluster.shard`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, replace
from functools import partial
from typing import Any, NamedTuple

from ..config import (
    CrawlConfig,
    FetchConfig,
    MediaConfig,
    PolitenessConfig,
    RenderConfig,
    RevisitConfig,
    ScopeConfig,
)
from ..errors import ConfigError
from ..store.crawls import differences
from ..store.shards import last_node_number
from ..urls import NORMALIZATION_VERSION
from .events import Event, LeaseHeld
from .keys import Keys
from .layout import VERSION as LAYOUT_VERSION
from .layout import Layout
from .leases import PARTITION_FIELDS
from .redisconn import crawl_gone, persist, pipelined

log = logging.getLogger(__name__)

IDLE = 0.2
"""Seconds between two looks at whether the crawl is over."""
GRACE = 0.5
"""Seconds between the two scans that must both find the crawl empty. Their activity counters, not this
wait, make the second scan's verdict safe (any claim, add or completion in between moves a counter the
first scan read), so it is short: the end of every distributed crawl waits for it."""
RESTORE_MARK = "restore"
"""A field of the crawl's settings: the crawl is new in this Redis and not yet restored from the coordinator's
index (`cluster.restore`)."""
INCARNATION = "incarnation"
"""A field of the crawl's settings: the id of this creation of the crawl in this Redis (`Layout.incarnation`)."""
HASH_NAME = "xxh3_64(host key) mod partitions"
HASH_VERSION = 1


def _config_document(config: CrawlConfig) -> dict[str, Any]:
    document = asdict(config)
    document.pop("out")
    return document


def config_from_document(document: dict[str, Any], **overrides: Any) -> CrawlConfig:
    """The crawl's settings as stored in Redis, with a node's own `out` and `concurrency`."""
    values = dict(document)
    values["scope"] = ScopeConfig(**_tuples(values["scope"]))
    values["fetch"] = FetchConfig(**_tuples(values["fetch"]))
    values["politeness"] = PolitenessConfig(**_tuples(values["politeness"]))
    # parts added later: a crawl created before them has none
    values["media"] = MediaConfig(**_tuples(values.get("media", {})))
    values["revisit"] = RevisitConfig(**_tuples(values.get("revisit", {})))
    values["render"] = RenderConfig(**_tuples(values.get("render", {})))
    values["seeds"] = tuple(values["seeds"])
    values.update(overrides)
    return CrawlConfig(**values)


def _tuples(values: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


async def create_or_join(client: Any, keys: Keys, config: CrawlConfig, layout: Layout) -> tuple[CrawlConfig, Layout]:
    """Create the crawl in Redis, or check that the one there has the same identity; returns what is stored."""
    identity = json.dumps(config.identity(sorted(config.seeds), NORMALIZATION_VERSION), sort_keys=True)
    created = await client.hsetnx(keys.meta, "identity", identity)
    stored, document = await client.hmget(keys.meta, "identity", "config")
    if json.loads(stored) != json.loads(identity):
        raise ConfigError(
            f"crawl {config.name!r} in Redis was started with other seeds or scope; "
            "use the same ones to rejoin it, or another --name"
        )
    if created or document is None:  # new, or a creation cut short (its coordinator died; this one holds the lease)
        return config, await _create(client, keys, config, layout)
    document, wanted = json.loads(document), json.loads(json.dumps(_config_document(config)))
    ignored = [
        change
        for change in differences(document, wanted)
        if not change.startswith(("concurrency:", "seeds:", "revisit."))
    ]
    if ignored:
        log.warning("crawl %r keeps the settings it was created with; ignored: %s", config.name, "; ".join(ignored))
    if document.get("revisit") != wanted["revisit"]:
        # Re-crawl settings belong to a run (`--recrawl`, `--every`, intervals): nodes that join from now on
        # read them.
        document["revisit"] = wanted["revisit"]
        await client.hset(keys.meta, "config", json.dumps(document))
    return await load_crawl(client, keys, out=config.out, concurrency=config.concurrency)


async def _create(client: Any, keys: Keys, config: CrawlConfig, layout: Layout) -> Layout:
    """Make the crawl's partitions and publish its settings, under a new incarnation: nodes of an earlier one
    (Redis lost it, and they have not noticed yet) write nothing into it."""
    layout = replace(layout, incarnation=uuid.uuid4().hex[:16])

    pipe = client.pipeline(transaction=False)
    pipe.set(keys.scope_incarnation, layout.incarnation)
    # A crawl rebuilt in a Redis that lost it: its nodes' ids go on after those its shards already name, since
    # a shard is known by its nodes (`store.shards.save_places`).
    pipe.set(keys.ids, last_node_number(config.out))
    for p in range(layout.partitions):
        pipe.hset(keys.counters(p), "crawl", layout.incarnation)
    await pipe.execute()
    # Published last: a node can join (`load_crawl`) only once every partition takes its calls.
    await client.hset(
        keys.meta,
        mapping={
            "config": json.dumps(_config_document(config)),
            "layout": json.dumps(asdict(layout)),
            "hash": HASH_NAME,
            "hash_version": HASH_VERSION,
            "created_at": time.time(),
            INCARNATION: layout.incarnation,
            RESTORE_MARK: 1,  # whatever the coordinator's index has of this crawl comes back first
        },
    )
    await client.set(keys.control, "run")
    return layout


async def load_crawl(client: Any, keys: Keys, **overrides: Any) -> tuple[CrawlConfig, Layout]:
    """A crawl's settings and layout as stored in Redis (a worker's only source of them)."""
    config, layout = await client.hmget(keys.meta, "config", "layout")
    if config is None:
        raise ConfigError(f"no crawl named {keys.name!r} in this Redis: start it with `webtrawl crawl URL --redis …`")
    stored = json.loads(layout)
    if stored.get("version", 1) != LAYOUT_VERSION:
        raise ConfigError(
            f"crawl {keys.name!r} in Redis was created by another version of webtrawl, which keeps its URLs in "
            "another form: finish it with that version, or delete its keys (redis-cli --scan --pattern "
            f"'{{{keys.name}:*' | xargs -n 100 redis-cli unlink; on a Cluster, on each master, one key at a time) "
            "and run the coordinator's command again: it rebuilds the crawl from its index"
        )
    return config_from_document(json.loads(config), **overrides), Layout(**stored)


def present(stored: list[bytes | None], incarnation: str) -> bool:
    """Whether the crawl's settings fields (identity, incarnation) as read now are those of `incarnation`."""
    identity, stored_incarnation = stored
    return identity is not None and (stored_incarnation or b"").decode() == incarnation


async def check_present(client: Any, keys: Keys, incarnation: str) -> None:
    """CrawlGone once the crawl's settings are no longer in Redis (which never deletes them), or are those of a
    crawl created anew there: its nodes would otherwise wait in an empty crawl for ever, and its coordinator
    fail on the first key it expects."""
    stored = await persist("checking the crawl is there", lambda: client.hmget(keys.meta, "identity", INCARNATION))
    if not present(stored, incarnation):
        raise crawl_gone(keys.name)


class CoordinatorLease:
    """The lease that makes this process the crawl's only coordinator."""

    def __init__(self, client: Any, keys: Keys, ttl: float) -> None:
        self._client = client
        self._keys = keys
        self._ttl = int(ttl * 1000)
        self.token = uuid.uuid4().hex

    async def acquire(self, on_event: Callable[[Event], None] | None = None) -> None:
        """Take the lease; if another coordinator holds it, wait one TTL (it may have died) before refusing."""
        deadline = time.monotonic() + self._ttl / 1000 + 1
        while not await self._client.set(self._keys.coordinator, self.token, nx=True, px=self._ttl):
            if time.monotonic() > deadline:
                raise ConfigError(
                    f"crawl {self._keys.name!r} already has a running coordinator; join it with `webtrawl worker`"
                )
            if on_event is not None:
                on_event(LeaseHeld(self._keys.name))
                on_event = None
            await asyncio.sleep(0.5)

    async def renew(self) -> bool:
        """Extend the lease; take it again if it vanished (a Redis restart lost it); False if another holds it."""
        holder = await persist("renewing the coordinator lease", lambda: self._client.get(self._keys.coordinator))
        if holder is None:
            return bool(await self._client.set(self._keys.coordinator, self.token, nx=True, px=self._ttl))
        if holder == self.token.encode():
            await self._client.pexpire(self._keys.coordinator, self._ttl)
            return True
        return False

    async def release(self) -> None:
        if await self._client.get(self._keys.coordinator) == self.token.encode():
            await self._client.delete(self._keys.coordinator)


class Scan(NamedTuple):
    """The crawl's counters summed over every partition."""

    waiting: int
    running: int
    done: int
    failed: int
    act: int
    """Activity: grows with every claim and completion, so two equal readings mean nothing happened between."""


async def scan(client: Any, keys: Keys, partitions: int) -> Scan:
    """The counters of every partition, summed."""
    replies = await persist("scanning partitions", lambda: pipelined(client, partial(queue_counters, keys, partitions)))
    return summed(replies)


def queue_counters(keys: Keys, partitions: int, pipe: Any) -> None:
    """Queue the reads of every partition's counters on `pipe` (`summed` adds up their replies)."""
    for p in range(partitions):
        pipe.hmget(keys.counters(p), *PARTITION_FIELDS)


def summed(replies: list[Any]) -> Scan:
    totals = dict.fromkeys(PARTITION_FIELDS, 0)
    for reply in replies:
        for field, value in zip(PARTITION_FIELDS, reply, strict=True):
            totals[field] += int(value or 0)
    return Scan(**totals)


async def watch_for_end(client: Any, keys: Keys, partitions: int) -> None:
    """Return once the crawl is over: two scans `GRACE` apart that find nothing waiting or running, and no
    activity between them."""
    while True:
        first = await scan(client, keys, partitions)
        if first.waiting == 0 and first.running == 0:
            await asyncio.sleep(GRACE)
            second = await scan(client, keys, partitions)
            if (second.waiting, second.running, second.act) == (0, 0, first.act):
                return
        else:
            await asyncio.sleep(IDLE)
