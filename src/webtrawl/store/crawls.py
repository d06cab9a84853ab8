"""The crawls of a directory: each has a name, an identity checked on resume, and its scope additions."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from typing import Any

from ..errors import IdentityMismatch, StoreError
from ..urls import NORMALIZATION_CHANGES
from .db import transaction


def open_crawl(
    conn: sqlite3.Connection, name: str, identity: dict[str, Any], *, add_seeds: bool = False
) -> tuple[int, list[str]]:
    """Create the crawl `name` or resume it; returns its id and the hosts its seeds redirected to.

    A resume with a different identity is refused, naming what differs, because mixing two scopes in one
    frontier would silently change what the crawl contains. With `add_seeds`, seeds it does not have yet join
    it (the user asked for that scope to grow), when nothing else differs.
    """
    identity = json.loads(json.dumps(identity))  # compare as stored: tuples become lists
    row = conn.execute("SELECT id, identity, extra_hosts FROM crawls WHERE name = ?", (name,)).fetchone()
    if row is None:
        with transaction(conn):
            cur = conn.execute(
                "INSERT INTO crawls(name, identity, created_at) VALUES (?, ?, ?)",
                (name, json.dumps(identity, sort_keys=True), time.time()),
            )
        assert cur.lastrowid is not None
        return cur.lastrowid, []
    crawl_id, stored, extra = row
    known = json.loads(stored)
    if isinstance(known.get("seeds"), list):  # coordinators before `store.opened` kept a seed given twice twice
        known["seeds"] = sorted(set(known["seeds"]))
    if known.get("normalization") != identity.get("normalization"):
        raise IdentityMismatch(_renormalized(name, known.get("normalization"), identity.get("normalization")))
    seeds = sorted(set(known.get("seeds", [])) | set(identity.get("seeds", [])))  # fewer seeds: it keeps its own
    found = differences({**known, "seeds": seeds}, {**identity, "seeds": seeds})
    if found:
        raise IdentityMismatch(
            f"crawl {name!r} in this directory was started with other settings ({'; '.join(found)}); "
            "use the same ones to resume, or another --name / --out for a new crawl"
        )
    if seeds != known.get("seeds"):
        if not add_seeds:
            added = ", ".join(seed for seed in seeds if seed not in known.get("seeds", []))
            raise IdentityMismatch(
                f"crawl {name!r} in this directory was started with other seeds (new here: {added}); give "
                "--add-seeds to add them to it (its scope grows to their hosts), or another --name / --out "
                "for a new crawl"
            )
        with transaction(conn):
            conn.execute("UPDATE crawls SET identity = ? WHERE id = ?", (json.dumps({**known, "seeds": seeds},
                         sort_keys=True), crawl_id))  # fmt: skip
    return crawl_id, json.loads(extra)


def _renormalized(name: str, was: Any, now: Any) -> str:
    """Why a crawl begun by a webtrawl that wrote URLs another way cannot go on here, and what to do."""
    if isinstance(was, int) and isinstance(now, int) and was < now:
        changed = "; ".join(NORMALIZATION_CHANGES[v] for v in sorted(NORMALIZATION_CHANGES) if was < v <= now)
        by = f"an older webtrawl (URL normalization {was}; since then {changed})"
    else:
        by = f"another webtrawl (URL normalization {was}, this one's is {now})"
    return (
        f"crawl {name!r} in this directory was started by {by}: its frontier would not recognize the URLs "
        "this one finds. Resume it with the webtrawl version that started it, or start a new crawl here with "
        "another --name, or in another --out"
    )


def differences(stored: dict[str, Any], wanted: dict[str, Any], prefix: str = "") -> list[str]:
    """What differs between two settings documents, one "key: was X, now Y" per field."""
    found = []
    for key in sorted(set(stored) | set(wanted)):
        old, new = stored.get(key), wanted.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            found.extend(differences(old, new, f"{prefix}{key}."))
        elif old != new:
            found.append(f"{prefix}{key}: was {old!r}, now {new!r}")
    return found


def crawl_seeds(conn: sqlite3.Connection, crawl_id: int) -> list[str]:
    """Every seed of the crawl, normalized, sorted (those of earlier runs and those added since)."""
    (identity,) = conn.execute("SELECT identity FROM crawls WHERE id = ?", (crawl_id,)).fetchone()
    return list(json.loads(identity).get("seeds", []))


def extra_hosts(conn: sqlite3.Connection, crawl_id: int) -> list[str]:
    """The hosts the crawl's scope gained since it started (its seeds redirected to them), in that order."""
    (extra,) = conn.execute("SELECT extra_hosts FROM crawls WHERE id = ?", (crawl_id,)).fetchone()
    return list(json.loads(extra))


def add_extra_hosts(conn: sqlite3.Connection, crawl_id: int, gained: Iterable[str]) -> None:
    """Remember hosts the scope gained (inside the caller's transaction: they come with the results that
    gained them)."""
    gained = list(dict.fromkeys(gained))
    if not gained:  # the common case: a batch without a seed that redirected elsewhere
        return
    hosts = extra_hosts(conn, crawl_id)
    new = [host for host in gained if host not in hosts]
    if new:
        conn.execute("UPDATE crawls SET extra_hosts = ? WHERE id = ?", (json.dumps(hosts + new), crawl_id))


def committed_warcs(conn: sqlite3.Connection, crawl_id: int) -> dict[str, int]:
    return dict(conn.execute("SELECT name, committed_end FROM warc_files WHERE crawl_id = ?", (crawl_id,)).fetchall())


DEFAULT_NAME = "default"


def crawl_name(conn: sqlite3.Connection, name: str | None) -> str:
    """`name`, or without one the directory's only crawl (or else the one named "default"); an unknown name is
    an error that lists the names there are."""
    names = [n for (n,) in conn.execute("SELECT name FROM crawls ORDER BY name")]
    if name is None:
        if len(names) == 1:
            return str(names[0])
        if len(names) > 1 and DEFAULT_NAME not in names:
            raise StoreError(f"this directory holds several crawls: give --name ({', '.join(names)})")
        name = DEFAULT_NAME
    if name not in names:
        raise StoreError(f"no crawl named {name!r} here (crawls: {', '.join(names) if names else 'none'})")
    return name


def crawl_id_of(conn: sqlite3.Connection, name: str | None) -> int:
    """The id of crawl `name` (see `crawl_name`): one indexed read when the name is there, as it mostly is
    (the dashboard asks on every request)."""
    row = conn.execute("SELECT id FROM crawls WHERE name = ?", (name,)).fetchone() if name is not None else None
    if row is None:
        row = conn.execute("SELECT id FROM crawls WHERE name = ?", (crawl_name(conn, name),)).fetchone()
    return int(row[0])
