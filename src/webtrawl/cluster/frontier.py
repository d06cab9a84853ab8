"""The distributed frontier: URL state in Redis, split into partitions by host, each leased to one node.

Per partition, Redis holds each host's waiting URLs in breadth-first order, the running ones with the
lease token they were handed out under, retries with their due time, counters, the dedup filter and each
node's acknowledgement of its last batch (`cluster/lua/common.lua` lists the keys); the results themselves
stay in the node's shard. Every change is one
Lua script on one partition, so it is atomic, and claim and complete are fenced by the lease.

This object is one node's view: it claims only from partitions it holds (`cluster.leases.Leases`, kept by
the heartbeat thread), picks hosts as the embedded frontier does (ready hosts, lowest head first, through
`hosts.HostQueue` and the node's own politeness state: a host lives in one partition, so one node decides
its pace), and learns the hosts' heads from the scripts' replies and from a periodic read of each held
partition (other nodes add URLs to it). Adding goes to any partition: a page's links land wherever their
hosts live. Batches are cut into chunks so a page with 100,000 links never blocks Redis for long.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..faults import crash_point
from ..frontier.hosts import HostQueue
from ..frontier.importance import SEED_CASH, already_seen, shares
from ..frontier.seen import SeenCache
from ..models import Completion, Entry, FrontierCounts, NewURL, Previous, Resource, Revisit, State
from ..politeness import Politeness
from ..urls import partition_of, template
from .bloom import fp_bytes
from .completing import completion_args, refused
from .coordinator import queue_counters, scan, summed
from .entries import decode_record, encode_record
from .keys import Keys
from .layout import Layout
from .leases import Leases
from .redisconn import UNREACHABLE, persist, pipelined
from .scripts import Call, Script, Scripts, run_together

if TYPE_CHECKING:
    from .hostlimits import SharedHostLimits
    from .shard import NodeShard

log = logging.getLogger(__name__)
T = TypeVar("T")
X = TypeVar("X")

CHUNK = 1000
"""URLs per script call: long enough to amortize a round trip, short enough not to block Redis."""
EXPLICIT = ("seed", "sitemap")
"""Kinds of URL given explicitly, which the Bloom filter's whitelist keeps from false positives (`add.lua`)."""
REFRESH_EVERY = 0.5
"""Seconds between two reads of the held partitions' hosts (to see URLs other nodes added)."""
HOSTS_PER_REFRESH = 1000
"""Hosts read per partition and refresh, lowest head first."""


