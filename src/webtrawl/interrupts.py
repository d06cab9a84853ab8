"""Ctrl-C and SIGTERM for a command that crawls, for its whole life: passes, reports and the waits between.

The first one stops a crawl that is running gracefully (`stopping`: fetches in flight get `STOP_GRACE`
seconds to finish and are committed, a slower one and the rest wait for the next run); at any other moment
(setting up, waiting for a lease or for Redis, sleeping before the next `--every` pass) it cancels the
command's main task. A second one ends the process at once: the crawl directory is crash-safe, and a
distributed crawl's in-flight URLs return to waiting when their leases expire.

The handlers are Python's own (`signal.signal`), not the event loop's: a loop handler runs only once the loop
gets control back and is gone when `asyncio.run` returns, so a Ctrl-C while a report is being written (to a
full pipe, a terminal paused with Ctrl-S) or between passes came late, was swallowed, or surfaced as
click's "Aborted!". A Python handler runs as soon as the main thread is between two bytecodes (a blocked
write is interrupted, the handler runs, the write resumes: PEP 475), so `requested` is already true when
that write returns; what must run on the loop is handed to it with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

from . import stackdump
from .crawler import STOP_GRACE

SIGNALS = (signal.SIGINT, signal.SIGTERM)
T = TypeVar("T")


class Interrupts:
    """Install with `with Interrupts(say):` in the command's main task; the old handlers come back on exit."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self._loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        self._count = 0
        self._stop: Callable[[], None] | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """Whether a Ctrl-C or SIGTERM came: true from the moment the signal was taken, before the loop knows."""
        return self._count > 0

    def __enter__(self) -> Interrupts:
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)

    @contextmanager
    def stopping(self, stop: Callable[[], None]) -> Iterator[None]:
        """While the block runs, an interrupt calls `stop` on the loop (at once if one came already)."""
        self._stop = stop
        try:
            if self.requested:
                stop()
            yield
        finally:
            self._stop = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        # Runs between two bytecodes of whatever the main thread was doing: count and hand over, nothing more.
        self._count += 1
        if self._count > 1:
            os._exit(130)
        self._loop.call_soon_threadsafe(self._interrupted)

    def _interrupted(self) -> None:
        if self._stop is not None:
            self._say(
                f"\nstopping: fetches in flight get up to {STOP_GRACE:.0f} s to finish (a slower one is fetched "
                "again next run); Ctrl-C again to quit at once"
            )
            self._stop()
        elif self._main is not None:
            self._main.cancel()


async def interruptible(job: Callable[[Interrupts], Awaitable[T]], say: Callable[[str], None]) -> T | None:
    """Run `job` under the command's Ctrl-C handling; None when an interrupt cancelled it (outside a running
    crawl: setting up, waiting for Redis, between passes). Meanwhile SIGUSR1 writes its stacks (`stackdump`)."""
    with Interrupts(say) as interrupts, stackdump.on_signal():
        try:
            return await job(interrupts)
        except asyncio.CancelledError:
            if not interrupts.requested:
                raise
            return None
