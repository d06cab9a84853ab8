"""The coordinator of a distributed crawl: creates or rejoins it, gathers results, decides when it is over.

One coordinator runs per crawl at a time (a lease key renewed every 2 s; a second one is refused). It
- records the crawl's settings and layout in Redis when it creates the crawl, and checks them when it
  rejoins, so every node crawls with the same scope and politeness;
- reads every partition's result stream through a consumer group and writes the results into its own
  `DIR/crawl.db` (`store.ingest`), then deletes and acknowledges them: entries it had read but not
  committed when it died are read again, and applying one twice changes nothing;
- declares the crawl finished when two scans a grace period apart both see nothing waiting or running
  in any partition and an unchanged activity counter (children are added before their page completes,
  so an empty frontier that stays empty is a finished crawl), and the streams are drained.
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

from redis.exceptions import ResponseError

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
from ..frontier.seen import SeenCache
from ..parse.simhash import NEAR_DISTANCE
from ..store.crawls import differences
from ..store.db import Database
from ..store.index import INDEX_CHUNK, IndexPace, index_captures
from ..store.ingest import ingest_round
from ..store.shards import last_node_number
from ..urls import NORMALIZATION_VERSION
from .events import Event, LeaseHeld
from .keys import Keys
from .layout import VERSION as LAYOUT_VERSION
from .layout import Layout
from .leases import PARTITION_FIELDS
from .redisconn import crawl_gone, persist, pipelined
from .wire import decode_completion, decode_site_files

log = logging.getLogger(__name__)

GROUP = "coordinator"
READ_COUNT = 250
"""Stream entries read per partition and round (a round reads at most this many times the partitions)."""
APPLY_COUNT = 1000
"""Entries applied in one transaction, give or take a partition's read: a round applies what it read in
chunks, so a coordinator catching up on full streams holds no more than one chunk's decoded results."""
IDLE = 0.2
"""Seconds between rounds when there was little to gather."""
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
        pipe.xgroup_create(keys.stream(p), GROUP, id="0", mkstream=True)
    for reply in await pipe.execute(raise_on_error=False):
        if isinstance(reply, Exception) and "BUSYGROUP" not in str(reply):  # a creation cut short made it
            raise reply
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


