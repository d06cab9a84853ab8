"""Named crash points, so tests can kill the process at the moments that matter for crash safety.

The commit order (records flushed, then one SQLite transaction, then files cut back on resume) is only
worth something if a crawl killed at any step resumes without losing or duplicating anything. Tests prove
it by starting a real crawl with `WEBTRAWL_CRASH_AT=name` (or `name:N`, to die the N-th time the point is
reached, counting from 1) and checking what the next run finds. SIGKILL is used because it is what a
power cut or the OOM killer looks like: no `finally`, no atexit, no buffered write left to flush.

The variable is read once, at import. When it is unset, `crash_point` costs one lookup in an empty dict.
"""

from __future__ import annotations

import os
import signal


def _parse(spec: str | None) -> dict[str, int]:
    if not spec:
        return {}
    name, _, nth = spec.partition(":")
    return {name: int(nth) if nth else 1}


_ARMED: dict[str, int] = _parse(os.environ.get("WEBTRAWL_CRASH_AT"))
_reached: dict[str, int] = {}


def armed(name: str) -> bool:
    """Whether `name` may kill this process: lets a caller set up a half-done state only when needed."""
    return name in _ARMED


def crash_point(name: str) -> None:
    """Kill the process with SIGKILL if `WEBTRAWL_CRASH_AT` names this point and its count is reached."""
    if name in _ARMED:
        count = _reached[name] = _reached.get(name, 0) + 1
        if count == _ARMED[name]:
            os.kill(os.getpid(), signal.SIGKILL)
