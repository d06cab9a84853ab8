"""How the commands talk to the terminal: a mistake is one line on stderr and exit 2, notes go to stderr,
and output survives a reader that stops early (`| head`)."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import click

from .errors import ConfigError, InvalidURL, NodeExited, StoreError

USAGE_ERRORS = (ConfigError, InvalidURL, StoreError, NodeExited)
"""What a user's mistake raises, or a failure told already: in one line, never as a traceback."""
NAME_HELP = "The crawl (default: the directory's only crawl)."


def fail(message: str) -> NoReturn:
    click.echo(f"webtrawl: error: {message}", err=True)
    sys.exit(2)


def say(line: str) -> None:
    click.echo(line, err=True)


def reader_gone() -> NoReturn:
    """End quietly when stdout's reader stopped early, with exit 1 since the output is incomplete."""
    # Python flushes stdout again on exit: point it where that cannot fail.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(1)


def write_out(data: bytes) -> None:
    """Write `data` to stdout (see `reader_gone`)."""
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        reader_gone()
