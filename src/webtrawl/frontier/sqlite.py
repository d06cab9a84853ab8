"""The embedded frontier: URL state in `DIR/crawl.db`, hand-out order decided in memory.

The database holds every URL and its state; this object keeps only what makes `claim` cheap: for each
host with fetchable waiting URLs, the smallest depth among them (its *head*, kept by `hosts.HostQueue`
with which hosts are ready), and for each host with URLs waiting to be retried, when the first retry is
due. A claim picks the ready hosts with the lowest heads and runs one indexed query per chosen host;
everything else (adds, captures, state changes, archive checkpoint) happens in one transaction per
completed batch.

New URLs are held to the crawl's budgets (`budgets.Budgets`) as they are inserted; URLs over a budget
are recorded as dropped instead.

Data owned by the writer thread (host ids, budget counters) is only mutated there; `_hosts` and
`_retry_at` only on the event loop, from the rows the writer thread returns.

A claim reads on the database's reader thread (`Database.read`), so the next URLs are handed out while the
writer commits a batch or catches up the search index; a claim that waited behind those left the fetch
slots idle. Its reading is the last commit's, so three things make up for what it cannot see: URLs handed
out since are skipped by fingerprint (`_claimed`); a URL deeper than one a write in flight brings to its
host is not handed out (`_writing`, looked up per candidate host), which keeps breadth-first order as if the
claim had waited; and a host whose head a commit raised while the claim read keeps the lower of the two
heads (`_raised_at`), so a claim that read before new URLs arrived never marks their host empty.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..models import Completion, Entry, FrontierCounts, NewURL, Resource, State
from ..parse.simhash import NEAR_DISTANCE
from ..politeness import Politeness
from ..store.batches import Completed, record_batch, record_drops, record_site_files
from ..store.db import Database, transaction
from ..store.schedule import requeue_due
from .ahead import ReadAhead
from .budgets import Budgets
from .hosts import HostQueue
from .importance import SEED_CASH, shares
from .reads import claim_rows, count_rows, heads_of
from .seen import SeenCache

Row = tuple[Any, ...]

_KNOWN_CHUNK = 500
"""Fingerprints looked up in one `IN (…)` query."""


_DEEPEST = 1 << 62
"""Deeper than any URL."""
_CASH = "UPDATE urls SET priority = priority + ? WHERE crawl_id = ? AND fp = ? AND state = 0"


class SqliteFrontier:
    """The `Frontier` of an embedded crawl."""

    def __init__(
        self,
        db: Database,
        crawl_id: int,
        politeness: Politeness,
        *,
        budgets: Budgets | None = None,
        importance: bool = False,
        near_distance: int = NEAR_DISTANCE,
    ) -> None:
        self._db = db
        self._near_distance = near_distance
        self._importance = importance
        self._crawl = crawl_id
        self._politeness = politeness
        self._budgets = budgets or Budgets(None, None)
        self._host_ids: dict[str, int] = {}
        self._host_names: dict[int, str] = {}
        self._hosts = HostQueue({})
        self._retry_at: dict[int, float] = {}
        self._seen = SeenCache()
        self._claimed: dict[int, set[int]] = {}
        """Per host id, fingerprints handed out and not completed yet."""
        self._unrecorded: list[tuple[int, float, int]] = []
        """Hand-outs (seq, time, fp) not yet written: they are written with the next completed batch."""
        self._running = 0
        self._done = 0
        self._seq = 0
        self._writing: dict[int, dict[str, int]] = {}
        """Per write in flight (by its seq), the smallest depth of the URLs it brings to each host."""
        self._raises = 0
        self._ahead = ReadAhead(enabled=not importance)  # the importance order changes with every batch
        self._raised_at: dict[int, int] = {}
        """Per host id, the number of the last `_raise_heads` call that raised it."""
        self.revisited = 0
        """URLs this run re-queued because their revisit was due."""

    @classmethod
    async def open(
        cls,
        db: Database,
        crawl_id: int,
        politeness: Politeness,
        *,
        budgets: Budgets | None = None,
        importance: bool = False,
        recrawl: bool = False,
        near_distance: int = NEAR_DISTANCE,
    ) -> SqliteFrontier:
        """Open the crawl's frontier; URLs a dead process left running go back to waiting.

        Without `budgets`, no budget applies; with them, their counters are rebuilt from the frontier.
        `importance`: each completed page passes its importance on to its links (OPIC), which orders the
        waiting URLs of a depth. `recrawl`: ended URLs whose revisit is due wait again (`revisited` says
        how many).
        """
        frontier = cls(db, crawl_id, politeness, budgets=budgets, importance=importance, near_distance=near_distance)
        now = time.time()
        if recrawl:
            frontier.revisited = await db.run(frontier._requeue_due, now)
        heads, retries, done, seq = await db.run(frontier._load, now)
        frontier._hosts = HostQueue(heads)
        frontier._retry_at, frontier._done, frontier._seq = retries, done, seq
        return frontier

    def _requeue_due(self, conn: sqlite3.Connection, now: float) -> int:
        with transaction(conn):
            return requeue_due(conn, self._crawl, now)

    def _wake_ready(self) -> None:
        """Wake the parked hosts politeness says may be ready now (a request ended, robots.txt arrived)."""
        for host in self._politeness.take_ready():
            host_id = self._host_ids.get(host)
            if host_id is not None:
                self._hosts.wake(host_id)

    def _load(self, conn: sqlite3.Connection, now: float) -> tuple[dict[int, int], dict[int, float], int, int]:
        crawl = self._crawl
        create_temp_tables(conn)
        self._release_running(conn)
        for host_id, host in conn.execute("SELECT id, host FROM hosts WHERE crawl_id = ?", (crawl,)):
            self._host_ids[host] = host_id
            self._host_names[host_id] = host
        waiting = "FROM urls WHERE crawl_id = ? AND state = 0"
        heads = dict(
            conn.execute(
                f"SELECT host_id, MIN(depth) {waiting} AND not_before <= ? GROUP BY host_id", (crawl, now)
            ).fetchall()
        )
        retries = dict(
            conn.execute(
                f"SELECT host_id, MIN(not_before) {waiting} AND not_before > ? GROUP BY host_id", (crawl, now)
            ).fetchall()
        )
        (done,) = conn.execute("SELECT COUNT(*) FROM urls WHERE crawl_id = ? AND state = 2", (crawl,)).fetchone()
        (seq,) = conn.execute(
            "SELECT MAX(MAX(added_seq), COALESCE(MAX(claim_seq), 0)) FROM urls WHERE crawl_id = ?", (crawl,)
        ).fetchone()
        if self._budgets.active:
            self._budgets.load(
                conn.execute("SELECT host_id, COUNT(*) FROM urls WHERE crawl_id = ? GROUP BY host_id", (crawl,)),
                (url for (url,) in conn.execute("SELECT url FROM urls WHERE crawl_id = ?", (crawl,))),
            )
        return heads, retries, done, seq or 0

    # -- adding -----------------------------------------------------------------------------------

    async def add(self, urls: Sequence[NewURL], drops: Sequence[tuple[str, str]] = ()) -> int:
        fresh = self._seen.fresh(urls)
        with self._write(fresh) as seq:
            changed = await self._db.run(self._add_in_transaction, fresh, list(drops), seq, time.time())
            self._raise_heads(changed)
        return len(changed)

    @contextmanager
    def _write(self, urls: Sequence[NewURL]) -> Iterator[int]:
        """A write of `urls` to the frontier, in flight while in the block: its seq, and the depths claims
        must not pass until it is committed."""
        self._seq += 1
        seq = self._seq
        shallowest: dict[str, int] = {}
        for url in urls:
            if url.depth < shallowest.get(url.host, url.depth + 1):
                shallowest[url.host] = url.depth
        self._writing[seq] = shallowest
        try:
            yield seq
        finally:
            del self._writing[seq]
            for host in shallowest:  # hosts a claim parked for this write
                host_id = self._host_ids.get(host)
                if host_id is not None:
                    self._hosts.wake(host_id)

    def _add_in_transaction(
        self, conn: sqlite3.Connection, urls: Sequence[NewURL], drops: list[tuple[str, str]], seq: int, now: float
    ) -> list[Row]:
        with transaction(conn):
            record_drops(conn, self._crawl, ((url, reason, None) for url, reason in drops))
            changed = self._insert_urls(conn, urls, seq, now)
            if self._importance:  # the importance the crawl starts from
                conn.executemany(_CASH, [(SEED_CASH, self._crawl, u.fp) for u in urls if u.kind == "seed"])
            return changed

    def _insert_urls(self, conn: sqlite3.Connection, urls: Sequence[NewURL], seq: int, now: float) -> list[Row]:
        """Insert new URLs within their budgets, lower the depth of waiting ones found closer; return
        (host_id, depth) of both. URLs over a budget are recorded as dropped instead (a page's link to one
        is still a link: its edge is kept)."""
        host_ids = [self._host_id(conn, u.host) for u in urls]
        budgets = self._budgets
        refused: dict[int, str] = {}
        pending: list[tuple[int, int | None]] = []
        if budgets.active:
            refused, pending = budgets.admit(urls, host_ids, lambda fps: self._known(conn, fps))
        rows = [
            (u.fp, u.url, host_ids[i], u.depth, u.kind, u.referrer_fp, json.dumps(u.via) if u.via else None)
            for i, u in enumerate(urls)
            if i not in refused
        ]
        if refused:
            record_drops(
                conn, self._crawl, ((urls[i].url, reason, urls[i].referrer_fp) for i, reason in refused.items())
            )
        if not rows:
            return []
        before = conn.execute("SELECT COALESCE(MAX(id), 0) FROM urls").fetchone()[0] if budgets.active else 0
        conn.executemany("INSERT INTO temp.new_urls VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        returned = conn.execute(
            """
            INSERT INTO urls(crawl_id, fp, url, host_id, depth, kind, referrer_fp, via, state, added_seq,
                             discovered_at, updated_at)
            SELECT ?, fp, url, host_id, depth, kind, referrer_fp, via, 0, ?, ?, ? FROM temp.new_urls WHERE true
            ON CONFLICT(crawl_id, fp) DO UPDATE SET
                depth = excluded.depth, referrer_fp = excluded.referrer_fp, via = excluded.via,
                kind = excluded.kind, added_seq = excluded.added_seq, updated_at = excluded.updated_at
            WHERE excluded.depth < urls.depth AND urls.state = 0
            RETURNING host_id, depth, fp, id
            """,
            (self._crawl, seq, now, now),
        ).fetchall()
        conn.execute("DELETE FROM temp.new_urls")
        if budgets.active:
            new = {fp for _host, _depth, fp, row_id in returned if row_id > before}
            counted = []
            for i, u in enumerate(urls):
                if u.fp in new:
                    new.discard(u.fp)  # a URL listed twice in one batch counts once
                    counted.append(pending[i])
            budgets.count_new(counted)
        return [(host_id, depth) for host_id, depth, _fp, _id in returned]

    def _known(self, conn: sqlite3.Connection, fps: list[int]) -> set[int]:
        """Which of `fps` are in the frontier already."""
        known: set[int] = set()
        for start in range(0, len(fps), _KNOWN_CHUNK):
            chunk = fps[start : start + _KNOWN_CHUNK]
            known.update(
                fp
                for (fp,) in conn.execute(
                    f"SELECT fp FROM urls WHERE crawl_id = ? AND fp IN ({', '.join('?' * len(chunk))})",
                    (self._crawl, *chunk),
                )
            )
        return known

    def _host_id(self, conn: sqlite3.Connection, host: str) -> int:
        host_id = self._host_ids.get(host)
        if host_id is None:
            cur = conn.execute("INSERT INTO hosts(crawl_id, host) VALUES (?, ?)", (self._crawl, host))
            host_id = cur.lastrowid
            assert host_id is not None
            self._host_ids[host] = host_id
            self._host_names[host_id] = host
        return host_id

    def _raise_heads(self, changed: Iterable[Row]) -> None:
        self._raises += 1
        raise_head, raised_at, number, ahead = self._hosts.raise_head, self._raised_at, self._raises, self._ahead
        for host_id, depth in changed:
            raise_head(host_id, depth)
            raised_at[host_id] = number
            ahead.raised(host_id, depth)

    # -- claiming ---------------------------------------------------------------------------------

    async def claim(self, n: int) -> list[Entry]:
        now, mono = time.time(), time.monotonic()
        if self._retry_at:
            await self._wake_retries(now)
        self._wake_ready()
        politeness, names, hosts, ahead = self._politeness, self._host_names, self._hosts, self._ahead
        if n <= 0:
            return []
        writing = list(self._writing.values())  # the writes this claim's reading may not see
        entries: list[Entry] = []
        served: list[tuple[int, int]] = []  # hosts and the slots reserved for them
        plan: list[tuple[int, int]] = []  # those of them the database is read for
        for host_id in hosts.candidates(mono):
            host = names[host_id]
            deepest = _shallowest(writing, host)
            if deepest < hosts.heads[host_id]:
                hosts.park(host_id, None)  # until that write ends: its URLs come first
                continue
            take = min(politeness.free_slots(host, mono), n)
            if take <= 0:
                hosts.park(host_id, politeness.wait(host, mono))
                continue
            for _ in range(take):  # reserved at once: the next host may share this one's address
                politeness.reserve(host, mono)
            hosts.served(host_id)
            served.append((host_id, take))
            n -= take
            buffered = ahead.take(host_id, take, deepest)
            if buffered is None:
                plan.append((host_id, take))
            else:
                entries.extend(buffered)
                if (head := ahead.head(host_id)) is not None:
                    hosts.set_head(host_id, head)
            if n == 0:
                break
        if not served:
            return []
        self._seq += 1  # before the read: writes that start during it come after this claim
        claimed, seq = self._claimed, self._seq
        if plan:
            entries.extend(await self._read_claims(plan, now, writing))
        for entry in entries:
            claimed.setdefault(self._host_ids[entry.host], set()).add(entry.fp)
            self._unrecorded.append((seq, now, entry.fp))
        got = Counter(entry.host for entry in entries)
        started = time.monotonic()  # the requests start now, not when the claim began
        for host_id, take in served:
            politeness.claimed(names[host_id], take, got[names[host_id]], started)
        self._running += len(entries)
        return entries

    async def _read_claims(self, plan: list[tuple[int, int]], now: float, writing: list[dict[str, int]]) -> list[Entry]:
        """Hand out the planned hosts' first waiting URLs from the database, none deeper than what the writes
        in flight bring to their host; keep what was read past them."""
        hosts, ahead, claimed, raises = self._hosts, self._ahead, self._claimed, self._raises
        extra = ahead.extra()
        read = await self._db.read(
            claim_rows,
            [(host_id, take + max(extra, 1), frozenset(claimed.get(host_id, ()))) for host_id, take in plan],
            self._host_names,
            now,
        )
        entries: list[Entry] = []
        for host_id, take in plan:
            rows = read[host_id]
            deepest = _shallowest(writing, self._host_names[host_id])
            handed = 0
            while handed < min(take, len(rows)) and rows[handed].depth <= deepest:
                handed += 1
            entries.extend(rows[:handed])
            rest = rows[handed:]
            head = rest[0].depth if rest else None
            raised = hosts.heads.get(host_id)
            if raised is not None and self._raised_at.get(host_id, 0) > raises:  # a commit came in meanwhile
                head = raised if head is None else min(head, raised)
                rest = []
            ahead.keep(host_id, rest[:extra])
            hosts.set_head(host_id, head)
        return entries

    async def _wake_retries(self, now: float) -> None:
        due = [host_id for host_id, at in self._retry_at.items() if at <= now]
        if not due:
            return
        for host_id in due:
            del self._retry_at[host_id]
        heads, later = await self._db.run(heads_of, due, now)
        self._raise_heads(heads)
        for host_id, at in later:
            self._retry_later(host_id, at)

    def _retry_later(self, host_id: int, at: float) -> None:
        current = self._retry_at.get(host_id)
        if current is None or at < current:
            self._retry_at[host_id] = at

    # -- completing -------------------------------------------------------------------------------

    async def complete(
        self, batch: Sequence[Completion], checkpoint: Mapping[str, int], site_files: Sequence[Resource] = ()
    ) -> None:
        fresh = self._seen.fresh(child for item in batch for child in item.children)
        claims, self._unrecorded = self._unrecorded, []
        with self._write(fresh) as seq:
            changed = await self._db.run(
                self._complete_rows, batch, fresh, claims, checkpoint, site_files, seq, time.time()
            )
            self._raise_heads(changed)
        for item in batch:
            self._claimed[self._host_ids[item.entry.host]].discard(item.entry.fp)
            if item.verdict == "retry":
                host_id = self._host_ids[item.entry.host]
                self._retry_later(host_id, item.not_before or 0.0)
            elif item.verdict == "done":
                self._done += 1
        self._running -= len(batch)

    def _complete_rows(
        self,
        conn: sqlite3.Connection,
        batch: Sequence[Completion],
        fresh: list[NewURL],
        claims: list[tuple[int, float, int]],
        checkpoint: Mapping[str, int],
        site_files: Sequence[Resource],
        seq: int,
        now: float,
    ) -> list[Row]:
        crawl = self._crawl
        with transaction(conn):
            conn.executemany(
                "UPDATE urls SET state = 1, claim_seq = ?, updated_at = ? WHERE crawl_id = ? AND fp = ? AND state = 0",
                [(claim_seq, at, crawl, fp) for claim_seq, at, fp in claims],
            )
            changed = self._insert_urls(conn, fresh, seq, now)
            conn.executemany(
                "UPDATE urls SET state = ?, reason = ?, not_before = ?, attempts = attempts + 1, updated_at = ? "
                "WHERE crawl_id = ? AND fp = ?",
                [
                    (_STATE[item.verdict], item.reason, item.not_before or 0.0, now, crawl, item.entry.fp)
                    for item in batch
                ],
            )
            record_batch(conn, crawl, [Completed(item) for item in batch], self._near_distance)
            record_site_files(conn, crawl, site_files)
            if self._importance:
                conn.executemany(_CASH, [(share, crawl, fp) for fp, share in shares(batch).items()])
            conn.executemany(
                "INSERT INTO warc_files(crawl_id, name, committed_end) VALUES (?, ?, ?) "
                "ON CONFLICT(crawl_id, name) DO UPDATE SET committed_end = excluded.committed_end",
                [(crawl, name, end) for name, end in checkpoint.items()],
            )
        return changed

    # -- state ------------------------------------------------------------------------------------

    async def counts(self) -> FrontierCounts:
        counts = await self._db.read(count_rows, self._crawl)
        unrecorded = len(self._unrecorded)  # handed out, still waiting in the database
        counts.waiting -= unrecorded
        counts.running += unrecorded
        return counts

    def done_count(self) -> int:
        return self._done

    @property
    def running(self) -> int:
        """URLs handed out by this process and not yet completed."""
        return self._running

    def exhausted(self) -> bool:
        return not self._hosts and not self._retry_at and self._running == 0

    def next_wakeup(self) -> float | None:
        self._wake_ready()
        if not self._hosts and not self._retry_at:
            return None
        if self._hosts.awake:
            return 0.0
        waits = [at - time.monotonic() for at in (self._hosts.next_wake(),) if at is not None]
        waits.extend(at - time.time() for at in self._retry_at.values())
        return max(0.0, min(waits)) if waits else None

    async def close(self) -> None:
        await self._db.run(self._release_running)

    def _release_running(self, conn: sqlite3.Connection) -> None:
        with transaction(conn):
            conn.execute("UPDATE urls SET state = 0 WHERE crawl_id = ? AND state = 1", (self._crawl,))


def _shallowest(writing: list[dict[str, int]], host: str) -> int:
    """The smallest depth the writes in flight bring to `host` (`_DEEPEST` when none brings it any URL)."""
    return min((shallowest.get(host, _DEEPEST) for shallowest in writing), default=_DEEPEST)


_STATE = {"done": State.DONE, "failed": State.FAILED, "retry": State.WAITING}


def create_temp_tables(conn: sqlite3.Connection) -> None:
    """The per-connection scratch table `_insert_urls` fills before one INSERT … SELECT."""
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS new_urls(fp INTEGER, url TEXT, host_id INTEGER, depth INTEGER, "
        "kind TEXT, referrer_fp INTEGER, via TEXT)"
    )
