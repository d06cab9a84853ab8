"""The Lua scripts of the Redis frontier, each with the shared helpers (and the Bloom filter) in front, and the
one way to run many of them in a round trip (`run_together`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from redis.exceptions import NoScriptError

from .bloom import BLOOM_LUA
from .redisconn import GONE_REPLY, UNREACHABLE, persist


def _lua(name: str) -> str:
    return (files(__package__) / "lua" / name).read_text()


class Script:
    """A script registered on one client; a fenced one is called with the crawl's incarnation in front of its
    arguments."""

    def __init__(self, client: Any, source: str, incarnation: str | None) -> None:
        self._script = client.register_script(source)
        self._head = [] if incarnation is None else [incarnation]

    def __call__(self, *, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """The reply (a coroutine of it on an asyncio client)."""
        return self._script(keys=keys, args=[*self._head, *args])

    def queue(self, pipe: Any, keys: Sequence[Any], args: Sequence[Any]) -> None:
        """Queue a call on `pipe` by its SHA alone: `run_together` loads the script where Redis lacks it."""
        pipe.evalsha(self._script.sha, len(keys), *keys, *self._head, *args)

    async def load(self, client: Any) -> None:
        """Make the script known to Redis (on a Cluster, to every master)."""
        self._script.sha = await client.script_load(self._script.script)


@dataclass(frozen=True)
class Call:
    """One script call of a `run_together`."""

    script: Script
    key: str
    args: Sequence[Any]


async def run_together(
    client: Any, what: str, calls: Sequence[Call], *, on_lost: Callable[[], None] | None = None
) -> list[Any]:
    """The replies of `calls`, sent in one pipeline: one round trip where one call each would take as many.

    Calls run in the order given on a server (on a Cluster, each master runs its own in that order), none
    inside a transaction: each is one script, atomic on its partition, as a lone call would be. A call Redis
    did not run (it lacked the script after a restart, or was full) is sent again alone with those like it,
    never one that ran; a pipeline cut off by a lost connection is sent again whole, as `persist` does with
    any call whose reply did not arrive (the scripts are made for that), after `on_lost()`.
    """
    replies: list[Any] = [None] * len(calls)
    pending = list(range(len(calls)))

    async def attempt() -> None:
        nonlocal pending
        while pending:
            pipe = client.pipeline(transaction=False)
            for i in pending:
                calls[i].script.queue(pipe, [calls[i].key], calls[i].args)
            try:
                results = await pipe.execute(raise_on_error=False)
            except UNREACHABLE:
                if on_lost is not None:
                    on_lost()
                raise
            unknown, failed, errors = set(), [], []
            for i, result in zip(pending, results, strict=True):
                if isinstance(result, NoScriptError):
                    unknown.add(calls[i].script)
                    failed.append(i)
                elif isinstance(result, Exception):
                    failed.append(i)
                    errors.append(result)
                else:
                    replies[i] = result
            pending = failed
            if on_lost is not None and any(isinstance(error, UNREACHABLE) for error in errors):
                on_lost()  # a Cluster pipeline gives a reply lost on one master in place, and raises nothing
            for script in unknown:
                await script.load(client)
            if errors:  # a crawl Redis lost says so first; `persist` waits out a full or unreachable Redis and
                # sends what is pending again
                raise next((error for error in errors if str(error).startswith(GONE_REPLY)), errors[0])

    if calls:
        await persist(what, attempt)
    return replies


class Scripts:
    """The partition scripts, registered on one client (asyncio or blocking, standalone or Cluster).

    Each partition script is called with one key, the partition's counters hash, which routes it to the
    partition's node.
    Every call carries `incarnation`, the id the crawl got when it was created in this Redis: a partition
    of another incarnation (or of none: Redis lost the crawl) refuses it, so a node of a crawl that Redis
    forgot can write nothing into the empty Redis, nor into the crawl rebuilt there (`common.lua`).
    """

    def __init__(self, client: Any, incarnation: str = "") -> None:
        common = _lua("common.lua")

        def partition_script(source: str) -> Script:
            return Script(client, common + source, incarnation)

        self.add = partition_script(BLOOM_LUA + _lua("add.lua"))
        self.claim = partition_script(_lua("claim.lua"))
        self.complete = partition_script(_lua("complete.lua"))
        self.lease = partition_script(_lua("lease.lua"))
        self.revisit = partition_script(_lua("revisit.lua"))
        self.ended = partition_script(BLOOM_LUA + _lua("ended.lua"))
        self.widen_scope = Script(client, _lua("scope.lua"), incarnation)
        """Not a partition's: called with the crawl's scope set (`Keys.scope`), fenced alike."""
        self.host_slots = Script(client, _lua("hostslots.lua"), None)
        """Not fenced: a host's slots are no partition's (`cluster.hostlimits`)."""