class RedisFrontier:
    """The `Frontier` of one node of a distributed crawl."""

    def __init__(
        self,
        client: Any,
        keys: Keys,
        layout: Layout,
        leases: Leases,
        politeness: Politeness,
        *,
        shard: NodeShard | None = None,
        host_limits: SharedHostLimits | None = None,
        importance: bool = False,
    ) -> None:
        """`host_limits`: the hosts' shared slots, needed when URLs are partitioned by URL. `importance`: the
        crawl orders each depth by importance (`frontier.importance`), fixed when the crawl is created."""
        self._importance = importance
        self._order = "importance" if importance else "bfs"
        self._client = client
        self._keys = keys
        self._layout = layout
        self._leases = leases
        self._politeness = politeness
        self._shard = shard
        self._by_url = layout.partition_by == "url"
        self._limits = host_limits
        self._scripts = Scripts(client, layout.incarnation)
        self._host_ids: dict[tuple[str, int], int] = {}
        """(host, partition) → a local id: with URLs partitioned by URL, a host has URLs in many partitions."""
        self._ids_of_host: dict[str, list[int]] = defaultdict(list)
        self._host_names: dict[int, str] = {}
        self._host_partition: dict[int, int] = {}
        self._hosts = HostQueue({})
        self._known: dict[int, set[int]] = defaultdict(set)
        """Per held partition, the host ids this node has heads for."""
        self._retry_at: dict[int, float] = {}
        """Per held partition, when its first retry is due (wall clock)."""
        self._seen = SeenCache()
        self._in_flight: dict[int, set[int]] = defaultdict(set)
        """Per partition, the fingerprints handed out here and not completed yet."""
        self._reconcile = False
        """Set when a call to Redis failed: a script may have run without its reply arriving, or a restarted
        Redis may have lost the last second of writes; the next claim compares what runs under our leases
        with what is in flight here."""
        self._running = 0
        self._refreshed = 0.0
        self._done = 0
        """URLs this node completed as done since `_done_base` (the crawl's total at the last refresh) was read."""
        self._dropped: list[list[str]] = []
        """URLs refused since the last `_record_drops` (see there)."""
        self._done_base = 0
        self.paused = False
        self.finished = False
        """Set when the coordinator declared the crawl over (nothing waiting or running anywhere)."""

    def _wake_ready(self) -> None:
        """Wake the parked hosts politeness says may be ready now (a request ended, robots.txt arrived)."""
        for host in self._politeness.take_ready():
            for host_id in self._ids_of_host.get(host, ()):
                self._hosts.wake(host_id)

    def _host_id(self, host: str, partition: int) -> int:
        host_id = self._host_ids.get((host, partition))
        if host_id is None:
            host_id = self._host_ids[host, partition] = len(self._host_ids) + 1
            self._ids_of_host[host].append(host_id)
            self._host_names[host_id] = host
            self._host_partition[host_id] = partition
        return host_id

    def partition(self, url: str, host: str) -> int:
        return partition_of(url if self._by_url else host, self._layout.partitions)

    def running_in(self, p: int) -> int:
        """URLs of partition `p` handed out here and not completed yet (read by the heartbeat thread)."""
        return len(self._in_flight.get(p, ()))

    async def _redis(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """`call()` until Redis answers (see `redisconn.persist`), noting that a reconcile is due."""

        async def attempt() -> T:
            try:
                return await call()
            except UNREACHABLE:
                self._reconcile = True
                raise

        return await persist(what, attempt)

    async def _script(self, what: str, script: Script, p: int, args: list[Any]) -> Any:
        """Run one of the partition scripts on partition `p` (see `_redis`)."""
        return await self._redis(what, lambda: script(keys=[self._keys.counters(p)], args=args))

    async def _together(self, what: str, script: Script, calls: Sequence[tuple[int, list[Any]]]) -> list[Any]:
        """Run `script` on each (partition, args) of `calls` in one round trip (`scripts.run_together`)."""
        counters = self._keys.counters
        return await run_together(
            self._client, what, [Call(script, counters(p), args) for p, args in calls], on_lost=self._lost
        )

    def _lost(self) -> None:
        self._reconcile = True

    def _chunks(self, items: Iterable[X], url_of: Callable[[X], NewURL | Entry]) -> Iterator[tuple[int, list[X]]]:
        """`items` grouped by partition, in chunks of at most `CHUNK`: one script call each."""
        by_partition: dict[int, list[X]] = defaultdict(list)
        for item in items:
            url = url_of(item)
            by_partition[self.partition(url.url, url.host)].append(item)
        for p, group in by_partition.items():
            for start in range(0, len(group), CHUNK):
                yield p, group[start : start + CHUNK]

    async def _reconcile_leases(self, usable: Mapping[int, str]) -> None:
        for p, token in usable.items():
            args = ["reconcile", token, 0, *(fp_bytes(fp) for fp in self._in_flight.get(p, ()))]
            orphans = await self._script("reconciling", self._scripts.lease, p, args)
            if orphans and orphans > 0:
                log.warning("partition %d: %d URL(s) running here no more went back to waiting", p, orphans)
        self._reconcile = False

    # -- adding -----------------------------------------------------------------------------------

    async def add(self, urls: Sequence[NewURL], drops: Sequence[tuple[str, str]] = ()) -> int:
        self._dropped += [[url, reason, ""] for url, reason in drops]
        cash = {u.fp: SEED_CASH for u in urls if u.kind == "seed"} if self._importance else None
        added = await self._add(self._seen.fresh(urls), cash)
        await self._record_drops()
        return added

    async def _add(
        self, urls: Sequence[NewURL], cash: Mapping[int, float] | None, previous: Mapping[int, Previous] | None = None
    ) -> int:
        """Add `urls` to their partitions; `cash` (importance order) is what each receives, new or not;
        `previous`, what an earlier fetch left (a restored re-crawl's URLs)."""
        layout = self._layout
        head = [
            layout.dedup,
            layout.bloom_capacity,
            repr(layout.bloom_error_rate),
            layout.max_urls_per_host or 0,
            layout.max_urls_per_template or 0,
        ]
        previous = previous or {}
        chunks = list(self._chunks(urls, lambda u: u))
        calls = []
        for p, chunk in chunks:
            args: list[Any] = list(head)
            for u in chunk:
                share = "" if cash is None else repr(cash.get(u.fp, 0.0))
                record = encode_record(u.fp, u.url, u.host, u.kind, u.referrer_fp, u.via, previous.get(u.fp))
                args += [u.host, u.depth, record, u.kind, template(u.url), share]
            calls.append((p, args))
        added = 0
        replies = await self._together("adding URLs", self._scripts.add, calls)
        for (p, chunk), (new, heads, over) in zip(chunks, replies, strict=True):
            added += int(new)
            self._apply_heads(p, heads)
            if over:  # (fingerprint, budget) pairs: drops with the page that linked them, recorded after the
                # add, so a node that dies between the two loses these drops' records, not URLs (never added)
                by_fp = {fp_bytes(u.fp): u for u in chunk}
                for fp, reason in zip(over[::2], over[1::2], strict=True):
                    u = by_fp[fp]
                    self._dropped.append([u.url, reason.decode(), "" if u.referrer_fp is None else str(u.referrer_fp)])
        return added

    async def _record_drops(self) -> None:
        """Record the URLs not taken since the last call ([url, reason, referrer fp] rows) in the node's shard:
        after the batch whose links they were is settled there, which adds its links as waiting URLs (a URL
        over a budget is then taken out again). The coordinator's frontier, which has no shard, adds only
        seeds and restores: what it drops is not recorded."""
        dropped, self._dropped = self._dropped, []
        if dropped and self._shard is not None:
            await self._shard.record_drops(dropped)

    async def restore(self, rows: Sequence[tuple[Entry, State]]) -> int:
        """Put back URLs of a crawl this Redis lost, as the coordinator's index has them: an ended URL is seen,
        counted, and not queued (`ended.lua`); a waiting one is added as any URL is, with what its last fetch
        left. Returns how many were new here: a restore cut short can run again."""
        waiting = [entry for entry, state in rows if state in (State.WAITING, State.RUNNING)]
        restored = await self._add(
            [NewURL(url=e.url, fp=e.fp, host=e.host, depth=e.depth, kind=e.kind, referrer_fp=e.referrer_fp, via=e.via)
             for e in waiting],
            {e.fp: e.priority for e in waiting} if self._importance else None,
            {e.fp: e.previous for e in waiting if e.previous is not None},
        )  # fmt: skip
        ended = [(entry, state) for entry, state in rows if state in (State.DONE, State.FAILED)]
        head = [self._layout.dedup, self._layout.bloom_capacity, repr(self._layout.bloom_error_rate)]
        calls = []
        for p, chunk in self._chunks(ended, lambda row: row[0]):
            args: list[Any] = list(head)
            for e, state in chunk:
                # An index written by an earlier version may name a seed a link: depth 0 tells.
                explicit = e.kind in EXPLICIT or e.depth == 0
                args += [fp_bytes(e.fp), e.host, template(e.url), state.name.lower(), "1" if explicit else ""]
            calls.append((p, args))
        replies = await self._together("restoring ended URLs", self._scripts.ended, calls)
        return restored + sum(int(n) for n in replies)

    async def revisit(self, due: Sequence[Revisit]) -> int:
        """Put ended URLs whose revisit is due back in their partitions, with what their last fetch left for a
        conditional request; returns how many went back (one waiting or running already stays as it is)."""
        calls = []
        for p, chunk in self._chunks(due, lambda item: item.entry):
            args: list[Any] = []
            for item in chunk:
                e = item.entry
                record = encode_record(e.fp, e.url, e.host, e.kind, e.referrer_fp, e.via, e.previous)
                share = repr(e.priority) if self._importance else ""
                args += [e.host, e.depth, record, item.ended, share]
            calls.append((p, args))
        requeued = 0
        for (p, _args), (n, heads) in zip(calls, await self._together("re-queuing URLs", self._scripts.revisit, calls),
                                          strict=True):  # fmt: skip
            requeued += int(n)
            self._apply_heads(p, heads)
        return requeued

    async def widen_scope(self, hosts: Sequence[str]) -> None:
        """Make `hosts` part of the crawl's scope for every node (`cluster.scopehosts`)."""
        if hosts:
            await self._redis(
                "widening the crawl's scope",
                lambda: self._scripts.widen_scope(keys=[self._keys.scope], args=list(hosts)),
            )

    def _apply_heads(self, p: int, heads: list[Any]) -> None:
        """Take in (host, head) pairs a script returned for partition `p`, if this node holds it."""
        if p not in self._known and self._leases.token(p) is None:
            return
        known = self._known[p]
        for i in range(0, len(heads), 2):
            host = heads[i].decode()
            host_id = self._host_id(host, p)
            if heads[i + 1] is None:
                self._hosts.set_head(host_id, None)
                known.discard(host_id)
            else:
                self._hosts.raise_head(host_id, int(float(heads[i + 1])))
                known.add(host_id)

    # -- claiming ---------------------------------------------------------------------------------

    async def claim(self, n: int) -> list[Entry]:
        if n <= 0 or self.paused or self.finished:
            return []
        usable = self._leases.usable()
        if self._reconcile:
            await self._reconcile_leases(usable)
        mono = time.monotonic()
        if mono - self._refreshed >= REFRESH_EVERY:
            await self._refresh(usable)
        self._wake_ready()
        now = time.time()
        due = [p for p, at in self._retry_at.items() if at <= now and p in usable]
        for p in due:
            del self._retry_at[p]  # the claim script puts due retries back in their hosts' queues
        calls = [(p, [usable[p], self._order]) for p in due]
        for p, reply in zip(due, await self._together("claiming", self._scripts.claim, calls), strict=True):
            if reply is not None:
                self._apply_heads(p, reply[1])
        politeness, names, hosts = self._politeness, self._host_names, self._hosts
        plan: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for host_id in hosts.candidates(mono):
            p = self._host_partition[host_id]
            if p not in usable:
                hosts.park(host_id, mono + REFRESH_EVERY)
                continue
            host = names[host_id]
            take = min(politeness.free_slots(host, mono), n)
            if take <= 0:
                hosts.park(host_id, politeness.wait(host, mono))
                continue
            for _ in range(take):
                politeness.reserve(host, mono)
            hosts.served(host_id)
            plan[p].append((host_id, take))
            n -= take
            if n == 0:
                break
        if self._limits is not None:  # which also gives back the slots of requests that ended
            await self._limits.cut(plan, names, hosts, mono)
        entries: list[Entry] = []
        plan = {p: wanted for p, wanted in plan.items() if wanted}
        calls = []
        for p, wanted in plan.items():
            args: list[Any] = [usable[p], self._order]
            for host_id, take in wanted:
                args += [names[host_id], take]
            calls.append((p, args))
        replies = await self._together("claiming", self._scripts.claim, calls)
        started = time.monotonic()
        for (p, wanted), reply in zip(plan.items(), replies, strict=True):
            got: Counter[str] = Counter()
            if reply is None:  # the lease is gone: the heartbeat thread will notice too
                self._forget_partition(p)
            else:
                flat, heads = reply
                for i in range(0, len(flat), 5):
                    host = flat[i].decode()
                    entry = decode_record(flat[i + 2], host, int(flat[i + 1]), int(flat[i + 3]), flat[i + 4])
                    entries.append(entry)
                    got[host] += 1
                self._apply_heads(p, heads)
                self._in_flight[p].update(entry.fp for entry in entries[len(entries) - sum(got.values()) :])
            for host_id, take in wanted:
                politeness.claimed(names[host_id], take, got[names[host_id]], started)
        self._running += len(entries)
        if self._limits is not None:
            await self._limits.settle(time.monotonic())
        return entries

    async def _refresh(self, usable: Mapping[int, str]) -> None:
        """Read the hosts and due retries of every held partition; forget lost ones."""
        self._refreshed = time.monotonic()
        for p in [p for p in self._known if p not in usable and not self._in_flight.get(p)]:
            self._forget_partition(p)
        now = time.time()
        held = list(usable)

        def fill(pipe: Any) -> None:
            for p in held:
                self._read_partition(p, pipe)
            queue_counters(self._keys, self._layout.partitions, pipe)

        replies = await self._redis("reading the held partitions", lambda: pipelined(self._client, fill))
        for i, p in enumerate(held):
            hosts, later, (seconds, micros) = replies[3 * i : 3 * i + 3]
            flat: list[Any] = []
            for host, score in hosts:
                flat += [host, score]
            seen = {self._host_id(host.decode(), p) for host, _ in hosts}
            for host_id in self._known[p] - seen:
                if len(hosts) < HOSTS_PER_REFRESH:
                    self._hosts.set_head(host_id, None)
                    self._known[p].discard(host_id)
            self._apply_heads(p, flat)
            if later:
                redis_now = int(seconds) + int(micros) / 1e6
                self._retry_at[p] = now + max(0.0, later[0][1] / 1000 - redis_now)
            else:
                self._retry_at.pop(p, None)
        self._done_base, self._done = summed(replies[3 * len(held) :]).done, 0

    def _read_partition(self, p: int, pipe: Any) -> None:
        keys = self._keys
        pipe.zrange(keys.hosts(p), 0, HOSTS_PER_REFRESH - 1, withscores=True)
        pipe.zrange(keys.later(p), 0, 0, withscores=True)
        # TIME through a script on the partition's key: it is that node's clock that dates the retries, and
        # a Cluster pipeline refuses TIME (it has no key to route by).
        pipe.eval("return redis.call('TIME')", 1, keys.later(p))

    def _forget_partition(self, p: int) -> None:
        for host_id in self._known.pop(p, set()):
            self._hosts.set_head(host_id, None)
        self._retry_at.pop(p, None)

    # -- completing -------------------------------------------------------------------------------

    async def complete(
        self, batch: Sequence[Completion], checkpoint: Mapping[str, int], site_files: Sequence[Resource] = ()
    ) -> None:
        """Children first (in whatever partitions they live), then the results, fenced by the leases.

        The batch is staged in the node's shard with the archive checkpoint before anything is completed in
        Redis, and settled there with what Redis accepted after (`cluster.shard`): a crash before leaves
        records whose URLs are fetched again (at least once), never a result without its record; a crash
        after is settled at the next start. Site files are not URLs of any partition: they are indexed in the
        shard as they are staged.
        """
        by_partition: dict[int, list[Completion]] = defaultdict(list)
        for item in batch:
            by_partition[self.partition(item.entry.url, item.entry.host)].append(item)
        batch_id = 0
        if self._shard is not None:
            batch_id = self._shard.next_batch()
            results = [(p, item) for p, items in by_partition.items() for item in items]
            await self._shard.stage(batch_id, checkpoint, results, site_files)
            if results:
                crash_point("after-stage")
        children = self._seen.fresh(child for item in batch for child in item.children)
        cash = None
        if self._importance:
            cash = shares(batch)
            children += already_seen(batch, cash, children)
        if children:
            await self._add(children, cash)
        now = time.time()
        tokens = {p: self._leases.token(p) for p in by_partition}
        chunks = [
            (p, items[start : start + CHUNK])
            for p, items in by_partition.items()
            for start in range(0, len(items), CHUNK)
        ]
        calls = [
            (p, completion_args(token, self._leases.node, batch_id, chunk, now))
            for p, chunk in chunks
            if (token := tokens[p]) is not None
        ]
        replies = iter(await self._together("completing", self._scripts.complete, calls))
        lost: set[int] = set()
        for p, chunk in chunks:
            lost |= refused(p, chunk, None if tokens[p] is None else next(replies))
        for p, items in by_partition.items():
            token = tokens[p]
            self._done += sum(item.verdict == "done" and item.entry.fp not in lost for item in items)
            retries = [item.not_before or now for item in items if item.verdict == "retry"]
            if retries and token is not None:
                self._retry_at[p] = min(self._retry_at.get(p, retries[0]), *retries)
            in_flight = self._in_flight[p]
            in_flight.difference_update(item.entry.fp for item in items)
            if not in_flight:
                del self._in_flight[p]
        if self._shard is not None and batch:
            crash_point("before-settle")
            await self._shard.settle(batch_id, [item for item in batch if item.entry.fp not in lost])
        await self._record_drops()
        self._running -= len(batch)

    # -- state ------------------------------------------------------------------------------------

    async def counts(self) -> FrontierCounts:
        found = await scan(self._client, self._keys, self._layout.partitions)
        return FrontierCounts(waiting=found.waiting, running=found.running, done=found.done, failed=found.failed)

    def done_count(self) -> int:
        return self._done_base + self._done

    @property
    def running(self) -> int:
        return self._running

    def exhausted(self) -> bool:
        return self.finished and self._running == 0

    def next_wakeup(self) -> float | None:
        if self.paused or self.finished:
            # Nothing may be claimed before the next refresh (or heartbeat): waiting less would spin.
            return max(0.05, REFRESH_EVERY - (time.monotonic() - self._refreshed))
        waits = [REFRESH_EVERY]
        self._wake_ready()
        if self._hosts.awake:
            return 0.0
        if (at := self._hosts.next_wake()) is not None:
            waits.append(at - time.monotonic())
        waits.extend(at - time.time() for at in self._retry_at.values())
        return max(0.0, min(waits))

    async def close(self) -> None:
        """Nothing to return here: the heartbeat thread releases the leases, which requeues our URLs."""
