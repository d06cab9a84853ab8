"""The media index: one row per media task that ended (a file collected, a duplicate, or a failure).

Rows are written in the transaction that completes the task's frontier entry (`insert_media`), so a file
is in the index exactly when its task is done; the file itself was renamed into place before that.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import fields

from ..models import MediaFile

_COLUMNS = tuple(f.name for f in fields(MediaFile))


def insert_media(
    conn: sqlite3.Connection, crawl_id: int, rows: Iterable[tuple[int, MediaFile]], node: str | None = None
) -> None:
    """Record ended tasks by their entry's fingerprint; a task recorded again (a re-run) replaces its row."""
    names = ", ".join(_COLUMNS)
    marks = ", ".join("?" for _ in _COLUMNS)
    updates = ", ".join(f"{name} = excluded.{name}" for name in (*_COLUMNS, "node"))
    conn.executemany(
        f"INSERT INTO media(crawl_id, fp, node, {names}) VALUES (?, ?, ?, {marks}) "
        f"ON CONFLICT(crawl_id, fp) DO UPDATE SET {updates}",
        [(crawl_id, fp, node, *(getattr(media, name) for name in _COLUMNS)) for fp, media in rows],
    )


def stored_with_digest(conn: sqlite3.Connection, crawl_id: int, sha256: str) -> str | None:
    """The task of a stored file (not itself a duplicate) with this content, if there is one."""
    row = conn.execute(
        "SELECT task FROM media WHERE crawl_id = ? AND sha256 = ? AND path IS NOT NULL ORDER BY id LIMIT 1",
        (crawl_id, sha256),
    ).fetchone()
    return row[0] if row else None


def url_of(conn: sqlite3.Connection, crawl_id: int, fp: int) -> str | None:
    """The URL of a frontier entry (the page a media task was found on)."""
    row = conn.execute("SELECT url FROM urls WHERE crawl_id = ? AND fp = ?", (crawl_id, fp)).fetchone()
    return row[0] if row else None


def media_rows(conn: sqlite3.Connection, crawl_id: int) -> Iterator[MediaFile]:
    """Every recorded media task, in the order they ended."""
    names = ", ".join(_COLUMNS)
    for row in conn.execute(f"SELECT {names} FROM media WHERE crawl_id = ? ORDER BY id", (crawl_id,)):
        yield MediaFile(**dict(zip(_COLUMNS, row, strict=True)))


def media_counts(conn: sqlite3.Connection, crawl_id: int) -> dict[str, int]:
    """Files stored, duplicates and failures, and the bytes stored."""
    stored, duplicates, failed, size = conn.execute(
        "SELECT COUNT(path), COUNT(duplicate_of), COUNT(error), "
        "IFNULL(SUM(CASE WHEN path IS NOT NULL THEN size END), 0) FROM media WHERE crawl_id = ?",
        (crawl_id,),
    ).fetchone()
    return {"stored": stored, "duplicates": duplicates, "failed": failed, "bytes": size}
