"""`kill -USR1 PID` on a crawling process writes where it is to its stderr: every thread, every asyncio task.

A crawl that seems stuck (no progress, a stop that does not end) is most often a task waiting on something
that will not come; the task stacks say which. The threads' stacks come first and at once, from the signal
handler, so they appear even when the event loop itself is blocked; the tasks' stacks are written by the loop.
A dump's first line names its process: a coordinator passes the signal on to its own node (`passed_on`),
which writes its stacks after the coordinator's, to the same stderr.
"""

from __future__ import annotations

import asyncio
import faulthandler
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

SIGNAL = signal.SIGUSR1
HEADER = "webtrawl: stacks of every thread and task"


@contextmanager
def on_signal() -> Iterator[None]:
    """While the block runs (on the event loop), SIGUSR1 writes the stacks; the old handler comes back after."""
    loop = asyncio.get_running_loop()

    def handle(signum: int, frame: FrameType | None) -> None:
        print(f"\n{HEADER} (pid {os.getpid()})", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        loop.call_soon_threadsafe(_print_tasks)

    previous = signal.signal(SIGNAL, handle)
    try:
        yield
    finally:
        signal.signal(SIGNAL, previous)


@contextmanager
def passed_on(send: Callable[[signal.Signals], None]) -> Iterator[None]:
    """While the block runs (on the event loop), SIGUSR1 also reaches another process through `send` (the node a
    coordinator started, `cluster.ownnode`), once this process has written its own stacks: the two share a
    stderr, where written at once they would interleave. A loop too blocked to write its tasks passes nothing
    on, but its threads' stacks, written at once, show where it is stuck."""
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(SIGNAL)

    def handle(signum: int, frame: FrameType | None) -> None:
        if callable(previous):
            previous(signum, frame)
        loop.call_soon_threadsafe(send, SIGNAL)  # behind the tasks' stacks, which `on_signal` hands to the loop

    signal.signal(SIGNAL, handle)
    try:
        yield
    finally:
        signal.signal(SIGNAL, previous)


def _print_tasks() -> None:
    tasks = asyncio.all_tasks()
    print(f"{len(tasks)} asyncio task(s), outermost call first:", file=sys.stderr)
    for task in tasks:
        print(f"-- {task.get_name()}", file=sys.stderr)
        for line in _await_chain(task.get_coro()):
            print(f"  {line}", file=sys.stderr)
    sys.stderr.flush()


def _await_chain(coro: object) -> Iterator[str]:
    """Each coroutine down the chain of awaits, to what the task waits on: `Task.print_stack` shows only the
    outermost frame of a coroutine, which says little (every loop waits in `run`)."""
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            yield f"waiting on {coro!r}"
            return
        yield f'File "{frame.f_code.co_filename}", line {frame.f_lineno}, in {frame.f_code.co_name}'
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
