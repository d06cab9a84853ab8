"""The coordinator's own node: a `webtrawl worker` process that `webtrawl crawl --redis` starts beside itself.

The node runs as a process of its own, like any worker, so the coordinator's own work (watching the
partitions, publishing progress, listing shards) never takes turns with its fetching under one interpreter
lock (when the coordinator still gathered every page, one process made 0.68–0.87× the pages/s of an
embedded crawl, two 0.88–0.92×: benchmarks/README.md, "Distributed on Redis").

The node is an ordinary worker, started with `--attached` in the coordinator's directory (it writes its WARC
files and its shard there, beside the coordinator's own database). The coordinator holds the directory's lock and
hands it down (`--lock-fd`, then the node's `Node.lock_fd`): the lock names the process the user started,
and the directory stays locked while either process lives. The node reads one-word commands from its
stdin, which the coordinator writes:
- `finished`: the end the coordinator declared, obeyed at once instead of at the node's next heartbeat;
- `leave`: stop gracefully (fetches in flight finish, the partitions are given back), for the coordinator's
  Ctrl-C, an idle pass, or the coordinator's own failure.
Its stdin closing means the coordinator is gone (killed): the node exits at once, set-up included, as it did
when it lived in the coordinator's process, and its URLs in flight return to waiting when their leases
expire. Until it has joined the crawl, it waits for a Redis that does not answer, as the coordinator does,
rather than fail the run (`redisconn.joining`).

It runs in a process group of its own, so a terminal's Ctrl-C reaches the coordinator alone, which tells it;
a signal sent to the node itself stops it as it stops any worker (exit code 130). What else the terminal or
the user sends the coordinator is passed on while the node runs: Ctrl-Z stops both, `fg` (SIGCONT)
continues both, and SIGUSR1 has both write their stacks (`stackdump`), one after the other on the stderr
they share. The group is in the coordinator's session, not in a session of its own: a coordinator killed
while stopped (`kill -9 %1` after Ctrl-Z) leaves the node's group orphaned with a stopped process, to which
the kernel sends SIGHUP and SIGCONT, so the node ends instead of staying stopped for ever, holding the
directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from types import FrameType

from .. import stackdump
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
    async def start(cls, redis_url: str, config: CrawlConfig, lock_fd: int) -> OwnNode:
        """`lock_fd`: the descriptor of the directory's lock this process holds, which the node holds too."""
        command = [sys.executable, "-m", "webtrawl", "worker", "--redis", redis_url, "--name", config.name]
        command += ["--out", str(config.out), "--concurrency", str(config.concurrency), "--quiet", "--attached"]
        command += ["--lock-fd", str(lock_fd), *_logging_flags()]
        # SIGUSR1 until the node writes its stacks on it (passed on before, it would end the node); SIGTTOU for
        # good: a terminal set to `tostop` would stop the node, a background group of its session, as it writes.
        with _born_ignoring(stackdump.SIGNAL, signal.SIGTTOU):
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,  # its summary line; the coordinator reports the node
                process_group=0,
                pass_fds=(lock_fd,),
            )
        return cls(process)

    def tell(self, command: str) -> None:
        """Send `finished` or `leave`; a node that has exited already needs neither."""
        stdin = self._process.stdin
        assert stdin is not None
        if not stdin.is_closing():
            stdin.write(f"{command}\n".encode())

    async def wait(self) -> None:
        """Until the node exits; NodeExited if it failed. Meanwhile Ctrl-Z and SIGUSR1 reach it too. Cancelled
        (the coordinator fails), it tells the node to leave, which gives its partitions back at once, and waits
        for it (killing it after `LEAVE_WAIT`)."""
        with self._sharing_signals():
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

    @contextlib.contextmanager
    def _sharing_signals(self) -> Iterator[None]:
        """While the block runs, this process's job control and stack dumps reach the node, which its process
        group of its own keeps from the terminal's signals."""
        previous = signal.signal(signal.SIGTSTP, self._stop_together)
        try:
            with stackdump.passed_on(self._signal):
                yield
        finally:
            signal.signal(signal.SIGTSTP, previous)

    def _stop_together(self, signum: int, frame: FrameType | None) -> None:
        """Ctrl-Z: stop the node (SIGSTOP, which it cannot ignore), then this process as the signal's default
        action does; once this process is continued (`fg`, `bg`), continue the node."""
        self._signal(signal.SIGSTOP)
        handler = signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # returns once continued
        signal.signal(signal.SIGTSTP, handler)
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        """Send `sig` to the node, unless it has exited."""
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._process.pid, sig)


@contextlib.asynccontextmanager
async def following_coordinator(pipe: int) -> AsyncIterator[Callable[[Node], None]]:
    """The node's side, while the block runs: exit at once if the coordinator closes `pipe` (a file descriptor,
    the node's stdin: it died), from the node's start on, so that a node waiting for Redis does not outlive
    it; obey the commands read from it once the node exists and is given to what this yields."""
    loop = asyncio.get_running_loop()
    commands = _Commands()
    reader = os.fdopen(pipe, "rb", buffering=0, closefd=False)
    transport, _protocol = await loop.connect_read_pipe(lambda: commands, reader)
    try:
        yield commands.follow
    finally:
        transport.close()  # not an end of file: the node is done, the coordinator may live on


class _Commands(asyncio.Protocol):
    """The coordinator's commands, one a line, kept until there is a node to obey them (`follow`)."""

    def __init__(self) -> None:
        self._commands: dict[bytes, Callable[[], None]] | None = None
        self._pending = b""

    def follow(self, node: Node) -> None:
        self._commands = {b"finished": lambda: node.tell("finished"), b"leave": node.crawler.stop}
        self._obey()

    def data_received(self, data: bytes) -> None:
        self._pending += data
        self._obey()

    def _obey(self) -> None:
        if self._commands is None:
            return
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            command = self._commands.get(line.strip())
            if command is not None:
                command()

    def eof_received(self) -> bool:
        os._exit(1)  # the coordinator died: so does its node, without a report it would never read


@contextlib.contextmanager
def _born_ignoring(*signals: signal.Signals) -> Iterator[None]:
    """While the block runs, this process ignores `signals`, so that a process it starts ignores them from its
    first instruction: an ignored signal stays ignored through exec, until the new program handles it."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _logging_flags() -> list[str]:
    """The worker flags that make the node log as this process was set up to (`logs.setup_logging`)."""
    root = logging.getLogger()
    flags = ["--verbose"] if root.isEnabledFor(logging.INFO) else []
    if any(isinstance(handler.formatter, JsonFormatter) for handler in root.handlers):
        flags += ["--log-format", "json"]
    return flags
