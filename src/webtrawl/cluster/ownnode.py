"""The coordinator's own node: a `webtrawl worker` process that `webtrawl crawl --redis` starts beside itself.

Crawling and gathering run in two processes so that they run on two cores. In one process, the node's
fetching and archiving and the coordinator's gathering (decoding entries, the ingest's transactions, the
search index's catch-up) took turns under one interpreter lock: one node made 0.68–0.87× the pages/s of an
embedded crawl, and 0.88–0.92× as two processes (benchmarks/README.md, "Distributed on Redis").

The node is an ordinary worker, started with `--attached` in the coordinator's directory (it takes the
directory's lock and writes its WARC files there; the coordinator writes its index beside them). It reads
one-word commands from its stdin, which the coordinator writes:
- `finished`: the end the coordinator declared, obeyed at once instead of at the node's next heartbeat;
- `leave`: stop gracefully (fetches in flight finish, the partitions are given back), for the coordinator's
  Ctrl-C, an idle pass, or the coordinator's own failure.
Its stdin closing means the coordinator is gone (killed): the node exits at once (once its set-up is done),
as it did when it lived in the coordinator's process, and its URLs in flight return to waiting when their
leases expire. It runs in a session of its own, so a terminal's Ctrl-C reaches the coordinator alone, which
tells it; a signal sent to the node itself stops it as it stops any worker (exit code 130).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable

from ..config import CrawlConfig
from ..errors import NodeExited
from ..logs import JsonFormatter
from .node import Node

INTERRUPTED = 130
"""The exit code of a worker that stopped before the crawl ended (`webtrawl worker`)."""
LEAVE_WAIT = 30.0
"""Seconds a failing coordinator gives its node to leave gracefully before it kills it: a fetch's timeout."""


class OwnNode:
    """The coordinator's side: starts the node, tells it commands, waits for it."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @classmethod
    async def start(cls, redis_url: str, config: CrawlConfig) -> OwnNode:
        command = [sys.executable, "-m", "webtrawl", "worker", "--redis", redis_url, "--name", config.name]
        command += ["--out", str(config.out), "--concurrency", str(config.concurrency), "--quiet", "--attached"]
        command += _logging_flags()
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,  # its summary line; the coordinator reports the node
            start_new_session=True,
        )
        return cls(process)

    def tell(self, command: str) -> None:
        """Send `finished` or `leave`; a node that has exited already needs neither."""
        stdin = self._process.stdin
        assert stdin is not None
        if not stdin.is_closing():
            stdin.write(f"{command}\n".encode())

    async def wait(self) -> None:
        """Until the node exits; NodeExited if it failed. Cancelled (the coordinator fails), it tells the node
        to leave, which gives its partitions back at once, and waits for it (killing it after `LEAVE_WAIT`)."""
        try:
            code = await self._process.wait()
        except asyncio.CancelledError:
            await asyncio.shield(self._leave())
            raise
        if code not in (0, INTERRUPTED):
            raise NodeExited(
                f"this crawl's node (webtrawl worker, pid {self._process.pid}) exited with code {code}; "
                "its messages are above"
            )

    async def _leave(self) -> None:
        if self._process.returncode is None:
            self.tell("leave")
            try:
                await asyncio.wait_for(self._process.wait(), LEAVE_WAIT)
            except TimeoutError:
                self._process.send_signal(signal.SIGKILL)
                await self._process.wait()


@contextlib.asynccontextmanager
async def following_coordinator(node: Node, pipe: int) -> AsyncIterator[None]:
    """The node's side, while the block runs: obey the commands read from `pipe` (a file descriptor, the
    node's stdin); exit at once if the coordinator closes it (it died)."""
    loop = asyncio.get_running_loop()
    commands: dict[bytes, Callable[[], None]] = {
        b"finished": lambda: node.tell("finished"),
        b"leave": node.crawler.stop,
    }
    reader = os.fdopen(pipe, "rb", buffering=0, closefd=False)
    transport, _protocol = await loop.connect_read_pipe(lambda: _Commands(commands), reader)
    try:
        yield
    finally:
        transport.close()  # not an end of file: the node is done, the coordinator may live on


class _Commands(asyncio.Protocol):
    def __init__(self, commands: dict[bytes, Callable[[], None]]) -> None:
        self._commands = commands
        self._pending = b""

    def data_received(self, data: bytes) -> None:
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            command = self._commands.get(line.strip())
            if command is not None:
                command()

    def eof_received(self) -> bool:
        os._exit(1)  # the coordinator died: so does its node, without a report it would never read


def _logging_flags() -> list[str]:
    """The worker flags that make the node log as this process was set up to (`logs.setup_logging`)."""
    root = logging.getLogger()
    flags = ["--verbose"] if root.isEnabledFor(logging.INFO) else []
    if any(isinstance(handler.formatter, JsonFormatter) for handler in root.handlers):
        flags += ["--log-format", "json"]
    return flags
