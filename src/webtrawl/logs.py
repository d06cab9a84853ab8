"""Where the command's log lines go and how they look: text for people, or one JSON object a line for log
collectors (`--log-format json`), the fields a line was given (`extra=`) included."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
"""Attributes every log record has; the rest were given by the call (`extra=`)."""


class JsonFormatter(logging.Formatter):
    """A record as `{"time", "level", "logger", "message", …extra fields, "exception"}` on one line."""

    converter = time.gmtime  # type: ignore[assignment]  # UTC, as the Z says

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update((key, value) for key, value in record.__dict__.items() if key not in _STANDARD)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def setup_logging(verbose: bool, log_format: str = "text") -> None:
    """Log to stderr: warnings and errors, and with `verbose` every request and step too."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler], force=True)
