"""The crawl directory: its lock, and its SQLite database driven from one writer thread.

SQLite calls block, so the crawl never makes them on the event loop: every write goes through
`Database.run`, which executes it on a single dedicated thread (one connection, so no locking between
our own writers, and calls run in the order they were made). Reads that must not wait behind a batch's
transaction or the search index's catch-up (a claim of the next URLs to fetch) go through `Database.read`,
on a second thread with a read-only connection: WAL lets it read the last commit while the writer works.
Readers in other processes (status, export, the dashboard) open their own read-only connections.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from ..errors import StoreError, StoreLocked
from .schema import MIGRATIONS

P = ParamSpec("P")
T = TypeVar("T")

DB_NAME = "crawl.db"
NODE_DB = "node.db"
"""A distributed crawl's node writes its shard here: a coordinator and its own node share a directory, and
two writers on one file would wait for each other."""
LOCK_NAME = ".webtrawl.lock"


class DirectoryLock:
    """An exclusive lock on a crawl directory, held for the life of the process that owns the crawl.

    `flock` is released by the kernel when the process dies, so a killed crawl never leaves a stale lock. It
    belongs to the open file, not to a process: a child started with its descriptor (`fd`) holds it too, so
    the directory stays locked until both are gone, and the file names the parent; the child's lock is built
    with that descriptor (`adopted`) to open the directory as its own.
    """

    def __init__(self, directory: Path, *, adopted: int | None = None) -> None:
        """`adopted`: the descriptor of this lock a parent holds and handed down (`cluster.ownnode`); acquiring
        takes it, which the parent holds already, instead of failing on it."""
        self._path = directory / LOCK_NAME
        self._adopted = adopted
        self._fd: int | None = None

    @property
    def fd(self) -> int:
        """The locked file's descriptor, to hand down to a child, whose lock is built with it (`adopted`)."""
        assert self._fd is not None, "the lock is not held"
        return self._fd

    def acquire(self) -> None:
        adopted = self._adopted
        if adopted is not None and not os.path.samestat(os.fstat(adopted), os.stat(self._path)):
            raise StoreError(f"the lock handed down is not {self._path}'s")
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644) if adopted is None else adopted
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise StoreLocked(
                f"{self._path.parent} is in use by a running crawl (pid {holder}); "
                "wait for it to finish or stop it first"
            ) from None
        if adopted is None:  # an adopted lock keeps naming its parent: the process the user started
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @staticmethod
    def held(directory: Path) -> bool:
        """Whether a process owns `directory` now (asked without taking it: a shared lock fails on it)."""
        return DirectoryLock.holder(directory) is not None

    @staticmethod
    def holder(directory: Path) -> str | None:
        """The pid of the process that owns `directory` now, as its lock file names it; None when none does."""
        try:
            fd = os.open(directory / LOCK_NAME, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.read(fd, 64).decode(errors="replace").strip() or "unknown"
        finally:
            os.close(fd)
        return None


def prepare_directory(directory: Path) -> Path:
    """Create the crawl directory if needed and check it is writable; errors become StoreError."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise StoreError(f"{directory} is a file: a crawl needs a directory (a new one, or an earlier crawl's)")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".webtrawl-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise StoreError(f"cannot write to {directory}: {exc.strerror or exc}") from None
    return directory


def disk_full(path: Path) -> StoreError:
    return StoreError(f"the disk holding {path} is full; free some space and run the same command again to resume")


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open the crawl database with the settings every connection needs, migrating it when writable."""
    if readonly and not path.exists():
        raise StoreError(f"no crawl database at {path}")
    try:
        if readonly:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, check_same_thread=False)
        else:
            conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = OFF")
            migrate(conn)
        conn.execute("PRAGMA cache_size = -32768")  # KiB: random index writes need a warm cache
    except sqlite3.DatabaseError as exc:
        if "full" in str(exc):
            raise disk_full(path) from None
        raise StoreError(f"cannot open {path}: {exc}") from None
    return conn


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the migrations the database has not seen yet, each in its own transaction."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > len(MIGRATIONS):
        raise StoreError(
            f"the crawl database is from a newer webtrawl (schema {version}, this one knows {len(MIGRATIONS)})"
        )
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        conn.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")


class Database:
    """The crawl database, written only from its own writer thread and read beside it from a reader thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webtrawl-db")
        self._conn: sqlite3.Connection | None = None
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webtrawl-db-read")
        self._read_conn: sqlite3.Connection | None = None

    async def open(self) -> Database:
        self._conn = await self._submit(self._executor, connect, self.path)  # first: it creates and migrates
        self._read_conn = await self._submit(self._reader, _connect_reader, self.path)
        return self

    async def run(self, fn: Callable[Concatenate[sqlite3.Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run `fn(conn, *args)` on the writer thread; sqlite errors come back as StoreError."""
        conn = self._conn
        if conn is None:
            raise StoreError("the crawl database is closed")
        return await self._submit(self._executor, fn, conn, *args, **kwargs)

    async def read(self, fn: Callable[Concatenate[sqlite3.Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run the read-only `fn(conn, *args)` on the reader thread: it sees the last committed transaction,
        not one the writer thread is in, and does not wait for it."""
        conn = self._read_conn
        if conn is None:
            raise StoreError("the crawl database is closed")
        return await self._submit(self._reader, fn, conn, *args, **kwargs)

    async def _submit(self, executor: ThreadPoolExecutor, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(executor, lambda: fn(*args, **kwargs))
        except sqlite3.OperationalError as exc:
            if "full" in str(exc):
                raise disk_full(self.path) from exc
            raise StoreError(f"crawl database error: {exc}") from exc

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        if self._read_conn is not None:  # first: a reader would keep the checkpoint from truncating the WAL
            read_conn, self._read_conn = self._read_conn, None
            await loop.run_in_executor(self._reader, read_conn.close)
        self._reader.shutdown(wait=True)
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await loop.run_in_executor(self._executor, _close, conn)
        self._executor.shutdown(wait=True)


def _connect_reader(path: Path) -> sqlite3.Connection:
    conn = connect(path, readonly=True)
    conn.execute("PRAGMA cache_size = -8192")  # KiB: it reads the waiting URLs' index, which stays small
    return conn


def _close(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error as exc:  # e.g. a full disk: the WAL stays and is checkpointed next time
        logging.getLogger(__name__).warning("could not checkpoint the crawl database: %s", exc)
    finally:
        conn.close()


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`with transaction(conn):` BEGIN IMMEDIATE … COMMIT, rolled back on any error.

    Connections run in autocommit mode (isolation_level=None) so every transaction is explicit.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