class Gatherer:
    """Moves results from the partitions' streams into the coordinator's database."""

    def __init__(
        self,
        client: Any,
        keys: Keys,
        layout: Layout,
        db: Database,
        crawl_id: int,
        consumer: str,
        near_distance: int = NEAR_DISTANCE,
    ) -> None:
        self._near_distance = near_distance
        self._client = client
        self._keys = keys
        self._layout = layout
        self._db = db
        self._crawl = crawl_id
        self._consumer = consumer
        self.ingested = 0
        self._first_round = True
        self._index = IndexPace()
        self._seen = SeenCache()
        """Links already recorded, used on the database thread only (see `store.ingest.ingest`)."""

    async def round(self) -> int:
        """Read, apply and acknowledge what every partition has; returns how many entries were applied.

        One pipeline reads every partition's stream and one database call applies a chunk of their entries: a
        coordinator that also crawls shares its event loop with the fetches, and each await of a round costs
        a turn of that loop (per partition, reads and transactions held the gathering 3,000 results behind)."""
        streams = [self._keys.stream(p) for p in range(self._layout.partitions)]
        if self._first_round:
            await persist("taking over results", partial(self._read_again, streams))
        try:
            replies = await persist("reading results", partial(self._read, streams))
        except ResponseError as exc:
            if "NOGROUP" in str(exc):  # the streams are created with the crawl
                await check_present(self._client, self._keys, self._layout.incarnation)
            raise
        read = [(p, entries) for p, reply in enumerate(replies) for _name, entries in reply or [] if entries]
        applied = 0
        while read:
            chunk, size = [], 0
            while read and size < APPLY_COUNT:
                chunk.append(read.pop())
                size += len(chunk[-1][1])
            await self._apply(chunk)
            applied += size
        self._first_round = False
        self.ingested += applied
        self._index.added(applied)
        # All of it once the streams are drained, so the index is whole whenever the coordinator finds nothing
        # to read (at the end of a crawl, for one).
        if self._index.due(drained=not applied):
            while await self._db.run(index_captures) >= INDEX_CHUNK:
                pass
            self._index.caught_up()
        return applied

    async def _read_again(self, streams: list[str]) -> None:
        """A new coordinator reads every entry still in a stream again: an earlier one may have died after
        reading some and before trimming them (`ingest` skips those it had written). An entry left in a
        stream and never read again would hold off the end of the crawl for ever."""

        def fill(pipe: Any) -> None:
            for stream in streams:
                pipe.xgroup_setid(stream, GROUP, id="0")

        await pipelined(self._client, fill)

    async def _read(self, streams: list[str]) -> list[Any]:
        def fill(pipe: Any) -> None:
            for stream in streams:
                pipe.xreadgroup(GROUP, self._consumer, {stream: ">"}, count=READ_COUNT)

        return await pipelined(self._client, fill)

    async def _apply(self, chunk: list[tuple[int, list[tuple[bytes, dict[bytes, bytes]]]]]) -> None:
        """Apply partitions' entries in one transaction, then trim them from their streams."""
        items, drops, site_files = [], [], []
        for p, entries in chunk:
            for entry_id, fields in entries:
                if b"c" in fields:
                    completion, node = decode_completion(fields[b"c"])
                    items.append((f"p{p}:{entry_id.decode()}", completion, node))
                elif b"d" in fields:
                    drops.extend(json.loads(fields[b"d"]))
                elif b"f" in fields:
                    site_files.append(decode_site_files(fields[b"f"]))
        await self._db.run(ingest_round, self._crawl, items, drops, site_files, self._near_distance, self._seen.fresh)
        trims = [(self._keys.stream(p), [entry_id for entry_id, _fields in entries]) for p, entries in chunk]
        await persist("acknowledging results", partial(self._trim, trims))

    async def _trim(self, trims: list[tuple[str, list[bytes]]]) -> None:
        """Delete applied entries, then acknowledge them. Not one transaction, which a Redis Cluster refuses
        across partitions: a coordinator that dies between the two leaves entries deleted, so never read
        again and no longer counted as results to gather, and only pending in the group (which costs a few
        bytes). The other order would leave entries acknowledged, never delivered again, yet in the stream,
        holding off the end of the crawl."""

        def fill(pipe: Any) -> None:
            for stream, ids in trims:
                pipe.xdel(stream, *ids)
            for stream, ids in trims:
                pipe.xack(stream, GROUP, *ids)

        await pipelined(self._client, fill)


class Scan(NamedTuple):
    """The crawl's counters summed over every partition."""

    waiting: int
    running: int
    done: int
    failed: int
    act: int
    """Activity: grows with every claim and completion, so two equal readings mean nothing happened between."""
    backlog: int
    """Results not yet gathered."""


async def scan(client: Any, keys: Keys, partitions: int) -> Scan:
    """The counters of every partition, summed."""

    def fill(pipe: Any) -> None:
        for p in range(partitions):
            pipe.hmget(keys.counters(p), *PARTITION_FIELDS)
            pipe.xlen(keys.stream(p))

    replies = await persist("scanning partitions", lambda: pipelined(client, fill))
    totals = dict.fromkeys(PARTITION_FIELDS, 0)
    backlog = 0
    for p in range(partitions):
        for field, value in zip(PARTITION_FIELDS, replies[2 * p], strict=True):
            totals[field] += int(value or 0)
        backlog += replies[2 * p + 1]
    return Scan(backlog=backlog, **totals)


async def watch_for_end(client: Any, keys: Keys, partitions: int, gatherer: Gatherer) -> None:
    """Return once the crawl is over: two empty scans `GRACE` apart with no activity between, streams drained."""
    while True:
        if await gatherer.round() >= READ_COUNT:
            continue  # behind: gather on before looking at the end
        first = await scan(client, keys, partitions)
        if first.waiting == 0 and first.running == 0:
            await asyncio.sleep(GRACE)
            while await gatherer.round():
                pass
            second = await scan(client, keys, partitions)
            if (second.waiting, second.running, second.act, second.backlog) == (0, 0, first.act, 0):
                return
        else:
            await asyncio.sleep(IDLE)
