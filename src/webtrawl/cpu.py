"""Where a crawl's CPU went, by stage: the split `make bench` prints, so a regression shows where it landed.

Most stages own a thread, whose CPU clock the kernel keeps at no cost to the crawl: the archive thread
(WARC, mirror), the database's writer and reader threads (the frontier's batches and claims, and the search
index, timed apart). Parsing (decoding included) and hashing (SimHash; the payload digest of a re-fetch) are
timed where they run (`Stats.cpu`): on the event loop's thread, or in the parse worker process, which
reports its own clock. What else the loop does is fetching (aiohttp, the scheduler, judging a page), and what
no named thread did (DNS resolution threads, the parse worker's pickling and pipe, the browser's driver) is
`other`.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Iterable, Mapping

STAGES = ("fetch", "parse", "hashing", "archive", "database", "index", "other")


def thread_seconds(ident: int | None) -> float:
    """CPU seconds a live thread (by `threading.get_ident()`) has used; 0 when the platform cannot tell."""
    if ident is None:
        return 0.0
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (AttributeError, OSError):
        return 0.0


def process_seconds() -> float:
    """CPU seconds of this process, and of the children it has reaped."""
    own = os.times()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.user + own.system + children.ru_utime + children.ru_stime


def split(
    timed: Mapping[str, float],
    *,
    loop: float,
    archive: float,
    database: float,
    total: float,
    away: float = 0.0,
    stages: Iterable[str] = STAGES,
) -> dict[str, float]:
    """CPU seconds by stage, from the sections timed on the loop or in a worker process (`parse`, `hashing`;
    `away` seconds of them in the worker) and on the database thread (`index`), and the loop's, archive's,
    database threads' and the process's clocks (`total`: with the children it has reaped, such as the
    parse worker once the run closed it)."""
    parse, hashing, index = timed.get("parse", 0.0), timed.get("hashing", 0.0), timed.get("index", 0.0)
    found = {
        "fetch": max(0.0, loop - (parse + hashing - away)),
        "parse": parse,
        "hashing": hashing,
        "archive": archive,
        "database": max(0.0, database - index),
        "index": index,
    }
    found["other"] = max(0.0, total - loop - archive - database - away)
    return {stage: round(found.get(stage, 0.0), 6) for stage in stages}


def current_thread(*_args: object) -> int:
    """The calling thread's ident (`threading.get_ident`), for running on another thread (its arguments are
    ignored: a database call passes the connection)."""
    return threading.get_ident()


class StageClocks:
    """The clocks of one run, started with it: the loop's (the thread that builds it) and the process's, and
    the ids of the archive thread and the database's threads (writer, reader), set as they start."""

    def __init__(self) -> None:
        self._loop = time.thread_time()
        self._process = process_seconds()
        self.archive: int | None = None
        self.database: tuple[int, ...] = ()

    def split(self, timed: Mapping[str, float], away: float = 0.0) -> dict[str, float]:
        """CPU seconds by stage so far (`split`); call it on the loop's thread, while the others still run."""
        return split(
            timed,
            away=away,
            loop=time.thread_time() - self._loop,
            archive=thread_seconds(self.archive),
            database=sum(map(thread_seconds, self.database)),
            total=process_seconds() - self._process,
        )
