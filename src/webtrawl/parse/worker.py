"""A child process that reads pages (`analysis.analyze`) for the crawl, over its stdin and stdout.

It is started as `python -m webtrawl.parse`, not through `multiprocessing`: spawning by
`multiprocessing` imports the parent's main module again, which fails in a user's script that calls
`webtrawl.crawl` without an `if __name__ == "__main__"` guard, and its executor adds two threads to the
crawl's process that wake for every page. Here the loop talks to the child itself: each request and each
answer is one frame, a 4-byte length and a pickle, answered in order.

The child lives as long as the crawl: it runs in a session of its own, so the terminal's Ctrl-C goes to
the crawl alone (which finishes the pages in flight, and they need the child); it exits when the crawl
closes the pipe, and within a second of the crawl's end however that came, even in the middle of a page.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pickle
import signal
import struct
import sys
import threading
import time
from collections import deque
from typing import BinaryIO

from .analysis import Analysis, PageInput, analyze

_LENGTH = struct.Struct("!I")
PIPE_SIZE = 1 << 20
"""Bytes each pipe to and from the child holds (1 MB: Linux lets any process ask this much)."""


class WorkerDied(Exception):
    """The child ended (killed, out of memory, crashed) before it answered. `reading`: it was reading this
    page then (the others were only waiting behind it)."""

    def __init__(self, message: str, *, reading: bool = False) -> None:
        super().__init__(message)
        self.reading = reading


class ReadingFailed(Exception):
    """Reading the page raised in the child (a bug, told with the original exception's repr); the child
    goes on with the next page."""


class ParseWorker:
    """One child process; `await worker.analyze(page, max_tags)` is `analyze(page, max_tags)` run there."""

    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: deque[asyncio.Future[Analysis | None]] = deque()
        self._starting = asyncio.Lock()  # pages asked for at once must not start a child each
        self._ended = False

    async def analyze(self, page: PageInput, max_tags: int | None = None) -> Analysis | None:
        """Raises `WorkerDied` when the child ends first; it is then done for, and a new one must be used."""
        data = pickle.dumps((page, max_tags), pickle.HIGHEST_PROTOCOL)
        process = await self._started()
        if self._ended:  # it died with no page waiting: nothing would ever answer this one
            raise WorkerDied("the HTML parser's process ended")
        # No await from here to the write: answers come in the order of `_waiting`, which must be the
        # order the frames were written.
        answer = asyncio.get_running_loop().create_future()
        self._waiting.append(answer)
        assert process.stdin is not None
        try:
            process.stdin.write(_LENGTH.pack(len(data)) + data)
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the reader finds the end of the child and fails every waiting answer, this one included
        return await answer

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    async def _started(self) -> asyncio.subprocess.Process:
        async with self._starting:
            if self._process is None:
                self._process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    __package__ or "webtrawl.parse",
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    start_new_session=True,  # the terminal's Ctrl-C is the crawl's to handle
                )
                self._reader = asyncio.create_task(self._read(self._process))
            return self._process

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        try:
            while True:
                (length,) = _LENGTH.unpack(await process.stdout.readexactly(_LENGTH.size))
                answer: Analysis | str | None = pickle.loads(await process.stdout.readexactly(length))
                waiting = self._waiting.popleft()
                if waiting.done():  # its caller was cancelled
                    continue
                if isinstance(answer, str):
                    waiting.set_exception(ReadingFailed(answer))
                else:
                    waiting.set_result(answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._ended, reading = True, True
            while self._waiting:
                waiting = self._waiting.popleft()
                if not waiting.done():
                    waiting.set_exception(WorkerDied("the HTML parser's process ended", reading=reading))
                reading = False

    def kill(self) -> None:
        """Stop the child now, busy or not; answers not given fail with `WorkerDied`."""
        if self._process is not None and self._process.returncode is None:
            self._process.kill()

    async def close(self) -> None:
        """Let the child finish what it was asked and exit, and reap it (its CPU then counts as the
        crawl's: `cpu.process_seconds`)."""
        process, reader = self._process, self._reader
        if process is None or reader is None:
            return
        if reader.done():  # nothing reads its answers any more: it may be blocked writing one
            self.kill()
        assert process.stdin is not None
        process.stdin.close()
        with contextlib.suppress(ConnectionError):
            await process.stdin.wait_closed()
        await asyncio.wait([reader])
        await process.wait()


def _outlive_no_parent(parent: int) -> None:
    """Exit as soon as the crawl is gone, even mid-page (a hostile page may take hours to parse, and a crawl
    killed with -9 never closes the pipe): lexbor releases the GIL while it parses, so this thread runs."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    """Answer frames from `requests` until it ends."""
    while len(header := requests.read(_LENGTH.size)) == _LENGTH.size:
        (length,) = _LENGTH.unpack(header)
        frame = requests.read(length)
        if len(frame) < length:  # the crawl ended in the middle of a frame
            return
        page, max_tags = pickle.loads(frame)
        answer: Analysis | str | None
        try:
            answer = analyze(page, max_tags)
        except Exception as exc:  # one page's bug must not end the others' reading
            answer = repr(exc)[:300]
        if isinstance(answer, Analysis):
            answer.away = True
        data = pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
        answers.write(_LENGTH.pack(len(data)) + data)
        answers.flush()


def _widen(pipes: tuple[int, ...]) -> None:
    """Let each pipe hold about 25 pages (1 MB) instead of 3 (64 KB, Linux's default): with the default, the
    crawl's loop wrote a page in several pieces and the child stopped at every answer until the loop came
    back to read it (a fifth of the child's time was spent blocked writing)."""
    for pipe in pipes:
        with contextlib.suppress(AttributeError, OSError):  # not Linux, or over the system's pipe-max-size
            fcntl.fcntl(pipe, fcntl.F_SETPIPE_SZ, PIPE_SIZE)


def main() -> None:
    _widen((sys.stdin.fileno(), sys.stdout.fileno()))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_outlive_no_parent, args=(os.getppid(),), daemon=True).start()
    answers = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the frames
    serve(sys.stdin.buffer, answers)
